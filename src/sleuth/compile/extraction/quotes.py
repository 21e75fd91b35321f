"""Turn a model's quote into provenance (spec/context.md §5.4, "Evidence first").

A quote is looked for in the source's page text with whitespace runs collapsed and typographic
quotes, dashes and ellipses read as their ASCII forms; if that fails, also ignoring case. The match is
mapped back to offsets in the stored page, and the provenance's quote is the page's own slice there,
so it is verbatim whatever the model wrote. A quote with an ellipsis in it is located by its longest
piece. Nothing that is not found on a page becomes evidence.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from sleuth.compile.pages import Page
from sleuth.format.spans import Provenance

#: A quote shorter than this (after collapsing) says too little to be evidence.
MIN_QUOTE_CHARS = 8
_ASCII = str.maketrans(
    {"\u2018": "'", "\u2019": "'", "\u201c": '"', "\u201d": '"', "\u2013": "-", "\u2014": "-"}
)
_ELLIPSIS = re.compile(r"\s*(?:\.\.\.|\u2026)\s*")


@dataclass
class _Folded:
    """A page's text in the matching form, with the page offset of every character of that form."""

    text: str
    offsets: list[int]


def _fold(text: str, lower: bool) -> _Folded:
    chars: list[str] = []
    offsets: list[int] = []
    pending_space = False
    for i, ch in enumerate(text):
        if ch.isspace():
            pending_space = bool(chars)
            continue
        if pending_space:
            chars.append(" ")
            offsets.append(i - 1)
            pending_space = False
        ch = ch.translate(_ASCII)
        if lower:
            low = ch.lower()
            ch = low if len(low) == 1 else ch
        chars.append(ch)
        offsets.append(i)
    return _Folded("".join(chars), offsets)


def _form(quote: str, lower: bool) -> str:
    return _fold(quote.strip().strip("\"'\u201c\u201d"), lower).text


class QuoteLocator:
    """Finds quotes in the pages of one source."""

    def __init__(self, source_path: str, pages: list[Page]) -> None:
        self.source_path = source_path
        self.pages = pages
        self._folded: dict[tuple[int, bool], _Folded] = {}

    def locate(self, quote: str) -> Provenance | None:
        """The provenance of `quote` on the first page that holds it, or None."""
        pieces = [p for p in _ELLIPSIS.split(quote) if p.strip()]
        if not pieces:
            return None
        piece = max(pieces, key=len)
        for lower in (False, True):
            wanted = _form(piece, lower)
            if len(wanted) < MIN_QUOTE_CHARS:
                return None
            for index, page in enumerate(self.pages):
                folded = self._page(index, lower)
                at = folded.text.find(wanted)
                if at >= 0:
                    start = folded.offsets[at]
                    end = folded.offsets[at + len(wanted) - 1] + 1
                    return Provenance.of(self.source_path, page.page, page.text, start, end)
        return None

    def locate_all(self, quotes: list[str]) -> tuple[list[Provenance], int]:
        """The provenance of every quote that is found, each place once, and how many were not found."""
        found: dict[tuple[str, int, int, int], Provenance] = {}
        missed = 0
        for quote in quotes:
            at = self.locate(quote)
            if at is None:
                missed += 1
            else:
                found.setdefault(at.key, at)
        return list(found.values()), missed

    def _page(self, index: int, lower: bool) -> _Folded:
        key = (index, lower)
        if key not in self._folded:
            self._folded[key] = _fold(self.pages[index].text, lower)
        return self._folded[key]
