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
from sleuth.format.figures import CHANGE_COLUMN
from sleuth.format.periods import period_length
from sleuth.format.spans import PageSpan
from sleuth.format.text import collapsed

_YEAR = re.compile(r"(?<!\d)(?:19[5-9]\d|20\d\d)(?!\d)")
_DATE = re.compile(
    r"\b(Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec)[a-z]*\.?\s+(\d{1,2}),?\s+((?:19|20)\d\d)\b",
    re.IGNORECASE,
)
#: A date in figures, as earnings releases print their columns: `12 Weeks Ended 3/25/2023`.
_NUMERIC_DATE = re.compile(r"(?<![\d/])(\d{1,2})/(\d{1,2})/((?:19|20)\d\d)(?![\d/])")
_CHANGE = re.compile(r"(?:19|20)\d\d\s*(?:vs\.?|versus|to|over|[-–])\s*(?:19|20)\d\d", re.IGNORECASE)
_OWN_YEAR = re.compile(r"\bend(?:ed|ing)\b.*\s(?:19|20)\d\d(?:\(\w\))?$", re.IGNORECASE)
_GROUP_YEAR = re.compile(
    r"(?:(?:fiscal|calendar|years?|quarters?|ended|ending|as\s+of|at)\s+|[a-z]+\.?\s+\d{1,2},?\s+)*"
    r"((?:19|20)\d\d):?",
    re.IGNORECASE,
)
#: What a column or its table holds at a point in time, not over a period.
#: A quarter's column under the year's end date (`Fiscal Year Ended January 31, 2020 Q1`): the date
#: ends the year, so it is the quarter's end only for the fourth quarter.
_YEAR_ENDED = re.compile(r"\byears?\s+end(?:ed|ing)\b", re.IGNORECASE)
_FOURTH = re.compile(r"(?<![a-z])(?:q4|4q)(?!\d)|\bfourth\b", re.IGNORECASE)
_POINT_IN_TIME = re.compile(
    r"\b(?:assets?|liabilit(?:y|ies)|equity|balances?|position|as\s+of|at)\b", re.IGNORECASE
)
#: Footnote marks at the end of a label: `(1)`, `(a)`, `(b)(c)`, `(ii)`.
_FOOTNOTE_MARKS = re.compile(r"(?:\s*\((?:\d{1,2}|[a-z]{1,2}|[ivx]{1,4})\))+\s*$")
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
    year: int | None  # the year the header names (None where it names two: a change between them)
    period_end: str | None  # ISO date, when the header names a month, day and year
    period_start: str | None  # ISO date: the period's first day, when its end and length are known
    months: int | None  # the period's length (3, 6, 9, 12); None for a point in time or unsaid
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
    periods = _with_compared([_year_long(column_period(h), h, table.title) for h in headers], headers)
    grouped = any(row.group is not None for row in table.rows)  # the parser read the rows' groups
    title_year = _title_year(table.title)
    if title_year is None and all(p.year is None for p in periods):
        title_year = _rows_year(table.rows[1:])  # `Balances, April 1, 2023` … `Balances, June 30, 2023`
    section: str | None = None
    for row_no, row in enumerate(table.rows[1:], start=1):
        if len(row.cells) == 1:
            section = _named(row.cells[0]) or None  # a row of text alone names the rows below it
            continue
        if grouped:
            section = _named(row.group) if row.group else None
        in_year = _group_year(section)
        aligned = len(row.cells) - 1 == len(headers)
        spans = _spans(page.text, row)
        for column_no, text in enumerate(row.cells[1:], start=1):
            span = spans[column_no]
            if span is None:
                continue
            value = figure_value(text)
            header = (headers[column_no - 1] or None) if aligned else None
            period = periods[column_no - 1] if aligned else _NO_PERIOD
            if period.year is None and aligned and (in_year or title_year):
                # `2017` above its rows, `Q4 2022 QTD - Income by Segment` above the table
                period = column_period(f"{headers[column_no - 1]} {in_year or title_year}")
            yield Cell(
                source_path=source_path,
                page=page.page,
                start=span[0],
                end=span[1],
                table_no=table_no,
                row_no=row_no,
                column_no=column_no,
                label=_named(row.cells[0]),
                section=section,
                header=_short(header) if header is not None else None,
                year=period.year,
                period_end=period.end,
                period_start=period.start,
                months=period.months,
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


@dataclass(frozen=True)
class ColumnPeriod:
    year: int | None
    end: str | None
    start: str | None
    months: int | None


_NO_PERIOD = ColumnPeriod(None, None, None, None)


def column_period(header: str) -> ColumnPeriod:
    """The period a column's header names: its year, end (`Three Months Ended June 25 2022` ends
    2022-06-25), length and so its start (a month's last day starts the period on a month's first;
    another end, a 52/53-week calendar's, starts it the weeks the header counts before, else 13 weeks a
    quarter). None of it for a
    column of change between two periods, or a header that names two years, but for a period over
    the columns and the column's own year below it (`Three Years Ended December 26, 2015 2013`)."""
    if _CHANGE.search(header):
        return _NO_PERIOD
    years = _YEAR.findall(header)
    if len(set(years)) > 1 and not _OWN_YEAR.search(header):
        return _NO_PERIOD
    year = int(years[-1]) if years else None
    date = next((d for d in _DATE.finditer(header) if int(d.group(3)) == year), None)
    end: dt.date | None = None
    if date:
        try:
            end = dt.date(int(date.group(3)), MONTHS[date.group(1).lower()], int(date.group(2)))
        except ValueError:
            end = None
    elif (
        numeric := next((d for d in _NUMERIC_DATE.finditer(header) if int(d.group(3)) == year), None)
    ) is not None:
        try:  # month first, as US filings print it
            end = dt.date(int(numeric.group(3)), int(numeric.group(1)), int(numeric.group(2)))
        except ValueError:
            end = None
    months, weeks = period_length(header) if year is not None else (None, None)
    if end is not None and months == 3 and _YEAR_ENDED.search(header) and not _FOURTH.search(header):
        end = None
    start = _start(end, months, weeks) if end is not None and months is not None else None
    return ColumnPeriod(year, end.isoformat() if end else None, start, months)


def _year_long(period: ColumnPeriod, header: str, title: str | None) -> ColumnPeriod:
    """A column headed by a year and nothing of its length (`2018`, `Net Sales 2018`) holds that
    fiscal year's figures, twelve months; but for a balance at a point in time (`Assets 2018`, a
    balance sheet's columns)."""
    if period.year is None or period.months is not None or period.end is not None:
        return period
    if _POINT_IN_TIME.search(f"{header} {title or ''}"):
        return period
    return ColumnPeriod(period.year, None, None, 12)


def _with_compared(periods: list[ColumnPeriod], headers: list[str]) -> list[ColumnPeriod]:
    """The periods with each change column's (`% Change`, `Percent Change Operations`) that names none
    of its own given the period it is the change in: the latest of the columns it follows since the
    last change column (`Three Months Ended July 2, 2023 | July 3, 2022 | % Change`)."""
    out = list(periods)
    compared: list[ColumnPeriod] = []
    after_change = False
    for index, (period, header) in enumerate(zip(periods, headers, strict=True)):
        if not CHANGE_COLUMN.search(header):
            compared = [] if after_change else compared
            compared.append(period)
            after_change = False
            continue
        after_change = True
        dated = [p for p in compared if p.year is not None]
        if period.year is None and dated:
            out[index] = max(dated, key=lambda p: (p.end or "", p.year or 0))
    return out


def _group_year(section: str | None) -> int | None:
    """The year a row group names when it names a period and nothing else (`2017`, `Fiscal 2023`,
    `Year ended December 31, 2018`): the rows under it are that year's; `Notes due 2025` is not."""
    last = section.rsplit(" > ", 1)[-1] if section else ""
    found = _GROUP_YEAR.fullmatch(last.strip())
    return int(found.group(1)) if found else None


def _title_year(title: str | None) -> int | None:
    """The one year a table's title names (`Q2 2023 QTD - Income Before Tax by Segment`), not a
    change between two (`2023 vs. 2022`)."""
    if not title or _CHANGE.search(title):
        return None
    years = set(_YEAR.findall(title))
    return int(years.pop()) if len(years) == 1 else None


def _rows_year(rows: list[TableRow]) -> int | None:
    """The one year the dated row labels of a table name, where two or more do (a roll-forward within
    a year: `Balances, April 1, 2023`, `Balances, June 30, 2023`)."""
    years = [int(d.group(3)) for row in rows if row.cells for d in _DATE.finditer(row.cells[0])]
    return years[0] if len(years) >= 2 and len(set(years)) == 1 else None


def _start(end: dt.date, months: int, weeks: int | None = None) -> str:
    if weeks is not None:
        return (end - dt.timedelta(weeks=weeks) + dt.timedelta(days=1)).isoformat()
    after = end + dt.timedelta(days=1)
    if after.day == 1:  # a month's last day: the period is whole months
        month = after.month - months
        return dt.date(after.year + (month - 1) // 12, (month - 1) % 12 + 1, 1).isoformat()
    return (end - dt.timedelta(weeks=round(months * 13 / 3)) + dt.timedelta(days=1)).isoformat()


def _named(text: str) -> str:
    """A row's label or group without the footnote marks after it (`Total assets(a)`, `Online stores
    (1)`): what a question names it by."""
    return _FOOTNOTE_MARKS.sub("", _short(text)) or _short(text)


def _short(text: str) -> str:
    return collapsed(text)[:_MAX_TEXT]
