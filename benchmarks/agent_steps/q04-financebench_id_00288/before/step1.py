rows = query_db(
    "SELECT path, doc_type, period, year FROM _sources WHERE issuer LIKE '%Best Buy%' ORDER BY year"
)
print(rows)
hits = await search_source(
    "Best Buy cash and cash equivalents balance sheet Q2 FY2024 compared to end of FY2023",
    top_k=5,
    issuer="Best Buy",
    doc_type="quarterly report",
)
for h in hits:
    print(h.ref, h.source_path, f"p.{h.page}")
    print(h.chunk_text[:700])
