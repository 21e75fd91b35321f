# Note 25 of the 2021 Q1 10-Q (p.160) is cut where its segment results table starts: read on.
print(read_page("uploads/pdfs/JPMORGAN_2021Q1_10Q.pdf", page=160, max_chars=5000))
