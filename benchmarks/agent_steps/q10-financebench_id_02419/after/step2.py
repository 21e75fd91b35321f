# Nothing about a spin-off on those pages: only chunks that say "spin-off" (or "spinoff") word for word.
for word in ("spin-off", "spinoff", "separation"):
    hits = await search_source(
        "Pfizer spin-off of a business",
        top_k=3,
        sources=["uploads/pdfs/Pfizer_2023Q2_10Q.pdf"],
        must_contain=word,
    )
    for h in hits:
        print(word, h.ref, h.source_path, f"p.{h.page}")
        print(h.chunk_text[:700])
