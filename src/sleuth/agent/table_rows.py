"""Table rows inside quoted text (spec/runtime.md §10.3): whether a line of PDF text is a row of
figures, and the column header above it, so a quoted figure keeps the columns that say what it is.
"""

from __future__ import annotations

import re

#: Markers a quoted unit starts with: headings, list bullets and numbers, quotes, table pipes, tasks.
LEAD = re.compile(r"(?:#{1,6}\s+|[-*+•]\s+|>\s*|\|\s*|\d{1,3}[.)]\s+|\[[ xX]\]\s+)+")
_WORD = re.compile(r"[a-z0-9]+")
_CELL = re.compile(r"\(?[$€£]?\s?\d{1,3}(?:,\d{3})+(?:\.\d+)?\)?|\(?[$€£]?\s?\d+\.\d+\)?%?")
_PERIOD_CELL = re.compile(
    r"(?<![\d,.])(?:19|20)\d\d(?![\d,.])|\b(?:Q[1-4]|FY\s?\d{2,4}|H[12])\b", re.IGNORECASE
)
_SENTENCE_MARK = re.compile(r"[.!?;:](?:\s|$)")
_DIVIDER = re.compile(r"^\s*\|?\s*:?-{3,}")
MAX_HEADER_DISTANCE = 60  # lines above a row searched for its column header
MAX_HEADER_WORDS = 20


def is_figure_row(line: str) -> bool:
    """A line of two or more amounts that is not a sentence: a table row in PDF text (a sentence
    that happens to hold two amounts is prose, not a row)."""
    return len(_CELL.findall(line)) >= 2 and not line.rstrip().endswith((".", "!", "?"))


def table_header(text: str, start: int, end: int) -> tuple[int, int] | None:
    """Offsets of the column header of the table row holding text[start:end], or None when it is
    not a table row. A Markdown row's header is the first row of its pipe block; a row of figures
    in PDF text (two or more amounts on one line) takes the nearest line above that names two or
    more periods ("(Millions) 2018 2017 2016", "Q1 Q2 Q3 Q4"), the way statements head columns."""
    row_start = text.rfind("\n", 0, start) + 1
    row_end = text.find("\n", end)
    row_end = len(text) if row_end == -1 else row_end
    row = text[row_start:row_end]
    above = text[:row_start].split("\n")[:-1]
    if row.lstrip().startswith("|"):
        first = None
        offset = row_start
        for line in reversed(above):
            offset -= len(line) + 1
            if not line.lstrip().startswith("|"):
                break
            if not _DIVIDER.match(line):
                first = (offset, offset + len(line))
        return trimmed(text, *first) if first is not None else None
    if not is_figure_row(row):
        return None
    offset = row_start
    for distance, line in enumerate(reversed(above), 1):
        offset -= len(line) + 1
        if distance > MAX_HEADER_DISTANCE:
            break
        if (
            len(_PERIOD_CELL.findall(line)) >= 2
            and len(_WORD.findall(line.lower())) <= MAX_HEADER_WORDS
            and not _SENTENCE_MARK.search(line.rstrip() + " ")  # a date's comma is fine
        ):
            return trimmed(text, offset, offset + len(line))
    return None


def trimmed(text: str, start: int, end: int) -> tuple[int, int]:
    """Narrow [start, end) past whitespace, list and heading markers and table pipes."""
    while start < end and text[start].isspace():
        start += 1
    lead = LEAD.match(text, start, end)
    if lead:
        start = lead.end()
    while end > start and (text[end - 1].isspace() or text[end - 1] == "|"):
        end -= 1
    return start, end
