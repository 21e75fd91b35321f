# Capital expenditure is the cash flow statement's purchases of property, plant and equipment: read the
# cell for FY2018 from the tables of 3M's 2018 10-K, with its row, column, unit and page.
rows = query_db(
    'SELECT c.source, c.page, c.start, c."end", '
    "c.title, c.label, c.header, c.text, c.unit FROM _cells c "
    "JOIN _sources s ON s.path = c.source "
    "WHERE s.issuer = '3M' AND s.year = 2018 AND c.year = 2018 "
    "AND c.label LIKE 'Purchases of property, plant%'"
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
