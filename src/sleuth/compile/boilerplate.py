"""Boilerplate: the passages a reader skips (spec/context.md §7.2, issue 11).

Running headers and footers, tables of contents, and text repeated across many documents
(certifications, disclaimers, legal notices) match many questions lexically and say nothing. Page text
stays as it is, offsets are sacred; what this module yields is a score per chunk, the share of its
text that is boilerplate, which search uses to demote such chunks (`store.search`).

Three generic signals, none tied to one kind of corpus:
- a line that recurs on many pages of the same document (a running header or footer);
- a line that recurs in many documents (the same certification in every filing, the same notice
  in every policy);
- a page whose lines are mostly "title … page number" entries (a table of contents).

Lines are compared after case folding, with digits and punctuation blurred, so "Page 7 of 90" and
"Page 8 of 90" are one line (`format.furniture.line_key`, which also says which edge lines a hit is
shown without). The scores are computed over the whole version at every compile and
written to `index/boilerplate.json`.
"""

from __future__ import annotations

import itertools
import math
import re
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from sleuth.compile.pages import Page
from sleuth.format.chunks import Chunk
from sleuth.format.furniture import MIN_LINE_CHARS, MIN_RUNNING_PAGES, RUNNING_SHARE, line_key

MIN_SHARED_LINE_CHARS = 40  # a line shared across documents must be a sentence, not a table label
SHARED_DOCS_SHARE = 0.1  # a line in this share of the documents is shared boilerplate
MIN_SHARED_DOCS = 3
TOC_MIN_LINES = 6
TOC_SHARE = 0.4
TOC_FORWARD_SHARE = 0.8  # of consecutive entries, the share whose page number does not go back

_SPACES = re.compile(r"\s+")
_DIGITS = re.compile(r"\d+")
_TOC_LINE = re.compile(r"^\S.{2,}?(?:\s+|\s*\.{2,}\s*)(\d{1,4})$")


def shared_key(line: str) -> str:
    """A line as compared across documents: digits kept. Two reports that both say "Revenue was $N"
    differ by N, which is their content; a certification or a notice repeats word for word."""
    return _SPACES.sub(" ", line.casefold()).strip()


def is_contents(text: str) -> bool:
    """Mostly "title … page" lines whose page numbers run forward. A table of figures is not one:
    its rows carry several numbers each ("Net income $ 709 $ 621 $ 565"), and its last columns do
    not count up the way page numbers do."""
    lines = [line.strip() for line in text.split("\n") if line.strip()]
    pages = [int(m.group(1)) for line in lines if (m := _TOC_LINE.match(line)) and _is_entry(line)]
    if len(pages) < TOC_MIN_LINES or len(pages) < TOC_SHARE * len(lines):
        return False
    forward = sum(1 for a, b in itertools.pairwise(pages) if b >= a)
    return forward >= TOC_FORWARD_SHARE * (len(pages) - 1)


def is_contents_entry(line: str) -> bool:
    """A line of a contents page: a title and its page number (`Item 7A. Quantitative … 33`)."""
    return _TOC_LINE.match(line.strip()) is not None and _is_entry(line)


def _is_entry(line: str) -> bool:
    """A title and its page number: no more than one other run of digits ("Item 7A", "Note 3")."""
    return len(_DIGITS.findall(line)) <= 2


@dataclass(frozen=True)
class Boilerplate:
    """What a version repeats. Lines are kept as the hashes of their keys (`line_key`, `shared_key`):
    the lines shared across documents are counted over the whole corpus, and a corpus of a million
    chunks has millions of distinct lines; their 64-bit hashes are a tenth of their text, and two
    lines that collide are one chance in 2**64 per pair."""

    running: dict[str, set[int]]  # per source, the hashes of its running headers' and footers' line_keys
    shared: set[int]  # the hashes of the shared_keys of lines shared across documents
    contents: set[tuple[str, int]]  # (source, page) of every table of contents

    def share(self, chunk: Chunk) -> float:
        """The share of `chunk`'s text that is boilerplate."""
        if (chunk.source_path, chunk.page) in self.contents:
            return 1.0
        repeated = self.running.get(chunk.source_path, set())
        total = flagged = 0
        for line in chunk.text.split("\n"):
            size = len(line.strip())
            if not size:
                continue
            total += size
            if hash(line_key(line)) in repeated or hash(shared_key(line)) in self.shared:
                flagged += size
        return round(flagged / total, 3) if total and flagged else 0.0


def find_boilerplate(pages_by_source: Mapping[str, Sequence[Page]]) -> Boilerplate:
    """One pass over every source's pages (each source's are read once: a `StoredPages` holds one
    document's at a time)."""
    running: dict[str, set[int]] = {}
    docs_with: Counter[int] = Counter()
    contents: set[tuple[str, int]] = set()
    for source, pages in pages_by_source.items():
        on_pages: Counter[int] = Counter()
        in_doc: set[int] = set()
        for page in pages:
            lines = page.text.split("\n")
            on_pages.update({hash(key) for key in map(line_key, lines) if len(key) >= MIN_LINE_CHARS})
            in_doc.update(hash(k) for k in map(shared_key, lines) if len(k) >= MIN_SHARED_LINE_CHARS)
            if is_contents(page.text):
                contents.add((source, page.page))
        docs_with.update(in_doc)
        threshold = max(MIN_RUNNING_PAGES, math.ceil(RUNNING_SHARE * len(pages)))
        running[source] = {key for key, count in on_pages.items() if count >= threshold}
    shared_threshold = max(MIN_SHARED_DOCS, math.ceil(SHARED_DOCS_SHARE * len(pages_by_source)))
    shared = {key for key, count in docs_with.items() if count >= shared_threshold}
    return Boilerplate(running, shared, contents)


def chunk_scores(chunks: Iterable[Chunk], pages_by_source: Mapping[str, Sequence[Page]]) -> dict[str, float]:
    """Chunk id → share of its text that is boilerplate (only chunks with a share above 0)."""
    found = find_boilerplate(pages_by_source)
    return {chunk.id: share for chunk in chunks if (share := found.share(chunk))}
