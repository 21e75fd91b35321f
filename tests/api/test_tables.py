"""The table browser's API (issue 26, item 8: datasette-grade tables) over the sample corpus's typed
`product` table, through a real server: filters in datasette's `column__op=value` spelling, facets,
CSV and JSON exports of every filtered row, and the SQL box over the read-only connection."""

from __future__ import annotations

import csv
import io
import json

from tests.api.support import ServerFactory

PRODUCT = "/api/contexts/acme/tables/product"


def test_filters_narrow_the_rows_and_the_total(make_server: ServerFactory) -> None:
    client = make_server().client
    everything = client.get(PRODUCT, params={"limit": 500}).json()
    columns = everything["columns"]
    price, category = columns.index("price_usd"), columns.index("category")
    expensive = client.get(PRODUCT, params={"price_usd__gt": "1000", "limit": 500}).json()
    assert (
        expensive["total"] == sum(1 for r in everything["rows"] if r[price] > 1000) == len(expensive["rows"])
    )
    assert 0 < expensive["total"] < everything["total"]
    assert expensive["filters"] == [{"column": "price_usd", "op": "gt", "value": "1000"}]
    pressure = client.get(PRODUCT, params={"category": "Pressure"}).json()  # a bare column is `exact`
    assert pressure["total"] and {r[category] for r in pressure["rows"]} == {"Pressure"}
    both = client.get(PRODUCT, params={"category": "Pressure", "price_usd__lte": "1300"}).json()
    assert {(r[category], r[price] <= 1300) for r in both["rows"]} == {("Pressure", True)}
    # `contains` is a substring, not a pattern: `%` and `_` match themselves only.
    assert client.get(PRODUCT, params={"name__contains": "Sensor"}).json()["total"] > 0
    assert client.get(PRODUCT, params={"name__contains": "%"}).json()["total"] == 0
    assert client.get(PRODUCT, params={"sku__startswith": "AX-"}).json()["total"] > 0
    assert client.get(PRODUCT, params={"_conflicts__notnull": "1"}).json()["total"] == everything["total"]

    bad = client.get(PRODUCT, params={"price; DROP TABLE product": "1"})
    assert bad.status_code == 400 and bad.json()["code"] == "invalid_request"
    assert bad.json()["field"] == "price; DROP TABLE product"


def test_facets_count_the_values_under_the_filters(make_server: ServerFactory) -> None:
    client = make_server().client
    everything = client.get(PRODUCT, params={"limit": 500}).json()
    category = everything["columns"].index("category")
    counts: dict[str, int] = {}
    for row in everything["rows"]:
        counts[row[category]] = counts.get(row[category], 0) + 1
    [facet] = client.get(PRODUCT, params={"facet": "category"}).json()["facets"]
    assert facet["column"] == "category" and not facet["truncated"]
    assert {v["value"]: v["count"] for v in facet["values"]} == counts
    assert [v["count"] for v in facet["values"]] == sorted(counts.values(), reverse=True)
    [narrowed] = client.get(PRODUCT, params={"facet": "category", "category": "Pressure"}).json()["facets"]
    assert narrowed["values"] == [{"value": "Pressure", "count": counts["Pressure"]}]
    refused = client.get(PRODUCT, params={"facet": "nope"})
    assert refused.status_code == 400 and refused.json()["field"] == "facet"


def test_exports_carry_every_filtered_row(make_server: ServerFactory) -> None:
    client = make_server().client
    page = client.get(PRODUCT, params={"price_usd__gt": "500", "order": "price_usd", "limit": 500}).json()
    exported = client.get(PRODUCT, params={"price_usd__gt": "500", "order": "price_usd", "format": "csv"})
    assert exported.status_code == 200 and exported.headers["content-type"].startswith("text/csv")
    assert 'filename="product.csv"' in exported.headers["content-disposition"]
    rows = list(csv.reader(io.StringIO(exported.text)))
    assert rows[0] == page["columns"] and len(rows) - 1 == page["total"]
    assert [r[page["columns"].index("sku")] for r in rows[1:]] == [
        r[page["columns"].index("sku")] for r in page["rows"]
    ]
    objects = json.loads(client.get(PRODUCT, params={"price_usd__gt": "500", "format": "rows"}).text)
    assert len(objects) == page["total"] and set(objects[0]) == set(page["columns"])
    provenance = json.loads(objects[0]["_provenance"])
    assert provenance[0]["source"].startswith("uploads/") and provenance[0]["quote"]


def test_the_sql_box_reads_and_never_writes(make_server: ServerFactory) -> None:
    client = make_server().client
    sql = "/api/contexts/acme/sql"
    answer = client.post(
        sql,
        json={
            "sql": "SELECT category, count(*) AS n FROM product WHERE price_usd > ? GROUP BY 1",
            "params": [100],
        },
    ).json()
    assert answer["columns"] == ["category", "n"] and answer["rows"] and answer["truncated"] is False
    capped = client.post(sql, json={"sql": "SELECT * FROM _chunks", "max_rows": 2}).json()
    assert len(capped["rows"]) == 2 and capped["truncated"] is True
    for statement in (
        "DELETE FROM product",
        "DROP TABLE product",
        "ATTACH DATABASE '/tmp/x.db' AS x",
        "SELECT 1; DELETE FROM product",
        "SELECT load_extension('x')",
    ):
        refused = client.post(sql, json={"sql": statement})
        assert refused.status_code == 400 and refused.json()["code"] == "query_error", statement
    assert client.get(PRODUCT).json()["total"] > 0  # nothing was written
    empty = client.post(sql, json={"sql": ""})
    assert empty.status_code == 400 and empty.json()["field"] == "sql"
    assert client.post("/api/contexts/nope/sql", json={"sql": "SELECT 1"}).status_code == 404
