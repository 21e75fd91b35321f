hits = await search_source(
    "PepsiCo 2022 restructuring and impairment charges consolidated statement of income",
    top_k=5,
    issuer="PepsiCo",
    year=2022,
)
for h in hits:
    print(h.ref, h.source_path, f"p.{h.page}")
    print(h.chunk_text[:700])
