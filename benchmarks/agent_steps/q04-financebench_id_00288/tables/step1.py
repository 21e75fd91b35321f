# Cash and cash equivalents in Best Buy's balance sheets: each filing's cells, with their dates.
rows = query_db(
    'SELECT c.source, c.page, c.start, c."end", '
    "c.title, c.header, c.period_end, c.text, c.unit FROM _cells c "
    "JOIN _sources s ON s.path = c.source "
    "WHERE s.issuer LIKE 'Best Buy%' AND s.year >= 2023 AND c.label = 'Cash and cash equivalents' "
    "ORDER BY c.source, c.page, c.column_no LIMIT 20"
)
for r in rows:
    print(
        r["_evidence"],
        r["source"],
        f"p.{r['page']}",
        r["title"],
        "|",
        r["header"],
        r["period_end"],
        "|",
        r["text"],
        r["unit"],
    )
