"""Reading around evidence (issue 25, item 1): a hit's neighbouring chunks, its whole page, its
section. A hit cut mid-table or mid-list otherwise costs a new search that may miss; here the model
reads on from where it is, and every chunk it reads is a citable span with its own evidence label.

Each primitive takes a *locator*: a hit, a span, an evidence label ("E7") or a chunk id
("chk_…", what MCP clients see); `read_page` and `read_section` also take a source path. Reads are
bounded by `max_chars`, so a long section never floods the printed output.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Mapping, Sequence
from typing import Any

from sleuth.format.chunks import Chunk
from sleuth.sdk.base import KnowledgeBase
from sleuth.sdk.errors import LimitError, NotFoundError
from sleuth.sdk.primitives import Around, Locator, MaxChars, PageNumber, Section, primitive, shown
from sleuth.sdk.scoped import ScopedReader
from sleuth.sdk.types import Hit, Passage, Span

_LABEL = re.compile(r"E\d+")
_CHUNK_ID = re.compile(r"chk_[0-9a-f]{16}")
#: Of a section longer than `max_chars`, the share of the budget spent before the hit's chunk.
BEFORE_SHARE = 0.3
#: The longest locator or source path looked up (a path is a version's key, never this long).
MAX_LOCATOR_CHARS = 2000


class Passages(KnowledgeBase):
    """Consecutive chunks of one document, read from a hit, a label or a place."""

    @primitive("read")
    def read_around(
        self, hit: Locator, before: Around = 1, after: Around = 1, context: str | None = None
    ) -> Passage:
        """The chunks just before and after `hit` in its document's reading order, its own included:
        a table, list or sentence cut by a chunk's end goes on here. `hit` is a hit, a span, an
        evidence label ("E7") or a chunk id; every chunk returned is citable (its own label)."""
        ctx, chunk = self._locate(hit, context)
        chunks = ctx.reader.source_chunks(chunk.source_path)
        at = ctx.reader.chunk_position(chunk.id)
        return self._passage(ctx, chunk.source_path, chunks[max(0, at - before) : at + after + 1], False)

    @primitive("read")
    def read_page(
        self,
        source: Locator,
        page: PageNumber = None,
        max_chars: MaxChars = 8000,
        context: str | None = None,
    ) -> Passage:
        """A whole page as its chunks in reading order, cut at `max_chars`: the page of a hit, span,
        label ("E7") or chunk id, or of a source path with `page` (1-based)."""
        ctx, path, on_page = self._place(source, page, context)
        chunks = [c for c in ctx.reader.source_chunks(path) if c.page == on_page]
        if not chunks:
            count = ctx.reader.page_count(path)
            raise NotFoundError(
                f"{path} has no text on page {on_page}" + (f"; its pages are 1-{count}" if count else "")
            )
        kept, cut = _within(chunks, max_chars, 0)
        return self._passage(ctx, path, kept, cut)

    @primitive("read")
    def read_section(
        self,
        source: Locator,
        section: Section = None,
        max_chars: MaxChars = 8000,
        context: str | None = None,
    ) -> Passage:
        """A section in reading order, across pages, cut at `max_chars`: the one a hit, span, label
        or chunk id is in (its deepest heading), or, with `section`, the first section of the
        document (a source path, or a hit's) whose heading contains it (any case)."""
        if section is None:
            ctx, chunk = self._locate(source, context)
            chunks = ctx.reader.source_chunks(chunk.source_path)
            at = ctx.reader.chunk_position(chunk.id)
            path = chunk.heading_path
        else:
            ctx, source_path = self._document(source, context)
            chunks = ctx.reader.source_chunks(source_path)
            at, path = find_section(chunks, section, source_path)
        low, high = at, at
        while low > 0 and within_section(chunks[low - 1], path):
            low -= 1
        while high + 1 < len(chunks) and within_section(chunks[high + 1], path):
            high += 1
        run = chunks[low : high + 1]
        kept, cut = _within(run, max_chars, at - low if section is None else 0)
        return self._passage(ctx, run[0].source_path, kept, cut)

    # ------------------------------------------------------------------------------ helpers
    def _passage(
        self, ctx: ScopedReader, source_path: str, chunks: Sequence[Chunk], truncated: bool
    ) -> Passage:
        # A chunk that is all page furniture (a running header on a line of its own) reads as nothing.
        chunks = [c for c in chunks if ctx.reader.read_span(c.source_path, c.page, c.start, c.end, c.text)]
        hits = [self._chunk_hit(ctx, c.id, 0.0) for c in chunks]
        text = "\n".join(f"[{h.ref} p.{h.page}] {h.chunk_text}" for h in hits)
        common = _common_prefix([c.heading_path for c in chunks])
        pages = list(dict.fromkeys(c.page for c in chunks))
        return Passage(ctx.slug, source_path, pages, common, hits, text, truncated)

    def _locate(self, where: Any, context: str | None) -> tuple[ScopedReader, Chunk]:
        """The context and chunk a locator points at."""
        if isinstance(where, Hit):
            if where.kind == "chunk":
                for ctx in self._scope(where.context):
                    chunk = ctx.reader.chunks.get(where.id)
                    if chunk is not None:
                        return ctx, chunk
            if where.span is not None:
                return self._chunk_of(where.span)
            raise NotFoundError(
                f"{where.name!r} is an artifact, not a place in a document: read_artifact({where.name!r}) "
                "or cite_from_artifact() give its citable spans"
            )
        if isinstance(where, Span):
            return self._chunk_of(where)
        if isinstance(where, Mapping):  # the JSON of a hit or span (MCP clients)
            known = where.get("ref") or where.get("id")
            if isinstance(known, str):
                return self._locate(known, where.get("context") or context)
        if isinstance(where, str):
            if len(where) > MAX_LOCATOR_CHARS:
                raise LimitError(f"a locator is at most {MAX_LOCATOR_CHARS:,} characters, got {len(where):,}")
            text = where.strip()
            if _LABEL.fullmatch(text):
                span = self.evidence.get(text)
                if span is None:
                    labels = [s.ref for s in self.evidence.all()]
                    raise NotFoundError(
                        f"{text} is not an evidence label of this turn"
                        + (f"; labels so far: {', '.join(labels[:30])}" if labels else "")
                    )
                return self._chunk_of(span)
            if _CHUNK_ID.fullmatch(text):
                for ctx in self._scope(context):
                    chunk = ctx.reader.chunks.get(text)
                    if chunk is not None:
                        return ctx, chunk
                raise NotFoundError(f"no chunk {text} in this turn's contexts")
        raise LimitError(
            f"expected a hit, a span, an evidence label ('E7') or a chunk id ('chk_…'), got {shown(where)}"
        )

    def _chunk_of(self, span: Span) -> tuple[ScopedReader, Chunk]:
        """The chunk that holds the start of `span` (an artifact's quote, a table cell), or the
        nearest one on its page."""
        ctx = self._scope(span.context)[0]
        on_page = [c for c in ctx.reader.source_chunks(span.source_path) if c.page == span.page]
        if not on_page:
            raise NotFoundError(f"{span.source_path} has no chunk on page {span.page}")
        holding = [c for c in on_page if c.start <= span.start < c.end]
        return ctx, holding[0] if holding else min(on_page, key=lambda c: abs(c.start - span.start))

    def _document(self, source: Any, context: str | None) -> tuple[ScopedReader, str]:
        """The context and source path of a path, or of a locator's document."""
        if _is_path(source):
            scope = self._scope(context)
            for ctx in scope:
                if source in ctx.sources:
                    return ctx, source
            if len(source) > MAX_LOCATOR_CHARS:
                raise LimitError(f"a source path is at most {MAX_LOCATOR_CHARS:,} characters")
            paths = [p for ctx in scope for p in ctx.sources]
            close = difflib.get_close_matches(source, paths, n=5, cutoff=0.3)
            raise NotFoundError(
                f"no source {shown(source)} in this turn's contexts"
                + (f" (closest: {', '.join(close)})" if close else "; query_db('SELECT path FROM _sources')")
            )
        ctx, chunk = self._locate(source, context)
        return ctx, chunk.source_path

    def _place(self, source: Any, page: int | None, context: str | None) -> tuple[ScopedReader, str, int]:
        """The context, source path and page a `read_page` call names."""
        if _is_path(source):
            if page is None:
                raise LimitError("read_page(path) needs page= (1-based), or pass a hit or a label")
            ctx, path = self._document(source, context)
            return ctx, path, page
        ctx, chunk = self._locate(source, context)
        return ctx, chunk.source_path, chunk.page if page is None else page


def _is_path(source: Any) -> bool:
    """Whether a locator is a source path: a string that is neither an evidence label nor a chunk id."""
    return (
        isinstance(source, str)
        and not _LABEL.fullmatch(source.strip())
        and not _CHUNK_ID.fullmatch(source.strip())
    )


def within_section(chunk: Chunk, path: list[str]) -> bool:
    """Under the heading path `path`; with no heading (text before the first one), only chunks that
    have none either."""
    return chunk.heading_path[: len(path)] == path if path else not chunk.heading_path


def find_section(chunks: Sequence[Chunk], section: str, source_path: str) -> tuple[int, list[str]]:
    """The first chunk under a heading that contains `section` (any case), and the heading path to
    that heading; `A > B` is a path: a heading containing B under one containing A."""
    wanted = [part.casefold().strip() for part in section.split(">") if part.strip()] or [""]
    for position, chunk in enumerate(chunks):
        depth = _heading_depth(chunk.heading_path, wanted)
        if depth is not None:
            return position, chunk.heading_path[: depth + 1]
    headings = list(dict.fromkeys(h for c in chunks for h in c.heading_path))
    close = difflib.get_close_matches(section, headings, n=5, cutoff=0.3)
    raise NotFoundError(
        f"no heading of {source_path} contains {section!r}"
        + (f" (closest: {', '.join(map(repr, close))})" if close else "")
        + (
            f"; its first headings: {', '.join(map(repr, headings[:10]))}"
            if headings
            else "; it has no headings"
        )
    )


def _heading_depth(path: Sequence[str], wanted: Sequence[str]) -> int | None:
    """The depth in `path` of the heading that contains the last of `wanted`, each of the others
    contained by a heading above it in order; None when `path` has no such headings."""
    depth = -1
    for part in wanted:
        depth = next((d for d in range(depth + 1, len(path)) if part in path[d].casefold()), -2)
        if depth < 0:
            return None
    return depth


def _within(chunks: Sequence[Chunk], max_chars: int, focus: int) -> tuple[list[Chunk], bool]:
    """The chunks that fit in `max_chars` (at least one), keeping chunk `focus` and spending about
    `BEFORE_SHARE` of the budget on the chunks before it; whether any were left out."""
    if sum(len(c.text) for c in chunks) <= max_chars:
        return list(chunks), False
    low = focus
    spent = len(chunks[focus].text)
    while low > 0 and spent + len(chunks[low - 1].text) <= BEFORE_SHARE * max_chars:
        low -= 1
        spent += len(chunks[low].text)
    high = focus
    while high + 1 < len(chunks) and spent + len(chunks[high + 1].text) <= max_chars:
        high += 1
        spent += len(chunks[high].text)
    return list(chunks[low : high + 1]), True


def _common_prefix(paths: Sequence[list[str]]) -> list[str]:
    if not paths:
        return []
    common = list(paths[0])
    for path in paths[1:]:
        while path[: len(common)] != common:
            common.pop()
    return common
