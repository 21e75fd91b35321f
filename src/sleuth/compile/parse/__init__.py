"""Parsers: one module per source format, chosen by file extension (context.md §5.3).

`parse_source(path)` returns a `ParsedSource` or raises `ParseError` with the ledger's status and
reason; it never lets a parser's own exception escape, so one bad file cannot stop a compile.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from sleuth.compile.pages import ParsedSource, ParseError
from sleuth.compile.parse import docx, html, markdown, pdf, text

Parser = Callable[[bytes], ParsedSource]

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


def is_supported(path: str) -> bool:
    return Path(path).suffix.lower() in PARSERS


def parse_source(path: Path) -> ParsedSource:
    parser = PARSERS.get(path.suffix.lower())
    if parser is None:
        raise ParseError("skipped", "unsupported format")
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
    return parsed
