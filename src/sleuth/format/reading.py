"""How a span of page text reads (issue 43, item 3): without the page's furniture (`format.furniture`),
with the hard line breaks inside its paragraphs read as spaces and a word hyphenated across a line
break ("non-\\ncurrent") whole again. A hit shows this form, so a model reads "$5.5 billion" on one
line and no "Table of Contents" in the middle of a paragraph.

The page text and every span of it stay verbatim: a `PageReading` only says, in page offsets, which
characters a reader skips (`cut`) and which line breaks read as a space (`soft`). A space for a line
break changes no word, so quotes, which are matched with whitespace collapsed (`format.text.QuoteForm`),
need only skip the `cut` ranges to find a quote taken from the reading form (`agent.citations`).

A line break is read as a space where the line before it fills most of the page's width (it was
wrapped, not ended), neither line is a table row, the next line starts no block (a bullet, a numbered
item, a heading) and the line before it ends no sentence before a capital.
"""

from __future__ import annotations

import bisect
import itertools
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from sleuth.format.sentences import BLOCK_LINE, is_title

__all__ = ["Kept", "PageReading", "cut_text", "merge", "read_page"]

#: A line at least this share of the page's width was wrapped (its paragraph goes on below it).
FULL_LINE_SHARE = 0.7
#: The page's width: this percentile of its lines' lengths (a few long table rows do not set it).
WIDTH_PERCENTILE = 0.8
#: A page whose lines are shorter than this is not wrapped prose (an address block, a list).
MIN_WRAP_CHARS = 40

_FIGURE = r"(?:\(?[$€£]?\s?\(?\d(?:[\d,.]*\d)?\)?(?:\s?%)?|[—–-])"
#: A table row: it ends in two figures ("Net sales $ 3,642 $ 3,507", "Cost of sales (2,980) (2,862)").
_ROW = re.compile(rf"(?:^|\s){_FIGURE}\s+{_FIGURE}\s*$")
_ENDS = ".!?:;"


@dataclass(frozen=True)
class PageReading:
    """How one page reads, in page offsets: the ranges a reader skips (sorted, disjoint) and the line
    breaks read as a space."""

    cut: tuple[tuple[int, int], ...] = ()
    soft: frozenset[int] = frozenset()

    def removals(self, start: int, end: int) -> list[tuple[int, int]]:
        """The `cut` ranges within `[start, end)`, clipped to it."""
        at = bisect.bisect_right([b for _a, b in self.cut], start)
        out = []
        for a, b in self.cut[at:]:
            if a >= end:
                break
            out.append((max(a, start), min(b, end)))
        return out

    def read(self, page: str, start: int, end: int) -> str:
        """`page[start:end]` as a reader reads it: cut ranges skipped, soft line breaks as spaces,
        trimmed."""
        return self.kept(page, start, end).text

    def kept(self, page: str, start: int, end: int) -> Kept:
        """`read`'s text with the page offset of each of its characters, so a piece of what a reader
        reads (a sentence) maps back onto the verbatim page (`format.comparison`)."""
        kept = cut_text(page[start:end], start, self.removals(start, end))
        text = kept.text
        if self.soft:
            chars = list(text)
            for i, at in enumerate(kept.offsets):
                if at in self.soft:
                    chars[i] = " "
            text = "".join(chars)
        low, high = 0, len(text)
        while low < high and text[low].isspace():
            low += 1
        while high > low and text[high - 1].isspace():
            high -= 1
        return Kept(text[low:high], kept.offsets[low:high])


@dataclass(frozen=True)
class Kept:
    """A text with ranges cut out, and the offset (in the original's frame) of each kept character."""

    text: str
    offsets: list[int]


def cut_text(text: str, start: int, removals: Sequence[tuple[int, int]]) -> Kept:
    """`text` (which starts at offset `start`) without `removals` (sorted, disjoint, in that frame),
    and each kept character's offset in that frame."""
    pieces: list[str] = []
    offsets: list[int] = []
    at = start
    for a, b in [*removals, (start + len(text), start + len(text))]:
        if a > at:
            pieces.append(text[at - start : a - start])
            offsets.extend(range(at, a))
        at = max(at, b)
    return Kept("".join(pieces), offsets)


def merge(ranges: Iterable[tuple[int, int]]) -> tuple[tuple[int, int], ...]:
    """Ranges sorted, overlapping and touching ones joined, empty ones dropped."""
    out: list[tuple[int, int]] = []
    for a, b in sorted(r for r in ranges if r[1] > r[0]):
        if out and a <= out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], b))
        else:
            out.append((a, b))
    return tuple(out)


def _lines(text: str) -> list[tuple[int, int]]:
    """Offsets of each line of `text`, without its line break (a blank line is empty)."""
    out, at = [], 0
    for found in re.finditer("\n", text):
        out.append((at, found.start()))
        at = found.end()
    return [*out, (at, len(text))]


def _width(lines: Sequence[str]) -> int:
    sizes = sorted(len(line.rstrip()) for line in lines if line.strip())
    return sizes[min(len(sizes) - 1, int(WIDTH_PERCENTILE * len(sizes)))] if sizes else 0


def _is_row(line: str) -> bool:
    return bool(_ROW.search(line.rstrip()))


def _joins(line: str, following: str, width: int) -> bool:
    """Whether the break between two lines of a page is a wrap inside a paragraph."""
    before, after = line.rstrip(), following.lstrip()
    if not before or not after or width < MIN_WRAP_CHARS or len(before) < FULL_LINE_SHARE * width:
        return False
    if _is_row(before) or _is_row(after) or BLOCK_LINE.match(following) or is_title(line, following):
        return False
    return not (before[-1] in _ENDS and not after[0].islower())


def read_page(text: str, furniture: Iterable[tuple[int, int]] = ()) -> PageReading:
    """How a page reads: its `furniture` ranges cut, its wrapped lines joined (see the module)."""
    cut = merge(furniture)
    starts = [a for a, _b in cut]

    def inside(a: int, b: int) -> bool:
        k = bisect.bisect_right(starts, a) - 1
        return k >= 0 and cut[k][1] >= b

    lines = [(a, b) for a, b in _lines(text) if not (b > a and inside(a, b))]
    width = _width([text[a:b] for a, b in lines])
    hyphens: list[tuple[int, int]] = []
    soft: set[int] = set()
    for (a, b), (c, d) in itertools.pairwise(lines):
        if b >= len(text) or text[b] != "\n" or inside(b, b + 1):
            continue
        line, following = text[a:b], text[c:d]
        after = following.lstrip()
        if len(line) > 1 and line.endswith("-") and line[-2].isalpha() and after[:1].islower():
            hyphens += [(b, b + 1), (c, c + len(following) - len(after))]
        elif _joins(line, following, width):
            soft.add(b)
    return PageReading(merge([*cut, *hyphens]), frozenset(soft))
