# Revenue for FY2017 and FY2016 from the income statement's cells of Amazon's 2017 10-K.
rows = query_db(
    'SELECT c.source, c.page, c.start, c."end", '
    "c.title, c.label, c.header, c.year, c.text, c.unit FROM _cells c "
    "JOIN _sources s ON s.path = c.source "
    "WHERE s.issuer LIKE 'Amazon%' AND s.year = 2017 AND c.year IN (2016, 2017) "
    "AND c.label = 'Total net sales' ORDER BY c.page, c.column_no LIMIT 12"
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
