hits = await search_source(
    "JPMorgan first quarter 2021 net revenue by business segment Consumer & Community Banking "
    "Corporate & Investment Bank Commercial Banking Asset & Wealth Management Corporate",
    top_k=5,
    issuer="JPMorgan",
    doc_type="quarterly report",
)
for h in hits:
    print(h.ref, h.source_path, f"p.{h.page}")
    print(h.chunk_text[:700])
