"""Tables as a person reads them (issue 43, item 1), scored against hand labels.

    .venv/bin/python benchmarks/table_labels.py [--pdfs ../shared/data/financebench/pdfs]

`benchmarks/table_pages.json` holds forty FinanceBench pages whose tables were labelled by hand from
the page text and the words' positions (not from Sleuth's output): each table's title and unit, each
figure column's period (its end, its length in months, its year), each figure row's whole label and
group. Each labelled table is matched to the table the parser found on the page that shares the most
row labels with it (of two that share as many, the one whose columns' periods agree with more of the
labelled ones: a release's quarter and its year share their rows), and read for:

- **cells fully right**: a cell of a labelled row whose row label is whole and right, whose column's
  period is right (its end date where the label gives one, else its year; its length in months where the
  label gives one) and whose unit is right; a labelled row the parser did not find counts every column
  as wrong;
- **rows found** (the label whole) and **rows with their group**;
- **tables whose title is right** (the label's title, case and spacing aside, or contained in it);
- **CPU a page**: the parse of the labelled documents, tables included, over all their pages.

Run it on a tree before a change (`PYTHONPATH=that/src`) and after, in one sitting, for the before/after.
"""

from __future__ import annotations

import argparse
import json
import re
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

from sleuth.compile.pages import Page
from sleuth.compile.parse import pdf
from sleuth.compile.table_cells import Cell, cells_of

LABELS = Path(__file__).with_name("table_pages.json")


def _norm(text: str | None) -> str:
    return re.sub(r"[^a-z0-9]+", " ", (text or "").casefold()).strip()


def _period_right(cell: Cell, column: dict[str, Any], length: bool = True) -> bool:
    """The column's end date where the label gives one, else its year; with `length`, its months too
    (a tree before issue 43 has no `months`: the measure without it compares like with like)."""
    if column.get("period_end"):
        if cell.period_end != column["period_end"]:
            return False
    elif column.get("year") is not None and cell.year != column["year"]:
        return False
    months = column.get("months")
    return not length or months is None or getattr(cell, "months", None) == months


def _columns_agreeing(found: list[Cell], columns: list[dict[str, Any]]) -> int:
    """How many of a found table's columns have the labelled column's period: the tie-break between
    tables of the same rows (a release's quarter and its year, one above the other)."""
    first: dict[int, Cell] = {}
    for cell in found:
        first.setdefault(cell.column_no, cell)
    return sum(
        1
        for number, cell in first.items()
        if number - 1 < len(columns) and _period_right(cell, columns[number - 1])
    )


def _title_right(found: str | None, wanted: str | None) -> bool:
    if not wanted:
        return True
    got, want = _norm(found), _norm(wanted)
    return bool(got) and (got == want or want in got or got in want)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--pdfs", type=Path, default=Path("../shared/data/financebench/pdfs"))
    parser.add_argument("--misses", type=int, default=12, help="wrong cells to show")
    args = parser.parse_args()
    labelled: list[dict[str, Any]] = json.loads(LABELS.read_text())["pages"]
    parsed: dict[str, list[Page]] = {}
    cpu, pages_read = 0.0, 0
    for name in sorted({entry["file"] for entry in labelled}):
        began = time.process_time()
        parsed[name] = pdf.parse((args.pdfs / name).read_bytes()).pages
        cpu += time.process_time() - began
        pages_read += len(parsed[name])
    counts: dict[str, int] = defaultdict(int)
    misses: list[str] = []
    for entry in labelled:
        name, number = entry["file"], entry["page"]
        cells = list(cells_of(name, parsed[name][number - 1]))
        by_table: dict[int, list[Cell]] = defaultdict(list)
        for cell in cells:
            by_table[cell.table_no].append(cell)
        for table in entry["tables"]:
            rows = [row for row in table["rows"] if _norm(row["label"])]
            wanted = {_norm(row["label"]) for row in rows}
            columns = table["columns"]
            best = max(
                by_table.values(),
                key=lambda found: (
                    len(wanted & {_norm(c.label) for c in found}),
                    _columns_agreeing(found, columns),
                ),
                default=[],
            )
            counts["tables"] += 1
            counts["titles right"] += _title_right(best[0].title if best else None, table.get("title"))
            for row in rows:
                counts["rows"] += 1
                mine = [c for c in best if _norm(c.label) == _norm(row["label"])]
                counts["cells"] += max(len(columns), len(mine))
                if not mine:
                    continue
                counts["rows found"] += 1
                counts["rows with their group"] += _norm(mine[0].section) == _norm(row.get("group"))
                for cell in mine:
                    column = columns[cell.column_no - 1] if cell.column_no - 1 < len(columns) else {}
                    right = (
                        bool(column)
                        and _period_right(cell, column)
                        and (cell.unit or None) == (table.get("unit") or None)
                    )
                    counts["cells right"] += right
                    counts["cells right, length aside"] += (
                        bool(column)
                        and _period_right(cell, column, length=False)
                        and (cell.unit or None) == (table.get("unit") or None)
                    )
                    if not right and len(misses) < args.misses:
                        misses.append(
                            f"- {name} p.{number} {row['label']!r} col {cell.column_no}: "
                            f"header {cell.header!r} "
                            f"end {cell.period_end} months {getattr(cell, 'months', None)} unit {cell.unit} "
                            f"(wanted {column.get('period_end') or column.get('year')} "
                            f"{column.get('months')} {table.get('unit')})"
                        )
    per_page = cpu / max(pages_read, 1) * 1000
    print(f"{len(labelled)} labelled pages of {len(parsed)} documents; parse {per_page:.2f} ms CPU a page\n")
    print("| measure | value |")
    print("|---|---|")
    for label, part, whole in (
        ("cells fully right (label, period, unit)", "cells right", "cells"),
        ("... the period's length aside", "cells right, length aside", "cells"),
        ("rows found, label whole", "rows found", "rows"),
        ("rows with their group", "rows with their group", "rows"),
        ("tables whose title is right", "titles right", "tables"),
    ):
        share = counts[part] / counts[whole] if counts[whole] else 0.0
        print(f"| {label} | {counts[part]} / {counts[whole]} ({share:.1%}) |")
    if misses:
        print("\nWrong cells (first ones):\n")
        print("\n".join(misses))


if __name__ == "__main__":
    main()
