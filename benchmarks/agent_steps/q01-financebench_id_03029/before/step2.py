# p.60 is the cash flow statement (header seen); its capital expenditure row was not printed.
hits = await search_source_by_keyword(
    '"Purchases of property, plant and equipment"', top_k=3, sources=["uploads/pdfs/3M_2018_10K.pdf"]
)
for h in hits:
    print(h.ref, h.source_path, f"p.{h.page}")
    print(h.chunk_text[:1200])
