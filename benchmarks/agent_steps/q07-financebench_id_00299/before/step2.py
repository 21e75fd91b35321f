# Note 25 of the 2021 Q1 10-Q (p.160) is cut where its segment results table starts.
hits = await search_source(
    "Segment results total net revenue three months ended March 31, 2021 Consumer & Community Banking "
    "Corporate & Investment Bank Commercial Banking Asset & Wealth Management Corporate",
    top_k=5,
    sources=["uploads/pdfs/JPMORGAN_2021Q1_10Q.pdf"],
)
for h in hits:
    print(h.ref, h.source_path, f"p.{h.page}")
    print(h.chunk_text[:900])
