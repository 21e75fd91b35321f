"""Headings from type: a short PDF line set larger than the document's body text, or wholly in bold,
is a heading of the outline (issue 25, item 5; context.md §7).

Numbering (`Item 7.`, `PART II`) and bookmarks give a filing's top levels; the sub-headings people
look for — MD&A's "Results of Operations", a risk factor's title, a policy's "Eligibility" — are set
apart only by their type. pdfium gives each character's font size and font; `line_styles` reads them
for the lines that could be headings (short ones) and one size for every other line, so the body
size is known, at a cost linear in the page's lines. `font_headings` then keeps the lines that stand
out, are shaped like a heading (a capital, few words, no figures, not a sentence), are not inside a
table, and do not repeat on many pages (a running header). Levels follow the type: larger first,
then bold, then capitals, below the levels numbering and bookmarks use.

Headings found here join `Page.outline` only: they give chunks their heading path and never cut
chunks, so the index is unchanged.
"""

from __future__ import annotations

import ctypes
import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import pypdfium2.raw as pdfium_c

from sleuth.compile.boilerplate import is_contents
from sleuth.compile.pages import Heading, Page
from sleuth.format.text import normalize_text, repair_dropped_ligatures
from sleuth.store.version.stop_words import STOP_WORDS

#: A heading line's limits: characters and words.
MAX_HEADING_CHARS = 100
MAX_HEADING_WORDS = 12
#: A line this much larger than the body text stands out by size alone.
SIZE_RATIO = 1.15
#: A bold line this much smaller than the body text is a footnote's or a table's, not a heading.
BOLD_MIN_RATIO = 0.95
#: A line on at least this share of the pages (and on 3 or more) is a running header.
RUNNING_SHARE = 0.2
#: This many consecutive lines in one type that stands out are a list or a table, not headings.
LIST_RUN = 3
#: The deepest level a heading gets (the outline's levels run 1–6).
DEEPEST = 6
#: PDF font descriptor flag ForceBold (PDF 32000-1, table 123: bit 19).
_FORCE_BOLD = 1 << 18
_FONT_NAME_BYTES = 128
_BOLD_NAME = re.compile(r"bold|black|heavy|semibold|demi", re.IGNORECASE)
_WORD = re.compile(r"[^\W\d_]{3}")  # a word of three letters: `A-33` (a page number) is none
_FIGURE = re.compile(r"^[($€£]*[-−]?\d[\d,.]*%?\)?$|^[—–-]{1,2}$|[$%]")


@dataclass(frozen=True)
class LineStyle:
    """One line of pdfium's text of a page, with its type. `bold` is False for a line too long to be
    a heading (its font is not read)."""

    text: str
    size: float
    bold: bool


def line_styles(textpage: Any) -> list[LineStyle]:
    """The lines of a pypdfium2 `PdfTextPage`, in order, each with its font size (the middle of three
    characters' sizes for a line that could be a heading, one character's for any other) and whether
    all three are bold (a bold font name, weight ≥ 600, or the ForceBold flag)."""
    raw = raw_text(textpage)
    out: list[LineStyle] = []
    start = 0
    for end in [*(i for i, ch in enumerate(raw) if ch in "\r\n"), len(raw)]:
        line = raw[start:end]
        text = line.strip()
        if not text:
            start = end + 1
            continue
        first = start + len(line) - len(line.lstrip())
        last = first + len(text) - 1
        middle = first + len(text) // 2
        while raw[middle].isspace():  # the stripped text ends with a character that is not
            middle += 1
        start = end + 1
        if len(text) > MAX_HEADING_CHARS:
            out.append(LineStyle(text, _size(textpage, middle), False))
            continue
        sample = [first, middle, last]
        sizes = sorted(_size(textpage, i) for i in sample)
        out.append(LineStyle(text, sizes[1], all(_bold(textpage, i) for i in sample)))
    return out


def raw_text(textpage: Any) -> str:
    """pdfium's characters, one per character index (`FPDFText_GetText` in one call; one call a
    character where the text holds a character outside the BMP and the two disagree)."""
    count = int(textpage.count_chars())
    if count <= 0:
        return ""
    buffer = ctypes.create_string_buffer((count + 1) * 2)
    pdfium_c.FPDFText_GetText(textpage, 0, count, ctypes.cast(buffer, ctypes.POINTER(ctypes.c_ushort)))
    raw = buffer.raw[: 2 * count].decode("utf-16-le", errors="replace")
    if len(raw) != count:
        raw = "".join(chr(pdfium_c.FPDFText_GetUnicode(textpage, i)) for i in range(count))
    return raw


def _size(textpage: Any, index: int) -> float:
    return round(float(pdfium_c.FPDFText_GetFontSize(textpage, index)), 1)


def _bold(textpage: Any, index: int) -> bool:
    if int(pdfium_c.FPDFText_GetFontWeight(textpage, index)) >= 600:
        return True
    name = ctypes.create_string_buffer(_FONT_NAME_BYTES)
    flags = ctypes.c_int()
    length = int(pdfium_c.FPDFText_GetFontInfo(textpage, index, name, _FONT_NAME_BYTES, ctypes.byref(flags)))
    font = name.raw[: max(0, min(length, _FONT_NAME_BYTES) - 1)].decode("latin-1")
    return bool(_BOLD_NAME.search(font)) or bool(flags.value & _FORCE_BOLD)


