"""Tables read back from laid-out text: the lines of a PDF page that end in figures (issue 25, item 2).

A PDF's text layer gives a statement row as one line, its label then its figures
(`Accounts payable 408 24 148`), and the column headers as lines above the rows
(`Years ended December 31` / `(Millions) 2018 2017 2016`). This module finds such runs of rows, the
number of figure columns they share, the header lines above them and the unit they state, and
records each cell as a span of the page text, so a figure taken from a table is cited verbatim. The
page text itself is not changed.

Why not a layout library: pdfplumber's text strategy, measured on 30 FinanceBench statement pages,
found the same cells at ~0.33 s a page against ~0.6 ms here, and cut labels mid-word on some
layouts; the text layer already keeps a row on one line (the figures: `docs/spec/stack.md`).

Where the parser gives the words' boxes (PDF pages read with pdfium), a run of rows found here is
read by where its words stand instead (`layout_grid`, issue 43): columns from the figures'
x-positions, each column's header from the phrases above it, the caption that is not page furniture,
each row's group. The reading by text below is what other pages get (the pypdf fallback, a page
whose text and boxes do not agree): there a row with fewer figures than the table has columns (a
blank cell) has no column for its figures (they are recorded without a header). Either way, a table
whose rows the text layer breaks one cell a line is not found.
"""

from __future__ import annotations

import itertools
import re
from collections import Counter
from collections.abc import Collection, Mapping

from sleuth.compile.pages import Table, TableRow
from sleuth.compile.parse.layout_grid import grid_table
from sleuth.compile.parse.layout_lines import (
    GROUP,
    HEADER_LINES,
    MAX_LABEL,
    MIN_ROWS,
    MONTH,
    YEAR,
    Line,
    continues,
    is_page_numbers,
    is_prose,
    joined,
    read_lines,
    title_of,
    unit_of,
    units_of,
)
from sleuth.compile.parse.table_grid import Box

#: A column of change between two periods: `2015 vs. 2014`, `2018 to 2017`, `2022-2021`.
_YEARS = re.compile(
    r"(?<![\d,.$])(?:19[5-9]\d|20\d\d)"
    r"(?:\s*(?:vs\.?|versus|to|over|[-–])\s*(?:19[5-9]\d|20\d\d))?(?![\d,.%])",
    re.IGNORECASE,
)
_DATE = re.compile(rf"\b{MONTH}\s+\d{{1,2}},?\s+(?:19|20)\d\d\b", re.IGNORECASE)
_MONTH_DAY = re.compile(rf"\b{MONTH}\s+\d{{1,2}}\b,?", re.IGNORECASE)
#: Text lines a table's rows may have between them.
_GAP_LINES = 3
_NUMBERED_HEADING = re.compile(r"^\d{1,2}(?:\.\d{1,2})+\.?\s+[A-Z]")
_MAX_LEAD_WORDS = 4
_MAX_HEADER = 200  # characters of a column's header: the lines above are joined, but not without end


def find_tables(
    text: str, boxes: Mapping[int, tuple[Box, ...]] | None = None, running: Collection[str] = ()
) -> list[Table]:
    """Every run of at least three rows sharing a number of figure columns, with its headers.

    `boxes` gives, for lines of the text (by index), each word's box on the page: a table whose rows
    have them is read by where its words stand (`grid_table`); `running` holds the `line_key`s of the
    document's running headers and footers, never a table's title."""
    lines = read_lines(text, boxes or {})
    units = units_of(lines)
    tables: list[Table] = []
    taken = 0  # lines before this index belong to a table already found
    i = 0
    while i < len(lines):
        if not lines[i].figures:
            i += 1
            continue
        end = _block_end(lines, i)
        found = None
        if all(line.boxes is not None for line in lines[i:end] if line.figures):
            found = grid_table(lines, units, taken, i, end, running)
        if found is None:  # no boxes, or figures that stand in no columns (each right after its label)
            found = _table(lines, units, taken, i, end, running)
        if found is not None:
            tables.append(found)
            taken = end
        i = max(end, i + 1)
    return tables


def _block_end(lines: list[Line], first: int) -> int:
    """The index after the last row of the run of rows that starts at `first`.

    Rows may have up to `_GAP_LINES` short text lines between them (a group's label, a label the
    layout wrapped); a long line of prose or a new header of years after data rows ends the run."""
    last = first
    gap = 0
    j = first + 1
    while j < len(lines):
        line = lines[j]
        if line.figures:
            if line.is_years and not lines[last].is_years:
                break  # the header of the next table
            if line.label is not None and line.label[1] - line.label[0] > MAX_LABEL:
                break
            last = j
            gap = 0
        elif not line.text.strip():
            pass
        elif gap >= _GAP_LINES or _NUMBERED_HEADING.match(line.text.strip()):
            break
        elif is_prose(line.text) and (line.boxes is None or len(line.text) > MAX_LABEL):
            break  # where the words' boxes are known, a sentence is one that runs into the columns
        else:
            gap += 1
        j += 1
    return last + 1


