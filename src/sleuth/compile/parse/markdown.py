"""Markdown: the page text is the file itself (not rendered), so offsets point into the file a
user opens; markdown-it-py finds the headings and pipe tables by line."""

from __future__ import annotations

from markdown_it import MarkdownIt

from sleuth.compile.pages import Heading, Page, ParsedSource, Table, TableRow
from sleuth.compile.parse.text import decode
from sleuth.format.text import normalize_text

_MD = MarkdownIt("commonmark").enable("table")


def parse(data: bytes) -> ParsedSource:
    content = normalize_text(decode(data))
    line_starts = [0]
    for line in content.split("\n"):
        line_starts.append(line_starts[-1] + len(line) + 1)

    headings: list[Heading] = []
    tables: list[Table] = []
    rows: list[TableRow] = []
    row_line: int | None = None
    cells: list[str] = []
    tokens = _MD.parse(content)
    for i, tok in enumerate(tokens):
        if tok.type == "heading_open" and tok.map:
            text = tokens[i + 1].content.strip()
            headings.append(Heading(int(tok.tag[1]), text, line_starts[tok.map[0]]))
        elif tok.type == "table_open":
            rows = []
        elif tok.type == "tr_open" and tok.map:
            row_line, cells = tok.map[0], []
        elif tok.type == "inline" and row_line is not None:
            cells.append(tok.content.strip())
        elif tok.type == "tr_close" and row_line is not None:
            start, end = line_starts[row_line], line_starts[row_line + 1] - 1
            rows.append(TableRow(start, min(end, len(content)), cells))
            row_line = None
        elif tok.type == "table_close" and len(rows) >= 2:
            # its title is the heading it stands under (`## Selected financial data for the Stores
            # segment`), as a PDF table's is the line above it
            tables.append(Table(rows, title=headings[-1].text if headings else None))
    return ParsedSource("markdown", [Page(1, content, headings, tables)])
