"""Parsers: one module per source format, chosen by file extension (spec/context.md §5.3).

`parse_source(path, max_text_bytes=…)` returns a `ParsedSource` or raises `ParseError` with the ledger's
status and reason; it never lets a parser's own exception escape, so one bad file cannot stop a compile.

A source may hold at most `max_text_bytes` of text (the setting, `$SLEUTH_MAX_TEXT_BYTES`). A compile
keeps a source's text, pages and chunks in memory, several times the text's size, so a larger one is
`skipped` ("too large") instead: a text format is refused by its size before it is read, a PDF or
DOCX once its text is extracted.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path

from sleuth.compile.pages import ParsedSource, ParseError
from sleuth.compile.parse import docx, html, markdown, pdf, text

log = logging.getLogger("sleuth.compile.parse")

Parser = Callable[[bytes], ParsedSource]
#: Formats whose text is not the file itself: their size says little about their text.
_CONTAINERS = frozenset({".pdf", ".docx"})

PARSERS: dict[str, Parser] = {
    ".pdf": pdf.parse,
    ".md": markdown.parse,
    ".markdown": markdown.parse,
    ".html": html.parse,
    ".htm": html.parse,
    ".docx": docx.parse,
    ".txt": text.parse_text,
    ".text": text.parse_text,
    ".rst": text.parse_text,
    ".log": text.parse_text,
    ".csv": text.parse_csv,
    ".json": text.parse_json,
    ".jsonl": text.parse_jsonl,
    # Code is read as plain text until a code-aware parser exists (§5.3, later).
    **{
        ext: text.parse_text
        for ext in (
            ".py",
            ".js",
            ".ts",
            ".go",
            ".rs",
            ".java",
            ".sql",
            ".sh",
            ".yaml",
            ".yml",
            ".toml",
            ".c",
            ".h",
            ".cpp",
            ".rb",
        )
    },
}


def parse_source(path: Path, *, max_text_bytes: int) -> ParsedSource:
    suffix = path.suffix.lower()
    parser = PARSERS.get(suffix)
    if parser is None:
        raise ParseError("skipped", "unsupported format")
    limit = max_text_bytes
    size = path.stat().st_size
    if suffix not in _CONTAINERS and size > limit:
        raise ParseError("skipped", f"too large: {size} bytes of text, over the limit of {limit}")
    data = path.read_bytes()
    if not data:
        raise ParseError("skipped", "empty")
    try:
        parsed = parser(data)
    except ParseError:
        raise
    except Exception as exc:  # a parser library's own error: the file is corrupt for us
        message = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise ParseError("failed", f"corrupt: {message[:200]}") from exc
    if not any(p.text.strip() for p in parsed.pages):
        raise ParseError("skipped", "empty")
    if parsed.chars > limit:
        raise ParseError(
            "skipped", f"too large: {parsed.chars} characters of text, over the limit of {limit}"
        )
    return parsed
