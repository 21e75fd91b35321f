# Nothing about a spin-off on those pages: look for the words themselves in the same 10-Q.
hits = await search_source_by_keyword(
    "spin-off spinoff separation discontinued operations Upjohn Viatris",
    top_k=5,
    sources=["uploads/pdfs/Pfizer_2023Q2_10Q.pdf"],
)
for h in hits:
    print(h.ref, h.source_path, f"p.{h.page}")
    print(h.chunk_text[:700])
