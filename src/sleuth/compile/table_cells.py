"""Every cell of every table the parsers found, as records a SQL query can read (issue 25, item 2).

A cell says what its row is (`label`, and the text row above it that names its group: `section`),
which column (`header`, and the period the header names: `year`, `period_end`), the `unit` the
table states, its `text` as printed and its `value` as a number, and where it is: its span of the
page text, so a figure read from `_cells` is cited verbatim like any other span. Written to
`tables.sqlite` as `_cells` (spec/context.md §7.5).
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

from sleuth.compile.pages import Page, Table, TableRow
from sleuth.compile.typed_tables import coerce
from sleuth.format.dates import MONTHS
from sleuth.format.spans import PageSpan
from sleuth.format.text import collapsed

_YEAR = re.compile(r"(?<!\d)(?:19[5-9]\d|20\d\d)(?!\d)")
_DATE = re.compile(
    r"\b(Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec)[a-z]*\.?\s+(\d{1,2}),?\s+((?:19|20)\d\d)\b",
    re.IGNORECASE,
)
_CHANGE = re.compile(r"(?:19|20)\d\d\s*(?:vs\.?|versus|to|over|[-–])\s*(?:19|20)\d\d", re.IGNORECASE)
#: At most this many characters of a label, header or cell text are kept (a runaway row stays small).
_MAX_TEXT = 300


@dataclass(frozen=True, kw_only=True)
class Cell(PageSpan):
    table_no: int  # the table's place on its page, from 1
    row_no: int  # the row's place in its table, from 1 (the header is row 0)
    column_no: int  # the cell's column, from 1 (the label is column 0)
    label: str  # the row's label
    section: str | None  # the nearest text row above, in the same table: the row's group
    header: str | None  # the column's header; None where the row's cells do not fill the columns
    year: int | None  # the first year the header names
    period_end: str | None  # ISO date, when the header names a month, day and year
    unit: str | None  # `thousands`, `millions`, `billions`, as the table states it
    title: str | None  # the table's caption
    text: str  # the cell as printed
    value: float | None  # the cell as a number: `(1,577)` is -1577.0, `—` and text are None


def cells_of(source_path: str, page: Page) -> Iterator[Cell]:
    for table_no, table in enumerate(page.tables, start=1):
        yield from _table_cells(source_path, page, table_no, table)


def every_cell(pages_by_source: Iterable[tuple[str, list[Page]]]) -> Iterator[Cell]:
    for source_path, pages in pages_by_source:
        for page in pages:
            yield from cells_of(source_path, page)


def _table_cells(source_path: str, page: Page, table_no: int, table: Table) -> Iterator[Cell]:
    if len(table.rows) < 2:
        return
    headers = table.rows[0].cells[1:]
    periods = [_period(h) for h in headers]
    section: str | None = None
    for row_no, row in enumerate(table.rows[1:], start=1):
        if len(row.cells) == 1:
            section = _short(row.cells[0]) or None  # a row of text alone names the rows below it
            continue
        aligned = len(row.cells) - 1 == len(headers)
        spans = _spans(page.text, row)
        for column_no, text in enumerate(row.cells[1:], start=1):
            span = spans[column_no]
            if span is None:
                continue
            value = figure_value(text)
            header = (headers[column_no - 1] or None) if aligned else None
            year, period_end = periods[column_no - 1] if aligned else (None, None)
            yield Cell(
                source_path=source_path,
                page=page.page,
                start=span[0],
                end=span[1],
                table_no=table_no,
                row_no=row_no,
                column_no=column_no,
                label=_short(row.cells[0]),
                section=section,
                header=_short(header) if header is not None else None,
                year=year,
                period_end=period_end,
                unit=table.unit,
                title=table.title,
                text=_short(text),
                value=value,
            )


def figure_value(text: str) -> float | None:
    """A cell as a number: `$ (1,577)`, `(1,577)`, `−12` and `(12)%` are negative, `12.5 %` is 12.5,
    `—` and text are None."""
    cleaned = text.strip().replace("−", "-")
    for sign in "$€£¥ ":
        cleaned = cleaned.replace(sign, "")
    cleaned = cleaned.removesuffix("%")
    negative = (cleaned.startswith("(") and cleaned.endswith(")")) or cleaned.startswith("-")
    value, ok = coerce(cleaned.strip("()-+"), "REAL")
    if not ok or value is None:
        return None
    return -float(value) if negative else float(value)


def _spans(text: str, row: TableRow) -> list[tuple[int, int] | None]:
    """Each cell's span: the parser's where it gave them, else the cell's text found in the row's
    line in order (a Markdown or HTML row is its cells joined by ` | `)."""
    if row.spans is not None and len(row.spans) == len(row.cells):
        return list(row.spans)
    out: list[tuple[int, int] | None] = []
    cursor = row.start
    for cell in row.cells:
        found = text.find(cell, cursor, row.end) if cell else -1
        if found < 0:
            out.append(None)
            continue
        out.append((found, found + len(cell)))
        cursor = found + len(cell)
    return out


def _period(header: str) -> tuple[int | None, str | None]:
    """The header's year and period end; none for a column of change between two periods."""
    if _CHANGE.search(header) or len(set(_YEAR.findall(header))) > 1:
        return None, None  # a change between periods, or a header that does not say which year
    date = _DATE.search(header)
    if date:
        month = MONTHS[date.group(1).lower()]
        try:
            return int(date.group(3)), dt.date(int(date.group(3)), month, int(date.group(2))).isoformat()
        except ValueError:
            return int(date.group(3)), None
    year = _YEAR.search(header)
    return (int(year.group()), None) if year else (None, None)


def _short(text: str) -> str:
    return collapsed(text)[:_MAX_TEXT]
