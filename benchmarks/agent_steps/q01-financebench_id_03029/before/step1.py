hits = await search_source(
    "3M FY2018 capital expenditure purchases of property, plant and equipment cash flow statement",
    top_k=5,
    issuer="3M",
    year=2018,
)
for h in hits:
    print(h.ref, h.source_path, f"p.{h.page}")
    print(h.chunk_text[:700])
