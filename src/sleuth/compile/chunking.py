"""Chunking: cut page text into spans for embedding and keyword search (spec/context.md §3.1, §7.2).

A chunk never crosses a page boundary and, with `respect_sections`, never a section boundary. It is
always an exact slice, `page.text[start:end]`; cuts prefer paragraph, then line, then sentence,
then word boundaries. Tokens are counted as ⌈characters / 4⌉. The dense index reads a chunk in the
embedder's windows (`window_spans`, one vector each); with `vectors: fit` a chunk instead ends where
the embedder stops reading, so its one vector covers all of it.
"""

from __future__ import annotations

import bisect
import dataclasses
import hashlib
import itertools
import math
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from sleuth.compile.manifest import Chunking
from sleuth.compile.pages import Heading, Page
from sleuth.format.chunks import Chunk

CHARS_PER_TOKEN = 4
#: Bumped when the same manifest cuts chunks differently, so that a recompile re-chunks every source.
CHUNKER_VERSION = 3
#: A window shorter than this (a header that fills the embedder's input by itself) is not honoured.
MIN_WINDOW_CHARS = 200
MAX_TABLE_HEADER = 300


@dataclass(frozen=True)
class Window:
    """The embedder's input window, as the chunker needs it: a chunk and the header embedded above
    it (`header(section_path)`) fit in `pieces` word pieces, counted by `starts`."""

    pieces: int
    starts: Callable[[str], list[int]]
    header: Callable[[list[str]], str]
    #: Windows one chunk may fill (`vectors: windows`); 1 cuts a chunk where one window ends (`fit`).
    per_chunk: int = 1

    def budget(self, section_path: list[str], window: int = 0) -> int:
        """Word pieces of text that the `window`-th window of a chunk in this section holds: the first
        reads the section's header above it, the next ones only the document's (`header([])`)."""
        return self.pieces - header_pieces(self, section_path if window == 0 else [])

    def chunk_budget(self, section_path: list[str]) -> int:
        """Word pieces a chunk may hold so that `per_chunk` windows read all of it."""
        return sum(self.budget(section_path, i) for i in range(self.per_chunk))


_BREAKS = ("\n\n", "\n", ". ", "? ", "! ", "; ", ", ", " ")


def count_tokens(text: str) -> int:
    return math.ceil(len(text) / CHARS_PER_TOKEN)


def chunk_id(source_path: str, page: int, start: int, text: str) -> str:
    payload = "\x1f".join((source_path, str(page), str(start), text))
    return "chk_" + hashlib.sha256(payload.encode("utf-8")).hexdigest()[:16]


def make_chunk(source_path: str, page: Page, start: int, end: int, section_path: list[str]) -> Chunk:
    text = page.text[start:end]
    return Chunk(
        id=chunk_id(source_path, page.page, start, text),
        source_path=source_path,
        page=page.page,
        start=start,
        end=end,
        section_path=section_path,
        text=text,
        tokens=count_tokens(text),
        sha256=hashlib.sha256(text.encode("utf-8")).hexdigest(),
    )


class SectionTracker:
    """The heading stack, carried across pages so page 7 knows it is still in `Item 7`."""

    def __init__(self) -> None:
        self._stack: list[Heading] = []

    def enter(self, heading: Heading) -> None:
        while self._stack and self._stack[-1].level >= heading.level:
            self._stack.pop()
        self._stack.append(heading)

    @property
    def path(self) -> list[str]:
        return [h.text for h in self._stack]


def section_paths(pages: list[Page]) -> Iterator[tuple[Page, int, int, list[str]]]:
    """(page, start, end, section path) for each section segment of each page, in order."""
    tracker = SectionTracker()
    for page in pages:
        cuts = sorted({h.start for h in page.headings if 0 < h.start < len(page.text)})
        bounds = [0, *cuts, len(page.text)]
        by_start: dict[int, list[Heading]] = {}
        for h in page.headings:
            by_start.setdefault(h.start, []).append(h)
        for a, b in itertools.pairwise(bounds):
            for h in by_start.get(a, []):
                tracker.enter(h)
            yield page, a, b, tracker.path


def header_pieces(window: Window, section_path: list[str]) -> int:
    """Word pieces the header line and [CLS], [SEP] take from a window above a chunk of this section."""
    return len(window.starts(window.header(section_path) + "\n")) + 2


