"""Turn a model's quote into provenance (spec/context.md §5.4, "Evidence first").

A quote is looked for in the source's page text with whitespace runs collapsed and typographic
quotes, dashes and ellipses read as their ASCII forms; if that fails, also ignoring case. The match is
mapped back to offsets in the stored page, and the provenance's quote is the page's own slice there,
so it is verbatim whatever the model wrote. A quote with an ellipsis in it is located by its longest
piece. Nothing that is not found on a page becomes evidence.
"""

from __future__ import annotations

import re

from sleuth.compile.pages import Page
from sleuth.format.spans import Provenance
from sleuth.format.text import QuoteForm

#: A quote shorter than this (after collapsing) says too little to be evidence.
MIN_QUOTE_CHARS = 8
_ELLIPSIS = re.compile(r"\s*(?:\.\.\.|\u2026)\s*")


def _form(quote: str, lower: bool) -> str:
    return QuoteForm.of(quote.strip().strip("\"'\u201c\u201d"), lower).text


class QuoteLocator:
    """Finds quotes in the pages of one source."""

    def __init__(self, source_path: str, pages: list[Page]) -> None:
        self.source_path = source_path
        self.pages = pages
        self._folded: dict[tuple[int, bool], QuoteForm] = {}

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
                at = self._page(index, lower).find(wanted)
                if at is not None:
                    return Provenance.of(self.source_path, page.page, page.text, *at)
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

    def _page(self, index: int, lower: bool) -> QuoteForm:
        key = (index, lower)
        if key not in self._folded:
            self._folded[key] = QuoteForm.of(self.pages[index].text, lower)
        return self._folded[key]
