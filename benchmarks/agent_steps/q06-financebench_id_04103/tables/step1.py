# The cash conversion cycle needs inventories, receivables and payables for FY2018 and FY2019 and
# FY2019's net sales and cost of sales: all statement cells of General Mills' 2019 10-K.
rows = query_db(
    'SELECT c.source, c.page, c.start, c."end", '
    "c.title, c.label, c.header, c.year, c.text, c.unit FROM _cells c "
    "JOIN _sources s ON s.path = c.source "
    "WHERE s.issuer LIKE 'General Mills%' AND s.year = 2019 AND c.year IN (2018, 2019) "
    "AND c.label IN ('Inventories', 'Receivables', 'Accounts payable', 'Net sales', 'Cost of sales') "
    "ORDER BY c.label, c.page, c.column_no LIMIT 40"
)
for r in rows:
    print(
        r["_evidence"],
        r["source"],
        f"p.{r['page']}",
        r["title"],
        "|",
        r["label"],
        "|",
        r["header"],
        "|",
        r["text"],
        r["unit"],
    )