def body_size(styles: Sequence[Sequence[LineStyle]]) -> float | None:
    """The font size most of the document's characters are set in."""
    sizes: Counter[float] = Counter()
    for page in styles:
        for line in page:
            if line.size > 0:
                sizes[line.size] += len(line.text)
    return sizes.most_common(1)[0][0] if sizes else None


def font_headings(
    pages: Sequence[Page], styles: Sequence[Sequence[LineStyle]], level: int
) -> list[list[Heading]]:
    """Each page's headings set apart by type, at `level` and deeper; `styles[i]` is `pages[i]`'s
    (`line_styles`). Offsets are those of the stored page text: a heading is the stored line that
    reads as the styled line after normalisation."""
    body = body_size(styles)
    if body is None:
        return [[] for _ in pages]
    seen: Counter[str] = Counter()
    for page_styles in styles:
        seen.update({_key(line.text) for line in page_styles})
    running = max(3, RUNNING_SHARE * len(pages))
    found: list[list[tuple[LineStyle, int, str]]] = []
    for page, page_styles in zip(pages, styles, strict=True):
        if is_contents(page.text):
            found.append([])
            continue
        standing = [
            i
            for i, line in enumerate(page_styles)
            if _heading_shaped(line.text) and seen[_key(line.text)] < running and _stands_out(line, body)
        ]
        lines = [page_styles[i] for i in _not_lists(standing, page_styles, body)]
        found.append([(line, *placed) for line, placed in _placed(page, lines)])
    # Levels from the kinds of type headings use on two pages or more: a cover's one-off display type
    # would otherwise push every real heading a level down
    pages_of: dict[tuple[float, bool, bool], set[int]] = {}
    for number, page_found in enumerate(found):
        for line, _start, _text in page_found:
            pages_of.setdefault(_kind(line, body), set()).add(number)
    kinds = sorted(kind for kind, on in pages_of.items() if len(on) > 1)
    depth = {kind: min(level + rank, DEEPEST) for rank, kind in enumerate(kinds)}
    return [
        [Heading(depth.get(_kind(line, body), level), text, start) for line, start, text in page_found]
        for page_found in found
    ]


def _not_lists(standing: list[int], styles: Sequence[LineStyle], body: float) -> list[int]:
    """`standing` (indices of lines that stand out) without runs of `LIST_RUN` or more consecutive
    lines in the same type: a list or a table set in bold (subsidiaries, a column header over
    several lines), not headings, which text follows."""
    out: list[int] = []
    run: list[int] = []
    for i in [*standing, -2]:
        if run and i == run[-1] + 1 and _kind(styles[i], body) == _kind(styles[run[-1]], body):
            run.append(i)
            continue
        if len(run) < LIST_RUN:
            out += run
        run = [i]
    return out


def _placed(page: Page, styles: Sequence[LineStyle]) -> list[tuple[LineStyle, tuple[int, str]]]:
    """Each line with its stored line's offset and text, in page order; a line the stored text does not
    hold, or holds inside a table, is left out."""
    offsets: dict[str, list[int]] = {}
    at = 0
    for stored in page.text.split("\n"):
        stripped = stored.strip()
        if stripped:
            offsets.setdefault(stripped, []).append(at + stored.index(stripped))
        at += len(stored) + 1
    tables = [(t.rows[0].start, t.rows[-1].end) for t in page.tables if t.rows]
    out: list[tuple[LineStyle, tuple[int, str]]] = []
    after = -1
    for line in styles:
        stored = repair_dropped_ligatures(normalize_text(line.text)).strip()
        start = next((o for o in offsets.get(stored, []) if o > after), None)
        if start is None or any(a <= start < b for a, b in tables):
            continue
        after = start
        out.append((line, (start, stored.rstrip(":").rstrip())))
    return out


def _heading_shaped(text: str) -> bool:
    """A capital first letter, a letter or digit first, a word, few of them, no figures, no sentence."""
    words = text.split()
    if not 3 <= len(text) <= MAX_HEADING_CHARS or len(words) > MAX_HEADING_WORDS:
        return False
    first = next((ch for ch in text if ch.isalpha()), "")
    if not first.isupper() or not text[0].isalnum() or not _WORD.search(text):
        return False
    if text.endswith((",", ";")) or (text.endswith(".") and len(words) > MAX_HEADING_WORDS // 2):
        return False
    if words[-1].lower() in STOP_WORDS and len(words) > 1:
        return False  # `Amount allocated to`: a heading does not end in a function word
    if len({w.lower() for w in words}) < len(words) * 0.6:
        return False  # `Fiscal Year Fiscal Year Fiscal Year`: a column header
    return sum(1 for w in words if _FIGURE.search(w)) < 2 and "$" not in text and "%" not in text


def _stands_out(line: LineStyle, body: float) -> bool:
    return line.size >= body * SIZE_RATIO or (line.bold and line.size >= body * BOLD_MIN_RATIO)


def _kind(line: LineStyle, body: float) -> tuple[float, bool, bool]:
    """Sorts a larger type first, then bold, then capitals: the heading levels of one document."""
    larger = round(line.size / body, 1) if line.size >= body * SIZE_RATIO else 1.0
    return (-larger, not line.bold, not line.text.isupper())


def _key(text: str) -> str:
    return " ".join(text.lower().split())
