"""Pages: the unit every citation points into (spec/context.md §1, §7.1).

A parser turns one source into a `ParsedSource`: its pages' text plus the structure found in it
(headings, tables) as offsets into that text. Nothing downstream re-reads the source file: chunks,
artifacts and typed-table rows are all slices of these page texts, which is what makes every
citation checkable.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from sleuth.errors import Failed
from sleuth.format.text import normalize_text

#: Bumped whenever `normalize_text` changes what it stores: a compile then re-parses every source,
#: since page text from the old rules would no longer agree with new chunks and groundings.
#: 3: PDF text repairs ff ligatures the text layer dropped (`format.text.repair_dropped_ligatures`).
#: 4: PDF pages record the tables found in their text (`parse.layout_tables`, issue 25 item 2).
#: 5: PDF pages record their outline (`Page.outline`, issue 25 item 5).
#: 6: the outline adds the headings PDF pages set apart by type (`parse.pdf_fonts`).
#: 7: PDF pages record their printed page number (`Page.label`, `parse.page_labels`).
#: 8: PDF tables read by where their words stand: columns, headers, titles, row groups (issue 43).
#: 9: table headers read wider (narrow spanning headers, header lines given after the rows, `December
#:    31` beside the years, a `%` that does not widen a column; issue 43).
#: 10: a Markdown table's title is the heading it stands under (issue 45: a segment's table).
TEXT_VERSION = 10


@dataclass(frozen=True)
class Heading:
    level: int
    text: str
    start: int  # offset of the heading line in the page text

    def to_json(self) -> dict[str, Any]:
        return {"level": self.level, "text": self.text, "start": self.start}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Heading:
        return cls(int(data["level"]), str(data["text"]), int(data["start"]))


@dataclass(frozen=True)
class TableRow:
    start: int
    end: int
    cells: list[str]
    #: Each cell's span of the page text, where the parser knows it (PDF tables); None for a cell
    #: that is no one span (a header read from several lines). Without it, a cell is looked for in
    #: its row's text (`table_cells`).
    spans: list[tuple[int, int] | None] | None = None
    #: The row's group (`Costs and expenses`, `Revenue by category > Domestic`), where the parser read
    #: the rows' groups (PDF tables read by their words' boxes); a group's own row holds the groups
    #: it is within. None everywhere else: the text row above a row names its group (`table_cells`).
    group: str | None = None


@dataclass(frozen=True)
class Table:
    """A table found in a page; the first row is the header. Each row is a line of the page (a PDF
    row whose label wrapped spans two)."""

    rows: list[TableRow]
    unit: str | None = None  # `millions`, as the text above the table states it
    title: str | None = None  # the caption above the table, when it has one

    def to_json(self) -> dict[str, Any] | list[dict[str, Any]]:
        rows = [_row_json(r) for r in self.rows]
        if self.unit is None and self.title is None:
            return rows  # the form written before tables had a unit and title
        return {"rows": rows, "unit": self.unit, "title": self.title}

    @classmethod
    def from_json(cls, data: dict[str, Any] | list[dict[str, Any]]) -> Table:
        rows = data if isinstance(data, list) else data["rows"]
        meta = {} if isinstance(data, list) else data
        return cls(
            [
                TableRow(
                    int(r["start"]),
                    int(r["end"]),
                    list(r["cells"]),
                    [None if s is None else (int(s[0]), int(s[1])) for s in r["spans"]]
                    if r.get("spans") is not None
                    else None,
                    r.get("group"),
                )
                for r in rows
            ],
            unit=meta.get("unit"),
            title=meta.get("title"),
        )


def _row_json(row: TableRow) -> dict[str, Any]:
    data: dict[str, Any] = {"start": row.start, "end": row.end, "cells": row.cells}
    if row.spans is not None:
        data["spans"] = [None if s is None else list(s) for s in row.spans]
    if row.group is not None:
        data["group"] = row.group
    return data


@dataclass
class Page:
    page: int  # 1-based
    text: str
    headings: list[Heading] = field(default_factory=list)
    tables: list[Table] = field(default_factory=list)
    #: The page's headings for the document's outline, where they differ from `headings` (which cut
    #: chunks and head their embeddings, as the index was tuned): a PDF's numbered headings without
    #: its contents page's entries and with the ones its text layer breaks a word a line (issue 25,
    #: item 5). None: the outline is `headings`.
    outline: list[Heading] | None = None
    #: The number printed on the page ("38" on the PDF's 40th page), when one is found.
    label: str | None = None

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            "page": self.page,
            "text": self.text,
            "headings": [h.to_json() for h in self.headings],
        }
        if self.tables:
            data["tables"] = [t.to_json() for t in self.tables]
        if self.outline is not None:
            data["outline"] = [h.to_json() for h in self.outline]
        if self.label is not None:
            data["label"] = self.label
        return data

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Page:
        return cls(
            page=int(data["page"]),
            text=str(data["text"]),
            headings=[Heading.from_json(h) for h in data["headings"]],
            tables=[Table.from_json(t) for t in data.get("tables", [])],
            outline=[Heading.from_json(h) for h in data["outline"]] if "outline" in data else None,
            label=str(data["label"]) if data.get("label") is not None else None,
        )


@dataclass
class ParsedSource:
    format: str  # pdf | markdown | html | docx | text | csv | json
    pages: list[Page]
    title: str | None = None  # document metadata title, when the format has one
    images_skipped: int = 0  # pages with no text layer

    @property
    def chars(self) -> int:
        return sum(len(p.text) for p in self.pages)


class ParseError(Failed):
    """A source yielded nothing usable; `status` is `skipped` or `failed` (spec/context.md §5.3)."""

    def __init__(self, status: str, reason: str) -> None:
        super().__init__(reason)
        self.status = status
        self.reason = reason


class TextBuilder:
    """Accumulates page text line by line while recording headings and table rows by offset.

    Used by the parsers that build text from structure (HTML, DOCX); the result is already
    normalized, so offsets recorded here stay valid.
    """

    def __init__(self) -> None:
        self._parts: list[str] = []
        self._length = 0
        self.headings: list[Heading] = []
        self.tables: list[Table] = []

    def _append(self, line: str) -> tuple[int, int]:
        line = normalize_text(line).replace("\n", " ").strip()
        if self._parts:
            self._parts.append("\n")
            self._length += 1
        start = self._length
        self._parts.append(line)
        self._length += len(line)
        return start, self._length

    def paragraph(self, text: str) -> None:
        if text.strip():
            self._append(text)

    def blank(self) -> None:
        """A blank line between blocks, so paragraphs stay apart in the page text."""
        if self._parts and self._parts[-1] != "\n":
            self._parts.append("\n")
            self._length += 1

    def heading(self, level: int, text: str) -> None:
        if not text.strip():
            return
        self.blank()
        start, _ = self._append(text)
        self.headings.append(Heading(level, " ".join(text.split()), start))

    def table(self, rows: list[list[str]]) -> None:
        rows = [[" ".join(c.split()) for c in row] for row in rows if any(c.strip() for c in row)]
        if not rows:
            return
        self.blank()
        out: list[TableRow] = []
        for cells in rows:
            start, end = self._append(" | ".join(cells))
            out.append(TableRow(start, end, cells))
        self.tables.append(Table(out))
        self.blank()

    def text(self) -> str:
        return "".join(self._parts).rstrip("\n")
