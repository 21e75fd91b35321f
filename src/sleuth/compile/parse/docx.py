"""DOCX with python-docx: paragraphs and tables in document order; heading styles give sections;
a table row becomes one line with its cells joined by ` | ` (spec/context.md §5.3)."""

from __future__ import annotations

import io
import re
import zipfile

import docx as python_docx
from docx.table import Table as DocxTable
from docx.text.paragraph import Paragraph

from sleuth.compile.pages import Page, ParsedSource, ParseError, TextBuilder

_HEADING_STYLE = re.compile(r"^(?:Heading\s*(\d)|Title)$", re.IGNORECASE)


def parse(data: bytes) -> ParsedSource:
    try:
        document = python_docx.Document(io.BytesIO(data))
    except zipfile.BadZipFile:
        if data.startswith(b"\xd0\xcf\x11\xe0"):
            # An OLE container: what Office writes for a password-protected document.
            raise ParseError("failed", "encrypted") from None
        raise
    out = TextBuilder()
    for block in document.iter_inner_content():
        if isinstance(block, Paragraph):
            style = block.style.name if block.style is not None else ""
            match = _HEADING_STYLE.match(style or "")
            if match:
                out.heading(int(match.group(1) or 1), block.text)
            else:
                out.paragraph(block.text)
        elif isinstance(block, DocxTable):
            out.table(_rows(block))
    title = (document.core_properties.title or "").strip() or None
    return ParsedSource("docx", [Page(1, out.text(), out.headings, out.tables)], title=title)


def _rows(table: DocxTable) -> list[list[str]]:
    rows: list[list[str]] = []
    for row in table.rows:
        cells: list[str] = []
        previous = None
        for cell in row.cells:
            if cell._tc is previous:  # a merged cell repeats itself; keep it once
                continue
            previous = cell._tc
            cells.append(cell.text)
        rows.append(cells)
    return rows
