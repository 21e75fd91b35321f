"""Hostile text at the edges of the API (issue 40, item 11), through a real server:

- a CSV export opens in a spreadsheet as data: a cell a document wrote as `=cmd|' /C calc'!A0` (or
  starting `+`, `-`, `@`, a tab or a return) is written with a `'` in front, while numbers, and text
  that is only a plain number (`-12.5`), stay as they are; the JSON export keeps every value as stored;
- a name that hides a character (U+200B zero-width space, a BOM, a joiner beside ASCII) is refused as
  an upload's filename and skipped as an archive member, while Persian and emoji names that need a
  joiner between their own characters are kept.
"""

from __future__ import annotations

import csv
import io
import json

import httpx

from sleuth.format.spreadsheet import safe_cell
from tests.api.support import error, make_zip, upload, wait_task

#: A ledger a document author controls: each text cell would run as a formula when the CSV is opened.
LEDGER = (
    'label,amount,note\n"=cmd|\' /C calc\'!A0",-12.5,"@SUM(1+1)"\n"+1+2",3,"-2+3"\nplain,-7,=HYPERLINK(A1)\n'
)
RUNS = ("=", "+", "-", "@", "\t", "\r")


def _curate(client: httpx.Client, slug: str) -> None:
    task = wait_task(client, client.post(f"/api/contexts/{slug}/curate").json()["task_id"], timeout=120)
    assert task["state"] == "completed", task["error"]


def test_csv_exports_open_as_data_not_formulas(client: httpx.Client, context: str) -> None:
    upload(client, context, "ledger.csv", LEDGER.encode()).raise_for_status()
    _curate(client, context)
    cells = f"/api/contexts/{context}/tables/_cells"
    exported = client.get(cells, params={"format": "csv", "order": "row_no"})
    assert exported.status_code == 200 and exported.headers["content-type"].startswith("text/csv")
    rows = list(csv.reader(io.StringIO(exported.text)))
    header, body = rows[0], rows[1:]
    at = {name: header.index(name) for name in ("label", "header", "text", "value")}
    by_cell = {(r[at["label"]], r[at["header"]]): r for r in body}
    assert set(by_cell) >= {("'=cmd|' /C calc'!A0", "amount"), ("'+1+2", "note"), ("plain", "note")}
    assert by_cell["'=cmd|' /C calc'!A0", "note"][at["text"]] == "'@SUM(1+1)"
    assert by_cell["'+1+2", "note"][at["text"]] == "'-2+3"
    assert by_cell["plain", "note"][at["text"]] == "'=HYPERLINK(A1)"
    # Numbers stay numbers: the REAL value and the text that is only a number.
    amount = by_cell["'=cmd|' /C calc'!A0", "amount"]
    assert (amount[at["text"]], amount[at["value"]]) == ("-12.5", "-12.5")
    assert by_cell["plain", "amount"][at["value"]] == "-7.0"
    # No cell of the whole export starts a formula, unless it is a plain number.
    for row in rows:
        for cell in row:
            assert not cell.startswith(RUNS) or safe_cell(cell) == cell, cell

    # The JSON export is not a spreadsheet: it carries the values as they are stored.
    objects = json.loads(client.get(cells, params={"format": "rows"}).text)
    assert "=cmd|' /C calc'!A0" in {o["label"] for o in objects}


def test_safe_cell_keeps_numbers_and_neutralises_the_rest() -> None:
    for kept in (-12.5, 3, None, "", "-12.5", "+3", "1e-3", "-.5", "plain", "a=b", "12-3"):
        assert safe_cell(kept) == kept
    for hostile in ("=1+1", "+1+2", "-2+3", "-A1", "@SUM(A1)", "\t=1", "\r=1", "  =1+1", "\n-1+1", "-"):
        assert safe_cell(hostile) == "'" + hostile


#: Names that look like another name: the invisible character sits beside ASCII or prints as nothing.
HIDDEN = ("re\u200bport.md", "\ufeffreport.md", "report\u2060.md", "re\u200dport.md", "a\u200c.md")
#: Names that need a joiner between their own characters (Persian ZWNJ, an emoji ZWJ sequence).
JOINED = ("\u0645\u06cc\u200c\u062e\u0648\u0627\u0647\u0645.md", "\U0001f469\u200d\U0001f4bb.md")


def test_names_that_hide_a_character_are_refused(client: httpx.Client, context: str) -> None:
    for name in HIDDEN:
        body = error(upload(client, context, name, b"x"), 400, "unsafe_path")
        assert body["field"] == "file" and "invisible character (U+" in body["message"], body
        error(upload(client, context, "a.md", b"x", path=f"uploads/{name}"), 400, "unsafe_path")
    for name in JOINED:
        upload(client, context, name, b"# joined\n").raise_for_status()

    members = {"ok.md": b"# ok\n", "re\u200bport.md": b"x", "d\ufeff/y.md": b"y"}
    task = wait_task(client, upload(client, context, "hidden.zip", make_zip(members)).json()["task_id"])
    assert task["state"] == "completed", task["error"]
    skipped = [r for r in task["output"]["files"] if r["action"] == "skipped"]
    assert len(skipped) == 2 and all("invisible character" in r["reason"] for r in skipped), skipped
    listed = client.get(f"/api/contexts/{context}/source/manifest").json()["files"]
    assert sorted(f["path"] for f in listed) == sorted(
        ["uploads/hidden/ok.md", *(f"uploads/{name}" for name in JOINED)]
    )
