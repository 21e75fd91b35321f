"""A PDF table read by where its words stand (issue 43, item 1), where the parser gave the words'
boxes (`parse.pdf_boxes`); `layout_tables` reads the same run of lines by its text otherwise.

The rows are the lines `layout_tables` found; the columns are where their figures stand
(`table_grid.columns_of`), so a row with a blank cell keeps its other figures under their headers and
a row's figures never end up in its label (`Revenues $ 3,431,434 $ 1,308,061 …` on a segment table
of four columns whose other rows have one figure). The header is the phrases above the first row
over each column (`table_grid.read_header`), the title the caption above them, and a line of text
that runs into the columns (a sentence, the next table's caption) ends the table.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import replace

from sleuth.compile.pages import Table, TableRow
from sleuth.compile.parse.layout_lines import (
    CURRENCY,
    FIGURE,
    MIN_ROWS,
    TOKEN,
    Line,
    continues,
    is_furniture,
    is_page_numbers,
    is_prose,
    joined,
    title_of,
    unit_of,
)
from sleuth.compile.parse.table_grid import (
    PHRASE_GAP,
    Box,
    Header,
    Word,
    column_of,
    columns_of,
    read_header,
)

#: Lines above a table's first row read for its header (a text layer may set each header cell's
#: lines apart: `July 2,` / `2023` / `July 3,` / `2022` …), and for its title above that.
HEADER_LINES = 14
TITLE_LINES = 8
#: Points by which a row's label must stand further right than its group's line to be indented.
_INDENT = 1.5

Span = tuple[int, int]


def grid_table(
    lines: list[Line], units: list[str | None], taken: int, first: int, end: int, running: Collection[str]
) -> Table | None:
    """The table in `lines[first:end]` (a run of rows `layout_tables` found; lines before `taken`
    belong to a table already read), or None when its figures stand in no columns."""
    top = first  # the first row of figures: header lines of years above it are not rows
    while top < end and (not lines[top].figures or lines[top].is_years):
        top += 1
    if top >= end:
        return None
    figures = _Figures(lines)
    columns = figures.columns(top, end)
    if not columns:
        return None
    while top < end and (not lines[top].figures or _reaches(lines[top], columns[0][0])):
        top += 1  # `Dec. 26 Sep. 26 … Mar. 28`: a header line that ends in a number
    cut = _prose_within(lines, top, end, columns[0][0])
    if cut < end or top > first:
        end = cut
        columns = figures.columns(top, end)
        if not columns:
            return None
    data = [line for line in lines[top:end] if line.figures]
    below = min(box.bottom for box in _boxes(lines[top]))
    # where the labels end (where no row has one, the margin the rows start at)
    labels_right = max(
        (_label_right(line) for line in data if line.label is not None),
        default=min(_boxes(line)[0].left for line in data) + 1.0,
    )
    # the lines above the first row, and the lines of words or years after the table: a text layer
    # may give a header after the rows it heads (`SECOND QUARTER` / `2023 2022`, on every page of a
    # release, so that it reads as a running line); `read_header` keeps the words set above the rows
    after = [index for index in range(end, len(lines)) if not lines[index].figures or lines[index].is_years]
    above = [
        index
        for index in range(max(taken, first - HEADER_LINES), top)
        if not is_furniture(" ".join(lines[index].text.split()), running)
    ]
    words = [
        Word(token, box, index)
        for index in [*above, *after]
        for token, box in zip(lines[index].text.split(), lines[index].boxes or (), strict=False)
        if len(lines[index].boxes or ()) == len(lines[index].text.split())
    ]
    header = read_header(words, columns, below, min(labels_right, columns[0][0]))
    rows_from = max([first, *(index + 1 for index in header.lines if index < top)])
    header_lines = [lines[index] for index in sorted(header.lines)]
    rows = _rows(figures, rows_from, top, end, columns)
    if sum(1 for row in rows if len(row.cells) > 1 and any(row.cells[1:])) < MIN_ROWS:
        return None
    if len(columns) == 1 and not any(header.columns):
        return None  # one column of numbers without a period above it is a list, not a table
    if len(columns) == 1 and is_page_numbers(data):
        return None  # `Item 9. Changes in … 73`: a contents page's page numbers
    unit = next((u for u in map(_unit_in, reversed(header.label_side)) if u), None)
    unit = unit or next((u for u in (unit_of(line) for line in header_lines) if u), None) or units[top]
    top_line = min(header.lines, default=top)
    title = title_of(lines[max(taken, top_line - TITLE_LINES) : top_line], header_lines, running)
    return Table([_header_row(header_lines, header), *rows], unit=unit, title=title)


def _label_right(line: Line) -> float:
    """Where the line's label ends on the page: its last word's right edge."""
    if line.label is None:
        return 0.0
    words = len(line.text_of(line.label).split())
    return _boxes(line)[words - 1].right if words else 0.0


def _boxes(line: Line) -> tuple[Box, ...]:
    assert line.boxes is not None
    return line.boxes


def _figure_boxes(line: Line) -> list[tuple[Span, float, float, bool]]:
    """Each figure of the line with its x-extent (the currency sign left out: `$` may stand apart at
    the cell's left, while the numbers of a column are aligned), and whether it is the label's: set
    a word space after the label (`Line item 12`, `Notes due 2025`), where a cell stands apart."""
    tokens = [(m.start() + line.start, m.end() + line.start, m.group()) for m in TOKEN.finditer(line.text)]
    boxes = _boxes(line)
    if len(tokens) != len(boxes):
        return []
    out: list[tuple[Span, float, float, bool]] = []
    before = [
        box for (_a, b, _t), box in zip(tokens, boxes, strict=True) if line.label and b <= line.label[1]
    ]
    attached = bool(before)
    previous = before[-1] if before else None
    for span in line.figures:
        held = [
            (box, token)
            for (a, b, token), box in zip(tokens, boxes, strict=True)
            if span[0] <= a and b <= span[1]
        ]
        inside = [box for box, token in held if token not in _SIGNS]
        if not inside:
            continue
        first = held[0][0]
        attached = (
            attached and previous is not None and first.left - previous.right < PHRASE_GAP * first.height
        )
        previous = held[-1][0]
        out.append((span, min(b.left for b in inside), max(b.right for b in inside), attached))
    return out


#: Signs left out of a figure's extent: `$` may stand apart at the cell's left, and a text layer may
#: read a `%` set after the next column's figure into this one (`1,787 %` where `%` follows `6.0`).
_SIGNS = CURRENCY | {"%"}


class _Figures:
    """Each line's figures with their x-extents (`_figure_boxes`), read once a line."""

    def __init__(self, lines: list[Line]) -> None:
        self.lines = lines
        self.read: dict[int, list[tuple[Span, float, float, bool]]] = {}

    def of(self, index: int) -> list[tuple[Span, float, float, bool]]:
        found = self.read.get(index)
        if found is None:
            found = self.read[index] = _figure_boxes(self.lines[index])
        return found

    def columns(self, top: int, end: int) -> list[tuple[float, float]]:
        spans = [
            [(a, b) for _span, a, b, label in self.of(index) if not label]
            for index in range(top, end)
            if self.lines[index].figures
        ]
        return columns_of(spans)


def _prose_within(lines: list[Line], top: int, end: int, columns_left: float) -> int:
    """The first line among the rows whose text (a line's words before its figures) reaches inside
    the columns: a sentence (`… integral part of this statement. Page 60`), a caption, the next
    table's header; the table ends above it."""
    return next((index for index in range(top, end) if _reaches(lines[index], columns_left)), end)


def _reaches(line: Line, columns_left: float) -> bool:
    """Whether the line's text (its words before its figures) runs from left of the columns into
    them as one phrase (a sentence, a caption), not a cell of text set apart in a column."""
    if line.boxes is None or line.label is None:
        return False
    words = line.boxes[: len(line.text_of(line.label).split())]  # the label's words come first
    start = 0
    for k in range(1, len(words) + 1):
        if k < len(words):
            gap = words[k].left - words[k - 1].right
            if -1.0 <= gap <= PHRASE_GAP * words[k].height:
                continue
        crosses = words[start].left < columns_left - 1.0 and words[k - 1].right > columns_left + 1.0
        if crosses and k - start >= 2:  # words, not one figure set a little left (`(48)` before `NM`)
            return True
        start = k
    return False


def _rows(
    figures: _Figures, start: int, top: int, end: int, columns: Sequence[tuple[float, float]]
) -> list[TableRow]:
    """The rows from `start` to `end` (the first line of figures at `top`): each line of figures a
    row of one cell a column (blank where it has none), its label whole; a line of text alone a row
    of one cell (a group's label), or the first part of the label of the row after it, when that
    goes on in lower case. Each row carries its group (`_Groups`)."""
    rows: list[TableRow] = []
    groups = _Groups()
    pending: Line | None = None

    def flush() -> None:
        if pending is not None:
            group = groups.open(_indent(pending), pending.text)
            rows.append(TableRow(pending.start, pending.end, [pending.text.strip()], [pending.label], group))

    for index in range(start, end):
        line = figures.lines[index]
        if index < top and line.figures:
            continue  # a line of the header's years the header did not take
        placed = _placed(line, figures.of(index), columns) if line.figures else None
        if line.boxes is not None and (placed is None or _figures_in_label(line, placed[0], columns)):
            # `Diversification benefit (48) NM NM`, `Card income 483 621 (f) (22) …`: by the words
            placed = _placed_words(line, columns) or placed
        if placed is None and line.figures and is_prose(line.text):
            break  # `… an integral part of this statement. Page 60`: the table ended
        if placed is None and line.is_years and line.label is None:
            line = replace(line, label=(line.figures[0][0], line.figures[-1][1]), figures=())  # `2017` atop
        if placed is None:
            if line.label is None or _is_note(line.text):
                continue
            if pending is not None and continues(line.text):
                pending = joined(pending, line)
            else:
                flush()
                pending = line
            continue
        label, cells = placed
        label_text = " ".join(line.text_of(label).split()) if label else ""
        row_start, indent = line.start, _indent(line)
        if pending is not None and (label is None or continues(label_text)):
            assert pending.label is not None  # the figures of a label that wrapped
            label_text = " ".join(f"{pending.text} {label_text}".split())
            label, row_start = (pending.label[0], label[1] if label else pending.label[1]), pending.start
            indent = _indent(pending)
        else:
            flush()
        pending = None
        texts = [line.text_of(span) if span else "" for span in cells]
        group = groups.of_row(indent)
        rows.append(TableRow(row_start, line.end, [label_text, *texts], [label, *cells], group))
    return rows  # a line of text after the last row heads no rows of this table


class _Groups:
    """The row groups open at a row: a line of text alone above rows (`Costs and expenses:`,
    `Americas:`) heads them. Where the rows under it are indented, it ends at the first row that is
    not (`Income before taxes` under the indented costs); where they are set flush with it, at the
    next group's line. A group indented under another is within it: `Revenue by category > Domestic`."""

    def __init__(self) -> None:
        self.stack: list[tuple[float, str, bool | None]] = []  # indent, text, members indented

    def open(self, indent: float, text: str) -> str | None:
        while self.stack and self.stack[-1][0] >= indent - _INDENT:
            self.stack.pop()  # a group at the same level (or further out) ends the one before
        name = " ".join(text.split()).rstrip(":").strip()
        outer = self.path()
        self.stack.append((indent, name, None))
        return outer

    def of_row(self, indent: float) -> str | None:
        while self.stack:
            at, name, indented = self.stack[-1]
            if indented is None:
                self.stack[-1] = (at, name, indent > at + _INDENT)
                break
            if indented and indent <= at + _INDENT:
                self.stack.pop()  # back out to the group's level: it ended
                continue
            break
        return self.path()

    def path(self) -> str | None:
        return " > ".join(name for _at, name, _indented in self.stack) or None


def _indent(line: Line) -> float:
    return line.boxes[0].left if line.boxes else 0.0


def _placed(
    line: Line, found: list[tuple[Span, float, float, bool]], columns: Sequence[tuple[float, float]]
) -> tuple[Span | None, list[Span | None]] | None:
    """The line's label span and its cell in each column; None when no figure stands in a column (a
    line of text that ends in a number: `Fiscal 2024`). A figure left of the columns is the label's
    (`Notes due 2025`, a footnote's `(1)`); two in one column are one cell."""
    cells: list[Span | None] = [None] * len(columns)
    label_end = line.label[1] if line.label else None
    for span, left, right, attached in found:
        index = column_of(left, right, columns) if right >= columns[0][0] and not attached else None
        if index is None and (right < columns[0][0] or attached):
            label_end = span[1]
            continue
        if index is None:
            index = min(range(len(columns)), key=lambda i: abs(sum(columns[i]) / 2 - (left + right) / 2))
        held = cells[index]
        cells[index] = (held[0], span[1]) if held else span
    if not any(cells):
        return None
    label = None if label_end is None else (line.start + len(line.text) - len(line.text.lstrip()), label_end)
    return label, cells


def _figures_in_label(line: Line, label: Span | None, columns: Sequence[tuple[float, float]]) -> bool:
    """Whether the text before the line's last figures holds figures standing in the columns (a
    footnote's mark between figures, `621 (f) (22)`, ended the figures read from the text)."""
    if label is None or line.boxes is None:
        return False
    tokens = list(TOKEN.finditer(line.text))
    return len(tokens) == len(line.boxes) and any(
        FIGURE.match(m.group()) and box.left >= columns[0][0] - 1.0
        for m, box in zip(tokens, line.boxes, strict=True)
        if m.end() + line.start <= label[1]
    )


def _placed_words(
    line: Line, columns: Sequence[tuple[float, float]]
) -> tuple[Span | None, list[Span | None]] | None:
    """A line whose last words are no figures (`(48) NM NM`, `31 (e)`) as a row: its words that
    stand in columns are their cells, where a figure stands in one; a word in no column (a footnote's
    mark) is no cell."""
    tokens = [(m.start() + line.start, m.end() + line.start, m.group()) for m in TOKEN.finditer(line.text)]
    boxes = line.boxes
    if boxes is None or len(tokens) != len(boxes):
        return None
    cells: list[Span | None] = [None] * len(columns)
    label_end: int | None = None
    figure = False
    sign: int | None = None  # where a currency sign before the next cell starts
    for (start, end, token), box in zip(tokens, boxes, strict=True):
        if token in CURRENCY:
            sign = start
            continue
        index = column_of(box.left, box.right, columns) if box.right >= columns[0][0] else None
        if index is None:
            if not any(cells) and box.right < columns[0][0]:
                label_end = end
            sign = None
            continue
        held = cells[index]
        cells[index] = (held[0], end) if held else (start if sign is None else sign, end)
        sign = None
        figure = figure or bool(FIGURE.match(token))
    if not figure or sum(1 for c in cells if c) < 2:
        return None
    label = None if label_end is None else (tokens[0][0], label_end)
    return label, cells


def _is_note(text: str) -> bool:
    """`(in thousands, except per share data)`, `(Unaudited)`: said of the table, not a row."""
    stripped = text.strip()
    return (
        stripped.startswith("(")
        and stripped.endswith(")")
        and (
            unit_of(Line(0, len(stripped), stripped, None, ())) is not None or "unaudited" in stripped.lower()
        )
    )


def _unit_in(text: str) -> str | None:
    return unit_of(Line(0, len(text), text, None, ()))


def _header_row(header_lines: list[Line], header: Header) -> TableRow:
    cells = ["", *header.columns]
    if not header_lines:
        return TableRow(0, 0, cells, [None] * len(cells))
    return TableRow(header_lines[0].start, header_lines[-1].end, cells, [None] * len(cells))
