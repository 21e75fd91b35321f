# Net revenue by business segment in JPMorgan's 2021 Q1 10-Q: the first column of the rows named
# after its segments.
rows = query_db(
    'SELECT c.source, c.page, c.start, c."end", '
    "c.title, c.section, c.label, c.header, c.text, c.unit FROM _cells c "
    "JOIN _sources s ON s.path = c.source "
    "WHERE s.issuer LIKE 'JPMorgan%' AND s.period LIKE 'Q1 2021%' "
    "AND c.label IN ('Consumer & Community Banking', 'Corporate & Investment Bank', 'Commercial Banking', "
    "'Asset & Wealth Management', 'Corporate') AND c.column_no = 1 ORDER BY c.page LIMIT 40"
)
for r in rows:
    print(
        r["_evidence"],
        r["source"],
        f"p.{r['page']}",
        r["title"],
        "|",
        r["section"],
        "|",
        r["label"],
        "|",
        r["header"],
        "|",
        r["text"],
        r["unit"],
    )
