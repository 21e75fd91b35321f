"""Comparing one section across documents (issue 43): "new or escalating risks" between two quarterly
filings was diffing written by hand in a step, and the pages and chunks the two filings happened to
break at showed up as differences. Here each document's section (or page range) is read as one text
across its pages, as a reader reads it, and the documents are aligned sentence by sentence
(`format.comparison`); what differs comes back as sentences whose spans are the verbatim page text
(`Stitched.places`), each with its own evidence label, so a model cites them as it cites a hit.
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from sleuth.format.chunks import Chunk
from sleuth.format.comparison import Stitched, align, stitch, word_edits
from sleuth.sdk.base import KnowledgeBase
from sleuth.sdk.errors import LimitError, NotFoundError
from sleuth.sdk.notices import notice
from sleuth.sdk.passages import find_section, within_section
from sleuth.sdk.primitives import Documents, MaxSentences, PageRanges, Section, primitive, shown
from sleuth.sdk.scoped import ScopedReader
from sleuth.sdk.types import Change, Compared, Comparison, SectionDiff, Sentence

#: How many documents one call compares (the first is the base).
MAX_DOCUMENTS = 10
#: The most pages read of one document: a page range, or a section's pages.
MAX_PAGES = 200
#: The most sentences one call lists (a change is two): each is an evidence span or two, and a step
#: reports a bounded number of spans (`sandbox.messages.MAX_SPANS`); no model reads more at once.
MAX_LISTED = 1_000


@dataclass(frozen=True)
class _Side:
    """One document as compared: where it is, what was read of it, and its sentences (`text[a:b]`)."""

    ctx: ScopedReader
    compared: Compared
    chunks: list[Chunk]
    stitched: Stitched
    sentences: list[tuple[int, int]]

    def text(self, index: int) -> str:
        a, b = self.sentences[index]
        return " ".join(self.stitched.text[a:b].split())


class Comparisons(KnowledgeBase):
    """A section of several documents, aligned by sentence."""

    @primitive("read")
    def compare_sections(
        self,
        sources: Documents,
        section: Section = None,
        pages: PageRanges = None,
        max_sentences: MaxSentences = 1000,
        context: str | None = None,
    ) -> Comparison:
        """One section of 2-10 documents (source paths; the first is the base) compared sentence by
        sentence, as a reader reads them: page breaks, running headers and chunk ends are no
        differences. `section`: words of its heading or a path ('Part II > Item 1A'), as in
        read_section; `pages`: (first, last) for every document or {path: (first, last)}; with both,
        the section within those pages. Per other document: `added`, `removed` and `changed`
        (old → new, with `similarity` and word `edits`) sentences, each citable (`.evidence`, one
        span per page it is on), and `unchanged`/`moved` counts; `max_sentences` per document."""
        paths = _paths(sources)
        ranges = _ranges(pages, paths)
        if section is None and any(path not in ranges for path in paths):
            raise LimitError(
                "compare_sections() needs section= (words of a heading) or pages= for every document"
            )
        sides = [self._side(p, section, ranges.get(p), max_sentences, context) for p in paths]
        diffs: list[SectionDiff] = []
        room = MAX_LISTED
        for other in sides[1:]:
            diffs.append(self._diff(sides[0], other, room))
            room -= len(diffs[-1].added) + len(diffs[-1].removed) + 2 * len(diffs[-1].changed)
        return Comparison(section, [side.compared for side in sides], diffs)

    # ------------------------------------------------------------------------------ helpers
    def _side(
        self,
        path: str,
        section: str | None,
        span: tuple[int, int] | None,
        max_sentences: int,
        context: str | None,
    ) -> _Side:
        """One document's section or page range, read as one text and split into sentences."""
        ctx = self._source(path, context)
        chunks = ctx.reader.source_chunks(path)
        heading: list[str] = []
        if section is not None:
            at, heading = find_section(chunks, section, path)
            end = at
            while end + 1 < len(chunks) and within_section(chunks[end + 1], heading):
                end += 1
            chunks = chunks[at : end + 1]
        if span is not None:
            count = ctx.reader.page_count(path)
            if span[1] - span[0] >= MAX_PAGES:
                raise LimitError(f"pages=({span[0]}, {span[1]}) is over {MAX_PAGES} pages; compare fewer")
            if span[1] > count:
                raise NotFoundError(f"{path} has {count} pages; pages=({span[0]}, {span[1]}) runs past them")
            chunks = [c for c in chunks if span[0] <= c.page <= span[1]]
        places = _pieces(ctx, path, chunks, span if section is None else None)
        if len(places) > MAX_PAGES:
            raise LimitError(f"{path}: the text compared spans {len(places)} pages; at most {MAX_PAGES}")
        stitched = stitch(
            [(page, ctx.reader.reading(path, page).kept(text, a, b)) for page, text, a, b in places]
        )
        sentences = stitched.sentences()
        truncated = len(sentences) > max_sentences
        if truncated:
            where = f"its section {' > '.join(heading)!r}" if heading else "its pages"
            notice(
                f"[notice: compare_sections: {path} has {len(sentences)} sentences in {where}; "
                f"compared the first {max_sentences} (max_sentences), and no difference after the "
                "last sentence both documents share]"
            )
            sentences = sentences[:max_sentences]
        read_pages = list(dict.fromkeys(page for _at, page, _kept in stitched.pieces))
        compared = Compared(ctx.slug, path, heading, read_pages, len(sentences), truncated)
        return _Side(ctx, compared, chunks, stitched, sentences)

    def _diff(self, base: _Side, other: _Side, room: int) -> SectionDiff:
        """The base's sentences against the other's; the spans of what differs labelled in the order
        the diff shows them (added, removed, changed), at most `room` sentences of them listed."""
        old = [base.text(i) for i in range(len(base.sentences))]
        new = [other.text(j) for j in range(len(other.sentences))]
        found = align(old, new, open_end=base.compared.truncated or other.compared.truncated)
        if found.unpaired:
            notice(
                f"[notice: compare_sections: {other.compared.source_path} differs from "
                f"{base.compared.source_path} in too many sentences to weigh every pair as a change; "
                "some changed sentences are listed as removed and added]"
            )
        kept_added = found.added[:room]
        kept_removed = found.removed[: room - len(kept_added)]
        kept_changed = found.changed[: max(0, room - len(kept_added) - len(kept_removed)) // 2]
        added = [self._sentence(other, j) for j in kept_added]
        removed = [self._sentence(base, i) for i in kept_removed]
        changed = [
            Change(
                self._sentence(base, i), self._sentence(other, j), round(ratio, 2), word_edits(old[i], new[j])
            )
            for i, j, ratio in kept_changed
        ]
        unlisted = len(found.added) + len(found.removed) + len(found.changed) - len(added)
        unlisted -= len(removed) + len(changed)
        if unlisted:
            notice(
                f"[notice: compare_sections: {unlisted} more differences of {other.compared.source_path} "
                f"not listed (at most {MAX_LISTED:,} sentences a call); compare a narrower section or pages]"
            )
        return SectionDiff(
            base.compared, other.compared, added, removed, changed, found.unchanged, found.moved, unlisted
        )

    def _sentence(self, side: _Side, index: int) -> Sentence:
        """A sentence with a registered span on each page it covers (the page's own text there)."""
        path = side.compared.source_path
        spans = []
        for page, start, end in side.stitched.places(*side.sentences[index]):
            text = side.ctx.reader.page_text(path, page) or ""
            spans.append(
                self.evidence.register(
                    side.ctx.slug,
                    path,
                    page,
                    start,
                    end,
                    text[start:end],
                    _heading(side, page, start),
                    "chunk",
                )
            )
        return Sentence(side.text(index), path, spans)

    def _source(self, path: str, context: str | None) -> ScopedReader:
        """The context in scope that holds the source `path`."""
        scope = self._scope(context)
        for ctx in scope:
            if path in ctx.sources:
                return ctx
        known = [p for ctx in scope for p in ctx.sources]
        close = difflib.get_close_matches(path, known, n=5, cutoff=0.3)
        raise NotFoundError(
            f"no source {shown(path)} in this turn's contexts"
            + (f" (closest: {', '.join(close)})" if close else "; query_db('SELECT path FROM _sources')")
        )


def _paths(sources: Any) -> list[str]:
    """The source paths to compare: 2-10 distinct strings."""
    if isinstance(sources, str) or not isinstance(sources, Sequence):
        raise LimitError(f"sources must be a list of 2-{MAX_DOCUMENTS} source paths, got {shown(sources)}")
    paths = list(sources)
    if not 2 <= len(paths) <= MAX_DOCUMENTS or not all(isinstance(p, str) and p for p in paths):
        raise LimitError(f"sources must be a list of 2-{MAX_DOCUMENTS} source paths, got {shown(sources)}")
    if len(set(paths)) < len(paths):
        raise LimitError(f"sources names a document twice: {shown(sources)}")
    return paths


def _ranges(pages: Any, paths: Sequence[str]) -> dict[str, tuple[int, int]]:
    """`pages` as a checked (first, last) per document: one pair for all, or one per path."""
    if pages is None:
        return {}
    given = pages if isinstance(pages, Mapping) else dict.fromkeys(paths, pages)
    unknown = [p for p in given if p not in paths]
    if unknown:
        raise LimitError(f"pages= names {shown(unknown[0])}, which is not one of sources")
    out = {}
    for path, span in given.items():
        if (
            not isinstance(span, Sequence)
            or isinstance(span, str)
            or len(span) != 2
            or not all(isinstance(n, int) and not isinstance(n, bool) for n in span)
            or not 1 <= span[0] <= span[1]
        ):
            raise LimitError(f"pages must be (first, last) with 1 <= first <= last, got {shown(span)}")
        out[path] = (int(span[0]), int(span[1]))
    return out


def _pieces(
    ctx: ScopedReader, path: str, chunks: Sequence[Chunk], span: tuple[int, int] | None
) -> list[tuple[int, str, int, int]]:
    """`(page, page text, start, end)` to read, in reading order: whole pages for a page range,
    else from the first to the last of the chunks' characters on each of their pages."""
    if span is not None:
        out = []
        for page in range(span[0], span[1] + 1):
            text = ctx.reader.page_text(path, page)
            if text:
                out.append((page, text, 0, len(text)))
        return out
    bounds: dict[int, tuple[int, int]] = {}
    for chunk in chunks:
        low, high = bounds.get(chunk.page, (chunk.start, chunk.end))
        bounds[chunk.page] = (min(low, chunk.start), max(high, chunk.end))
    return [(page, ctx.reader.page_text(path, page) or "", a, b) for page, (a, b) in bounds.items()]


def _heading(side: _Side, page: int, start: int) -> list[str]:
    """The heading path of the chunk a span starts in (the section's, where none holds it)."""
    on_page = [c for c in side.chunks if c.page == page]
    holding = [c for c in on_page if c.start <= start < c.end]
    if holding:
        return list(holding[0].heading_path)
    return list(side.compared.section_path)
