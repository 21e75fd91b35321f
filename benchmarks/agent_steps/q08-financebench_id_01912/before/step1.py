hits = await search_source(
    "MGM Resorts full year 2022 net revenues by region Las Vegas Strip Regional Operations MGM China "
    "compared to 2021",
    top_k=5,
    issuer="MGM",
    year=2022,
)
for h in hits:
    print(h.ref, h.source_path, f"p.{h.page}")
    print(h.chunk_text[:700])
