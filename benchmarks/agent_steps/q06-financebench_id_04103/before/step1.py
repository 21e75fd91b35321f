income, balance = await asyncio.gather(
    search_source(
        "General Mills fiscal 2019 consolidated statements of earnings net sales cost of sales",
        top_k=3,
        issuer="General Mills",
        year=2019,
    ),
    search_source(
        "General Mills consolidated balance sheets receivables inventories accounts payable 2019 2018",
        top_k=3,
        issuer="General Mills",
        year=2019,
    ),
)
for h in income + balance:
    print(h.ref, h.source_path, f"p.{h.page}")
    print(h.chunk_text[:900])
