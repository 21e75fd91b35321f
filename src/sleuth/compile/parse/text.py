"""Plain text, CSV and JSON: the page text is the file's own text (spec/context.md §5.3)."""

from __future__ import annotations

import codecs
import csv
import json
from collections.abc import Iterator

from sleuth.compile.pages import Page, ParsedSource, ParseError, Table, TableRow
from sleuth.format.text import normalize_text


def decode(data: bytes) -> str:
    """UTF-8 (a BOM is dropped), or UTF-16 when the file starts with its BOM."""
    if data.startswith((codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)):
        try:
            return data.decode("utf-16")
        except UnicodeDecodeError:
            raise ParseError("failed", "bad encoding") from None
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError:
        raise ParseError("failed", "bad encoding") from None


def parse_text(data: bytes) -> ParsedSource:
    return ParsedSource("text", [Page(1, normalize_text(decode(data)))])


def parse_json(data: bytes) -> ParsedSource:
    content = normalize_text(decode(data))
    try:
        json.loads(content)
    except json.JSONDecodeError as exc:
        raise ParseError("failed", f"corrupt: invalid JSON ({exc})") from None
    return ParsedSource("json", [Page(1, content)])


def parse_jsonl(data: bytes) -> ParsedSource:
    content = normalize_text(decode(data))
    for number, line in enumerate(content.splitlines(), 1):
        if line.strip():
            try:
                json.loads(line)
            except json.JSONDecodeError as exc:
                raise ParseError("failed", f"corrupt: invalid JSON on line {number} ({exc})") from None
    return ParsedSource("json", [Page(1, content)])


def parse_csv(data: bytes) -> ParsedSource:
    content = normalize_text(decode(data))
    rows = _csv_rows(content)
    tables = [Table(rows)] if len(rows) >= 2 else []
    return ParsedSource("csv", [Page(1, content, tables=tables)])


def _csv_rows(content: str) -> list[TableRow]:
    """Rows with their exact spans: the reader pulls lines one by one, so a row ends where the
    last line it consumed ends (quoted newlines included)."""
    lines = content.splitlines(keepends=True)
    position = 0

    def feed() -> Iterator[str]:
        nonlocal position
        for line in lines:
            position += len(line)
            yield line

    rows: list[TableRow] = []
    start = 0
    try:
        dialect: type[csv.Dialect] | csv.Dialect = csv.Sniffer().sniff(content[:4096], ",;\t|")
    except csv.Error:
        dialect = csv.excel
    for cells in csv.reader(feed(), dialect):
        end = position
        while end > start and content[end - 1] == "\n":
            end -= 1
        if any(c.strip() for c in cells):
            rows.append(TableRow(start, end, [c.strip() for c in cells]))
        start = position
    return rows