def _table(
    lines: list[Line], units: list[str | None], taken: int, first: int, end: int, running: Collection[str]
) -> Table | None:
    top = first
    while top < end and lines[top].is_years:
        top += 1  # the years lines heading the rows
    head = [line for line in lines[max(first, top - HEADER_LINES) : top] if len(line.text) <= MAX_LABEL]
    block = lines[top:end]
    above: list[Line] = []
    for line in reversed(lines[max(taken, first - HEADER_LINES) : first]):
        if is_prose(line.text):
            break  # headers sit right above their table, under any prose
        if _is_period_line(line.text) or (not line.figures and YEAR.search(line.text) is not None):
            above.insert(0, line)
    counts = Counter(len(line.figures) for line in block if line.figures)
    if not counts:
        return None
    columns, rows_with = counts.most_common(1)[0]
    periods = max((len(_periods(line)) for line in above + head), default=0)
    named = any(_column_names(line, columns) for line in above + head)
    wide = [line for line in block if len(line.figures) >= periods]
    if not named and 2 <= periods < columns and len(wide) >= MIN_ROWS and all(map(_numbered_label, wide)):
        # `Note 12 1,001 1,002` under `2018 2017`: the header says how many columns there are, and
        # the bare number ending every label is the label's (not a `% Change` column the header
        # does not name: that one stays a column)
        columns, rows_with = periods, len(wide)
    if rows_with < MIN_ROWS:
        return None
    last = len(block)
    while last and len(block[last - 1].figures) < columns:
        last -= 1  # a page number or a footnote's figure after the last row
    block = block[:last]
    header_lines = above + head
    headers = _headers(header_lines, columns)
    if columns == 1 and not any(headers):
        return None  # one column of numbers without a period above it is a list, not a table
    if columns == 1 and is_page_numbers(block):
        return None  # `Item 9. Changes in … 73`: a contents page's page numbers
    # the nearest statement above (a page's `(in millions)` heads all its tables), or in its header
    unit = next((u for u in (unit_of(line) for line in reversed(head)) if u), None) or units[first]
    title = title_of(lines[max(taken, first - HEADER_LINES - 2) : first], header_lines, running)
    rows: list[TableRow] = [_header_row(header_lines, headers)]
    pending: Line | None = None  # a text line: a group's label, or a label whose figures wrapped

    def flush() -> None:
        if pending is not None:
            rows.append(TableRow(pending.start, pending.end, [pending.text.strip()], [pending.label]))

    for line in block:
        if not line.figures:
            if line.label is None:
                continue
            if pending is not None and continues(line.text):
                pending = joined(pending, line)  # a label the layout wrapped
            else:
                flush()
                pending = line
            continue
        label, figures = line.label, list(line.figures)
        if len(figures) > columns:
            # `Notes due 2025 1,000 1,000`: the figures beyond the columns belong to the label
            extra = figures[: len(figures) - columns]
            figures = figures[len(figures) - columns :]
            label = (label[0] if label else extra[0][0], extra[-1][1])
        start = line.start
        label_text = line.text_of(label).strip() if label else ""
        if pending is not None and (label is None or continues(label_text)):
            # the figures of a label that wrapped: `Proceeds from sale of businesses, net of cash sold`
            # / `846 1,065 142`, or `Deferred income taxes,` / `net 1,342,538 1,295,375`
            assert pending.label is not None
            label_text = " ".join(f"{pending.text} {label_text}".split())
            label, start = (pending.label[0], label[1] if label else pending.label[1]), pending.start
        else:
            flush()
        pending = None
        rows.append(
            TableRow(start, line.end, [label_text, *(line.text_of(f) for f in figures)], [label, *figures])
        )
    flush()
    return Table(rows, unit=unit, title=title)


def _numbered_label(line: Line) -> bool:
    """The first figure of a row with one figure too many is a bare whole number of at most four
    digits (`Note 12`, `due 2025`), as a label's number is, not an amount."""
    text = line.text_of(line.figures[0])
    return text.isdigit() and len(text) <= 4


