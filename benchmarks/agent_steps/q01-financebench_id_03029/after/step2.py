# p.60 is the cash flow statement (header seen): read the whole page, its rows under their columns.
print(read_page("uploads/pdfs/3M_2018_10K.pdf", page=60, max_chars=4000))