def window_spans(text: str, window: Window, section_path: list[str]) -> list[tuple[int, int]]:
    """`text` (a chunk) as consecutive spans that each fill the embedder's window below their header
    (`Window.budget`), cut at the last space before it is full: one vector per span reads every word
    of the chunk once, with no overlap and few windows (a chunk scores its best window)."""
    starts = window.starts(text)
    budget = window.budget(section_path)
    if len(starts) <= budget or budget * CHARS_PER_TOKEN < MIN_WINDOW_CHARS:
        return [(0, len(text))]
    spans: list[tuple[int, int]] = []
    a, first = 0, 0
    while first + budget < len(starts):
        limit = starts[first + budget]  # where the first piece past the window starts
        floor = starts[first + budget * 3 // 4]
        space = max(text.rfind(" ", floor, limit), text.rfind("\n", floor, limit))
        end = space if space > a else limit
        spans.append(_trim(text, a, end))
        a = end
        while a < len(text) and text[a].isspace():
            a += 1
        first = bisect.bisect_left(starts, a)
        budget = window.budget(section_path, len(spans))
    if a < len(text):
        spans.append(_trim(text, a, len(text)))
    return [(s, e) for s, e in spans if s < e]


def chunk_pages(
    source_path: str, pages: list[Page], config: Chunking, window: Window | None = None
) -> list[Chunk]:
    """`window` is the embedder's (given when chunks are embedded); without it chunks are cut on
    `target_size` alone."""
    target = config.target_size * CHARS_PER_TOKEN
    overlap = config.overlap * CHARS_PER_TOKEN
    structured = config.strategy != "sliding_window" and config.respect_sections
    chunks: list[Chunk] = []
    if structured:
        segments = _merge_heading_only(list(section_paths(pages)))
    else:
        segments = [(p, 0, len(p.text), path) for p, path in _page_paths(pages)]
    headers: dict[tuple[str, ...], int] = {}
    row_starts: dict[int, list[int]] = {}  # `table_header`'s, per table of the corpus's pages
    for page, a, b, path in segments:
        fit = None
        if window is not None:
            key = tuple(path)
            if key not in headers:  # [CLS], [SEP] and the header lines come off the windows
                headers[key] = window.chunk_budget(path)
            fit = _Fit([a + s for s in window.starts(page.text[a:b])], headers[key])
        for start, end in split_span(page.text, a, b, target, overlap, fit):
            chunk = make_chunk(source_path, page, start, end, path)
            header = table_header(page, start, end, row_starts)
            chunks.append(chunk if header is None else dataclasses.replace(chunk, table_header=header))
    if not structured:
        # Structure is ignored for cutting, but a chunk still says which section it starts in.
        chunks = [_with_section(c, pages) for c in chunks]
    return _with_outline(chunks, pages)


def _with_outline(chunks: list[Chunk], pages: list[Page]) -> list[Chunk]:
    """Each chunk's path in the pages' outline (`Page.outline`), where it differs from its section
    path: the heading stack carried across pages, with every heading that starts before the chunk's
    middle entered. A heading the outline adds does not cut chunks: one it reads inside a chunk
    (`Item` / `7.` / `MANAGEMENT'S …` mid-page) heads that chunk when it opens its first half, and
    the headings a chunk opens with (`PART II` / `Item 5. …`, merged into one chunk) all head it."""
    if all(page.outline is None for page in pages):
        return chunks
    order = sorted(range(len(chunks)), key=lambda i: (chunks[i].page, chunks[i].start))
    paths: dict[int, list[str]] = {}
    tracker = SectionTracker()
    k = 0
    for page in sorted(pages, key=lambda p: p.page):
        headings = sorted(page.outline if page.outline is not None else page.headings, key=lambda h: h.start)
        h = 0
        reach = 0  # headings starting before this offset are entered: never goes back
        while k < len(order) and chunks[order[k]].page == page.page:
            chunk = chunks[order[k]]
            reach = max(reach, chunk.start + 1, (chunk.start + chunk.end) // 2)
            while h < len(headings) and headings[h].start < reach:
                tracker.enter(headings[h])
                h += 1
            paths[order[k]] = tracker.path
            k += 1
        for heading in headings[h:]:
            tracker.enter(heading)
    return [
        chunk
        if paths.get(i, chunk.section_path) == chunk.section_path
        else dataclasses.replace(chunk, outline_path=paths[i])
        for i, chunk in enumerate(chunks)
    ]


def table_header(page: Page, start: int, end: int, row_starts: dict[int, list[int]]) -> str | None:
    """The header of the table whose rows `[start, end)` holds, when the header lies above `start`
    (issue 25, item 2): caption, column headers and unit, at most `MAX_TABLE_HEADER` characters.
    `row_starts` keeps each table's row offsets between the calls for one page's chunks."""
    for table in page.tables:
        if len(table.rows) < 2 or table.rows[0].start >= start:
            continue
        starts = row_starts.get(id(table))
        if starts is None:
            starts = row_starts[id(table)] = [row.start for row in table.rows[1:]]
        first = bisect.bisect_left(starts, start)  # rows are in page order
        if first == len(starts) or starts[first] >= end:
            continue
        columns = [c for c in table.rows[0].cells if c]
        if not columns:
            return None
        text = " | ".join(columns)
        if table.title:
            text = f"{table.title}: {text}"
        if table.unit:
            text += f" ({table.unit})"
        return text[:MAX_TABLE_HEADER]
    return None


def _page_paths(pages: list[Page]) -> Iterator[tuple[Page, list[str]]]:
    tracker = SectionTracker()
    for page in pages:
        yield page, tracker.path
        for h in page.headings:
            tracker.enter(h)


def _with_section(chunk: Chunk, pages: list[Page]) -> Chunk:
    path: list[str] = []
    for page, a, _b, seg_path in section_paths(pages):
        if page.page > chunk.page or (page.page == chunk.page and a > chunk.start):
            break
        path = seg_path
    return dataclasses.replace(chunk, section_path=path)


def _merge_heading_only(
    segments: list[tuple[Page, int, int, list[str]]],
) -> list[tuple[Page, int, int, list[str]]]:
    """A segment holding only its heading line joins the next segment of the same page when that
    one is a subsection of it (a parent title belongs with its first child, not alone)."""
    out: list[tuple[Page, int, int, list[str]]] = []
    pending: tuple[Page, int, int, list[str]] | None = None
    for seg in segments:
        page, _a, b, path = seg
        if pending is not None:
            p_page, p_a, _p_b, p_path = pending
            if p_page is page and path[: len(p_path)] == p_path and len(path) > len(p_path):
                seg = (page, p_a, b, path)
            else:
                out.append(pending)
            pending = None
        body = page.text[seg[1] : seg[2]].strip()
        if "\n" not in body and seg[1] in {h.start for h in page.headings}:
            pending = seg
            continue
        out.append(seg)
    if pending is not None:
        out.append(pending)
    return out


@dataclass(frozen=True)
class _Fit:
    """Where each word piece of a segment starts (page offsets) and how many a chunk may hold."""

    starts: list[int]
    budget: int

    def chars(self, start: int) -> int | None:
        """How many characters from `start` fit the budget; None when the rest all fit."""
        first = bisect.bisect_left(self.starts, start)
        if first + self.budget >= len(self.starts):
            return None
        return self.starts[first + self.budget] - start


def split_span(
    text: str,
    a: int,
    b: int,
    target: int,
    overlap: int,
    fit: _Fit | None = None,
) -> Iterator[tuple[int, int]]:
    """Windows of at most `target` chars over text[a:b], and no more word pieces than `fit`
    allows, trimmed of surrounding whitespace."""
    a, b = _trim(text, a, b)
    while a < b:
        limit = target
        seen = fit.chars(a) if fit is not None else None
        if seen is not None and MIN_WINDOW_CHARS <= seen < target:
            limit = seen
        if b - a <= limit:
            yield a, b
            return
        end = _best_cut(text, a, a + limit)
        s, e = _trim(text, a, end)
        if s < e:
            yield s, e
        # A window shorter than the target keeps its overlap to a quarter of itself.
        next_start = max(end - (overlap if limit == target else min(overlap, limit // 4)), a + 1)
        if overlap:
            # Start the overlap at a word boundary so no chunk opens mid-word.
            space = text.find(" ", next_start, end)
            newline = text.find("\n", next_start, end)
            candidates = [p + 1 for p in (space, newline) if p != -1]
            if candidates:
                next_start = min(candidates)
        a, b = _trim(text, next_start, b)


def _best_cut(text: str, start: int, limit: int) -> int:
    """The last good boundary in the back 40% of the window, else the hard limit."""
    floor = start + int((limit - start) * 0.6)
    for sep in _BREAKS:
        pos = text.rfind(sep, floor, limit)
        if pos != -1:
            return pos + len(sep)
    return limit


def _trim(text: str, a: int, b: int) -> tuple[int, int]:
    while a < b and text[a].isspace():
        a += 1
    while b > a and text[b - 1].isspace():
        b -= 1
    return a, b
