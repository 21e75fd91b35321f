"""Page furniture: what a PDF prints on the edges of its pages and no reader reads as the text (issue
43, item 3). A running header or footer ("Apple Inc. | Q3 2023 Form 10-Q | 16", "Table of Contents"
on every page) and the printed page number.

Page text stays as it is (offsets are sacred, spec/context.md §7.1); this module says which lines of
a page are furniture, so that a hit can be shown without them (`format.reading`). The signals are the
ones the compiler already uses: a line is compared by `line_key` (digits and punctuation blurred, so
the footer of page 16 and of page 17 are one line), a running line is one on the edges of at least
`RUNNING_SHARE` of a document's pages (`compile.boilerplate` counts the same lines anywhere on a page,
to demote chunks), and a page number is the one `compile.parse.page_labels` read as the page's label.
Only a page's first `HEAD_LINES` and last `FOOT_LINES` lines are ever furniture: a table's "(In
millions)" in the middle of a page is its content, however often it recurs.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Iterable

__all__ = [
    "FOOT_LINES",
    "HEAD_LINES",
    "MIN_LINE_CHARS",
    "MIN_RUNNING_PAGES",
    "PAGE_NUMBER_ALONE",
    "PAGE_NUMBER_BESIDE",
    "RUNNING_SHARE",
    "edge_lines",
    "furniture",
    "line_key",
    "page_number",
    "running_keys",
]

#: A page's first and last lines, where headers, footers and page numbers stand.
HEAD_LINES = 2
FOOT_LINES = 3
MIN_LINE_CHARS = 12  # shorter lines ("Total", "Item 7.") are too common to mean anything
RUNNING_SHARE = 0.3  # a line on this share of a document's pages is a running header or footer
MIN_RUNNING_PAGES = 3
#: The longest line read as a page number ("Page 38 of 120", "38 | Company").
PAGE_NUMBER_CHARS = 80

_NUMBER = r"(\d{1,4})"
#: A number standing alone: "38", "Page 38", "- 38 -", "38 of 120".
PAGE_NUMBER_ALONE = re.compile(
    rf"^(?:page\s+)?[-–—]?\s*{_NUMBER}\s*[-–—]?(?:\s+of\s+\d{{1,4}})?$", re.IGNORECASE
)
#: A number beside a running title: "38 | Company", "Company | Form 10-Q | 38".
PAGE_NUMBER_BESIDE = re.compile(rf"^{_NUMBER}\s*[|•·]\s+\S.*$|^.*\S\s+[|•·]\s*{_NUMBER}$")

_NON_WORD = re.compile(r"[^a-z#]+")
_DIGITS = re.compile(r"\d+")
_LINE = re.compile(r"[^\n]+")


def line_key(line: str) -> str:
    """A line as compared within a document: case-folded, every run of digits one `#`, punctuation and
    spaces one space, so a running footer `Page 7 of 90` is one line on every page."""
    return _NON_WORD.sub(" ", _DIGITS.sub("#", line.casefold())).strip()


def edge_lines(text: str) -> list[tuple[int, int]]:
    """Offsets `(start, end)` of a page's first `HEAD_LINES` and last `FOOT_LINES` non-blank lines,
    each once, in page order, without their line breaks."""
    lines = [(m.start(), m.end()) for m in _LINE.finditer(text) if m.group().strip()]
    if len(lines) <= HEAD_LINES + FOOT_LINES:
        return lines
    return lines[:HEAD_LINES] + lines[-FOOT_LINES:]


def running_keys(pages: Iterable[str]) -> frozenset[str]:
    """The `line_key`s on the edges of at least `RUNNING_SHARE` (and `MIN_RUNNING_PAGES`) of a
    document's pages: its running headers and footers."""
    counts: Counter[str] = Counter()
    total = 0
    for text in pages:
        total += 1
        keys = {line_key(text[a:b]) for a, b in edge_lines(text)}
        counts.update(key for key in keys if len(key) >= MIN_LINE_CHARS)
    threshold = max(MIN_RUNNING_PAGES, math.ceil(RUNNING_SHARE * total))
    return frozenset(key for key, count in counts.items() if count >= threshold)


def page_number(line: str) -> str | None:
    """The number a line prints as a page number ("38", "Page 38 of 120", "38 | Company"), or None."""
    line = line.strip()
    if len(line) > PAGE_NUMBER_CHARS:
        return None
    found = PAGE_NUMBER_ALONE.match(line) or PAGE_NUMBER_BESIDE.match(line)
    return next(g for g in found.groups() if g is not None) if found else None


def furniture(text: str, running: frozenset[str], label: str | None) -> list[tuple[int, int]]:
    """Offsets of a page's furniture lines: an edge line that is one of the document's running lines,
    or that prints the page's label (its printed number, when the parse found one). Each range runs
    over its line and the line break after it (before it, for the page's last line), so cutting it
    leaves the lines around it as they were."""
    out: list[tuple[int, int]] = []
    for a, b in edge_lines(text):
        line = text[a:b]
        number = page_number(line)
        if line_key(line) in running or (label is not None and number is not None and number == label):
            if b < len(text) and text[b] == "\n":
                out.append((a, b + 1))
            elif a > 0 and text[a - 1] == "\n":
                out.append((a - 1, b))
            else:
                out.append((a, b))
    return out
