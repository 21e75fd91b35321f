hits = await search_source(
    "American Express 2022 consolidated statements of income total revenues net of interest expense "
    "pretax income operating margin",
    top_k=5,
    issuer="American Express",
    year=2022,
)
for h in hits:
    print(h.ref, h.source_path, f"p.{h.page}")
    print(h.chunk_text[:700])
