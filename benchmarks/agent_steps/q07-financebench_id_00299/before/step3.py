# p.19's segment table was cut before the Corporate column's figures: run the same search, print it all.
hits = await search_source(
    "Segment results total net revenue three months ended March 31, 2021 Consumer & Community Banking "
    "Corporate & Investment Bank Commercial Banking Asset & Wealth Management Corporate",
    top_k=1,
    sources=["uploads/pdfs/JPMORGAN_2021Q1_10Q.pdf"],
)
for h in hits:
    print(h.ref, h.source_path, f"p.{h.page}")
    print(h.chunk_text[:3000])
