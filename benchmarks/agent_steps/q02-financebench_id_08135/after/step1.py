hits = await search_source(
    "Amazon total net sales 2017 compared to 2016 consolidated statements of operations",
    top_k=5,
    issuer="Amazon",
    year=2017,
)
for h in hits:
    print(h.ref, h.source_path, f"p.{h.page}")
    print(h.chunk_text[:700])
