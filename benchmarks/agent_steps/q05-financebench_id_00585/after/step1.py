hits = await search_source(
    "Boeing effective income tax rate 2022 compared to 2021",
    top_k=5,
    issuer="Boeing",
    year=2022,
)
for h in hits:
    print(h.ref, h.source_path, f"p.{h.page}")
    print(h.chunk_text[:700])
