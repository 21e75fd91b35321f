hits = await search_source(
    "Pfizer Q2 2023 spin-off separation of a business segment",
    top_k=5,
    issuer="Pfizer",
    year=2023,
)
for h in hits:
    print(h.ref, h.source_path, f"p.{h.page}")
    print(h.chunk_text[:700])