def _headers(header_lines: list[Line], columns: int) -> list[str]:
    """Per column, the header parts read from the lines above, top line first: a line with one part
    per column (dates, years) or one per group of columns (`Three Months Ended … Six Months Ended`)
    splits; a line with one `ended` phrase is shared by every column. When no line splits, the lines
    are read as one (a layout that breaks `May 26, 2019 May 27, 2018` over two lines)."""
    parts: list[list[str]] = [[] for _ in range(columns)]
    split = False
    for line in header_lines:
        pieces = _periods(line)
        named = _column_names(line, columns)
        if named and len(pieces) != columns:
            pieces = named
        groups = [m.start() for m in GROUP.finditer(line.text)]
        if len(pieces) >= 2 and columns % len(pieces) == 0:
            split = True
            width = columns // len(pieces)
            for index, piece in enumerate(pieces):
                for column in range(index * width, (index + 1) * width):
                    _add(parts[column], piece)
        elif len(groups) >= 2 and columns % len(groups) == 0:
            split = True
            width = columns // len(groups)
            bounds = [*groups, len(line.text)]
            for index in range(len(groups)):
                piece = " ".join(line.text[bounds[index] : bounds[index + 1]].split()).rstrip(",")
                for column in range(index * width, (index + 1) * width):
                    _add(parts[column], piece)
        elif (pieces or groups) and len(line.text) <= 80:
            shared = " ".join(line.text.split()).rstrip(",")
            for column in range(columns):
                _add(parts[column], shared)
    if not split and columns >= 2 and len(header_lines) >= 2:
        joined = " ".join(" ".join(line.text.split()) for line in header_lines)
        pieces = _periods(Line(0, len(joined), joined, None, ()))
        if len(pieces) == columns:
            shared_text = [
                " ".join(line.text.split()).rstrip(",")
                for line in header_lines
                if GROUP.search(line.text) and not YEAR.search(line.text)
            ]
            return [" ".join([*shared_text, piece])[:_MAX_HEADER] for piece in pieces]
    return [" ".join(p)[:_MAX_HEADER] for p in parts]


def _add(parts: list[str], piece: str) -> None:
    if not parts or parts[-1] != piece:  # a header line the layout repeats says it once
        parts.append(piece)


def _column_names(line: Line, columns: int) -> list[str]:
    """`Key figure (USD million) 2025 2024 Change`: the last `columns` words, when each is a year or
    one short word and one at least is a year, name the columns one each; so do the periods of a
    line and the one name after them."""
    words = line.text.split()
    if len(words) < columns:
        return []
    last = words[len(words) - columns :]
    if not any(YEAR.fullmatch(w) for w in last):
        return []
    if all(YEAR.fullmatch(w) or (w.isalpha() and len(w) <= 12) for w in last):
        return last
    # `2018 2017 % Change`, `2018 2017 Increase (Decrease)`: periods, then one column named after them
    periods = list(_YEARS.finditer(line.text))
    trailing = line.text[periods[-1].end() :].strip() if periods else ""
    if len(periods) == columns - 1 and 0 < len(trailing) <= 40 and not _YEARS.search(trailing):
        return [" ".join(m.group().split()) for m in periods] + [" ".join(trailing.split())]
    return []


def _is_period_line(text: str) -> bool:
    """A line that names periods: `Years ended December 31`, `December 31, 2018 December 31, 2017`."""
    return bool(GROUP.search(text) or _DATE.search(text) or _MONTH_DAY.search(text))


def _periods(line: Line) -> list[str]:
    """The per-column pieces of a header line: its dates, else its month-days, else its years, each
    with the words that lead it when every column repeats them (`Employees at Dec 31, 2025
    Employees at Dec 31, 2024`; the first column takes as many words as the second has, since the
    words before them head the label column)."""
    text = line.text
    for pattern in (_DATE, _MONTH_DAY, _YEARS):
        matches = list(pattern.finditer(text))
        if not matches:
            continue
        found = [" ".join(m.group().split()).rstrip(",") for m in matches]
        if len(matches) < 2:
            return found
        leads = [text[a.end() : b.start()].split() for a, b in itertools.pairwise(matches)]
        width = len(leads[0])
        if 0 < width <= _MAX_LEAD_WORDS and all(lead == leads[0] for lead in leads):
            first = text[: matches[0].start()].split()[-width:]
            if first == leads[0]:
                return [" ".join([*leads[0], piece]) for piece in found]
        return found
    return []


def _header_row(header_lines: list[Line], headers: list[str]) -> TableRow:
    if not header_lines:
        return TableRow(0, 0, ["", *headers], [None] * (len(headers) + 1))
    return TableRow(header_lines[0].start, header_lines[-1].end, ["", *headers], [None] * (len(headers) + 1))
