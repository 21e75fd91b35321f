"""What one compiled version holds, read lazily and kept bounded: its chunks, its pages and their
labels, its documents (`knowledge/sources.json`) and its artifacts' outline.

`VersionReader` (`store.search`) searches on top of it; the SDK, citations and the page viewer read
through it. Every read goes through the version's own listings, so a path someone hands in is only
ever looked up, never joined onto a directory. Caches are bounded: a server holds a version for many
turns, and would otherwise hold the whole corpus's pages and chunks a second time (issue 24, item 5).
"""

from __future__ import annotations

import json
from functools import cached_property
from pathlib import Path
from typing import Any, Self

from sleuth.format import boilerplate
from sleuth.format.chunks import Chunk
from sleuth.format.furniture import furniture, running_keys
from sleuth.format.reading import PageReading, read_page
from sleuth.store.contexts.home import ContextDir
from sleuth.store.version.documents import DocumentResolver, covers_year, latest_of
from sleuth.store.version.info import VersionInfo, read_version_info
from sleuth.store.version.page_marks import cell_at
from sleuth.store.version.recent import Recent
from sleuth.store.version.rescore import PageKey, PageWords, chunks_by_page, page_words

#: Sources whose pages (and chunk spans) a reader keeps read; pages whose lower-cased text it keeps
#: for the second stage (a few MB: enough for a named document's title scan and a search's rescoring).
CACHED_SOURCES = 64
CACHED_PAGES = 5_000


class VersionContent:
    """One version of one context, read-only: what it holds, without its indexes."""

    def __init__(self, version_dir: Path) -> None:
        self.root = version_dir
        self.info: VersionInfo = read_version_info(version_dir)
        self._page_cache: Recent[str, dict[int, str]] = Recent(CACHED_SOURCES)
        self._label_cache: Recent[str, dict[int, str]] = Recent(CACHED_SOURCES)
        self._spans_of: Recent[str, dict[tuple[int, int, int], Chunk]] = Recent(CACHED_SOURCES)
        self._page_words_cache: Recent[PageKey, PageWords] = Recent(CACHED_PAGES)
        self._running_cache: Recent[str, frozenset[str]] = Recent(CACHED_SOURCES)
        self._reading_cache: Recent[PageKey, PageReading] = Recent(CACHED_PAGES)

    @classmethod
    def live(cls, ctx: ContextDir) -> Self:
        version = ctx.live_version()
        if version is None:
            raise LookupError("context has no live version yet: compile it first")
        return cls(ctx.version_dir(version))

    @cached_property
    def chunks(self) -> dict[str, Chunk]:
        out: dict[str, Chunk] = {}
        for path in sorted((self.root / "knowledge" / "chunks").rglob("*.jsonl")):
            with path.open(encoding="utf-8") as fh:
                for line in fh:
                    chunk = Chunk.from_json(json.loads(line))
                    out[chunk.id] = chunk
        return out

    @cached_property
    def _chunks_by_source(self) -> dict[str, list[str]]:
        by_source: dict[str, list[str]] = {}
        for cid, chunk in self.chunks.items():
            by_source.setdefault(chunk.source_path, []).append(cid)
        return by_source

    def source_chunks(self, source_path: str) -> list[Chunk]:
        """A source's chunks in reading order (its chunk file's: page by page, top down)."""
        return [self.chunks[cid] for cid in self._chunks_by_source.get(source_path, [])]

    def chunk_position(self, chunk_id: str) -> int:
        """Where a chunk is in `source_chunks` of its source."""
        return self._positions[chunk_id]

    @cached_property
    def _positions(self) -> dict[str, int]:
        return {cid: i for ids in self._chunks_by_source.values() for i, cid in enumerate(ids)}

    def _first_chunk(self, key: PageKey) -> list[str]:
        chunks = self._chunks_by_page.get(key, [])
        return [chunks[0].id] if chunks else []

    def _span_of(self, ranked: tuple[str, float]) -> tuple[PageKey, int, int]:
        chunk = self.chunks[ranked[0]]
        return (chunk.source_path, chunk.page), chunk.start, chunk.end

    def _page_of(self, cid: str) -> PageKey:
        chunk = self.chunks[cid]
        return chunk.source_path, chunk.page

    @cached_property
    def _chunks_by_page(self) -> dict[PageKey, list[Chunk]]:
        return chunks_by_page(self.chunks.values())

    def _page_words(self, key: PageKey) -> PageWords:
        """A page's words, read from its chunks (in memory already; the page file may be large)."""
        known = self._page_words_cache.get(key)
        if known is not None:
            return known
        chunks = self._chunks_by_page.get(key, [])
        return self._page_words_cache.put(key, page_words(chunks, len(self._pages_of_source[key[0]])))

    @cached_property
    def _pages_of_source(self) -> dict[str, list[PageKey]]:
        by_source: dict[str, list[PageKey]] = {}
        for key in self._chunks_by_page:
            by_source.setdefault(key[0], []).append(key)
        return by_source

    @cached_property
    def boilerplate(self) -> dict[str, float]:
        """Chunk id → its share of boilerplate (`compile.boilerplate`); empty for older versions."""
        return boilerplate.read(self.root / "index")

    # ------------------------------------------------------------------ artifacts and pages
    @cached_property
    def outline(self) -> list[dict[str, Any]]:
        """Every artifact of the version (`knowledge/outline.json`)."""
        path = self.root / "knowledge" / "outline.json"
        if not path.exists():
            return []
        data: list[dict[str, Any]] = json.loads(path.read_text("utf-8"))["artifacts"]
        return data

    @cached_property
    def page_files(self) -> dict[str, Path]:
        """Source path → its page file, listed from this version's own `knowledge/pages/`.

        A source path someone hands in (a request, the sandbox) is only ever looked up here, never
        joined onto a directory: `/etc/shadow` or `../../x` is simply not a key."""
        directory = self.root / "knowledge" / "pages"
        if not directory.is_dir():
            return {}
        return {
            path.relative_to(directory).as_posix().removesuffix(".jsonl"): path
            for path in directory.rglob("*.jsonl")
            if path.is_file() and not path.is_symlink()
        }

    def chunk_at(self, source_path: str, page: int, start: int, end: int) -> Chunk | None:
        """The chunk with exactly this span, reading only its source's chunk file (a turn resolves a
        few spans; loading every chunk of a large corpus on the host would cost it far more)."""
        found = self._spans_of.get(source_path)
        if found is None:
            found = {}
            path = self.root / "knowledge" / "chunks" / f"{source_path}.jsonl"
            if source_path in self.page_files and path.is_file():  # a key of the version, never a path
                with path.open(encoding="utf-8") as fh:
                    for line in fh:
                        chunk = Chunk.from_json(json.loads(line))
                        found[(chunk.page, chunk.start, chunk.end)] = chunk
            self._spans_of.put(source_path, found)
        return found.get((page, start, end))

    @cached_property
    def artifact_names(self) -> frozenset[str]:
        return frozenset(str(a.get(key)) for a in self.outline for key in ("name", "id"))

    @cached_property
    def documents(self) -> dict[str, dict[str, Any]]:
        """Source path → its `knowledge/sources.json` entry (title, issuer, type, period, …)."""
        path = self.root / "knowledge" / "sources.json"
        data: dict[str, dict[str, Any]] = json.loads(path.read_text("utf-8")) if path.exists() else {}
        return data

    @cached_property
    def resolver(self) -> DocumentResolver:
        return DocumentResolver(self.documents)

    def sources_where(
        self,
        issuer: str | None = None,
        doc_type: str | None = None,
        year: int | None = None,
        latest: bool = False,
    ) -> list[str]:
        """The sources whose identity matches: `issuer` as a case-insensitive substring, `doc_type`
        exactly, `year` its fiscal or its calendar one (`covers_year`); with `latest`, of those only
        the newest of each issuer and type (`latest_of`)."""
        out = self._sources_where(issuer, doc_type, year)
        return latest_of(out, self.documents) if latest else out

    def _sources_where(self, issuer: str | None, doc_type: str | None, year: int | None) -> list[str]:
        out = []
        for path, entry in self.documents.items():
            if issuer is not None and issuer.casefold() not in str(entry.get("issuer") or "").casefold():
                continue
            if doc_type is not None and doc_type.casefold() != str(entry.get("doc_type") or "").casefold():
                continue
            if year is not None and not covers_year(entry, year):
                continue
            out.append(path)
        return out

    def resolve_documents(self, query: str) -> list[str]:
        """The documents a question names (`store.documents.DocumentResolver`)."""
        return self.resolver.resolve(query)

    def page_text(self, source_path: str, page: int) -> str | None:
        """The stored text of one page: what every citation is checked against."""
        return self._pages(source_path).get(page)

    def page_count(self, source_path: str) -> int:
        """How many pages the version stored for this source (0 when it is not one of its sources)."""
        return len(self._pages(source_path))

    def cell_caption(self, source_path: str, page: int, start: int, end: int) -> str | None:
        """The table cell at exactly that span as its row, period and figure; None for prose."""
        return cell_at(self.root, source_path, page, start, end)

    def reading(self, source_path: str, page: int) -> PageReading:
        """How a page reads (`format.reading`): the document's running headers and footers and the
        page's printed number cut (`format.furniture`), its wrapped lines joined. Worked out from
        the stored pages alone, so the sandbox that shows a hit and the host that checks a quote
        from it cut the same characters."""
        key = (source_path, page)
        known = self._reading_cache.get(key)
        if known is not None:
            return known
        text = self.page_text(source_path, page)
        if text is None:
            return PageReading()
        running = self._running_cache.get(source_path)
        if running is None:
            running = self._running_cache.put(source_path, running_keys(self._pages(source_path).values()))
        found = read_page(text, furniture(text, running, self.page_label(source_path, page)))
        return self._reading_cache.put(key, found)

    def read_span(self, source_path: str, page: int, start: int, end: int, text: str) -> str:
        """`text`, the page's `[start:end)`, as a reader reads it (`reading`); as it is when the page
        does not hold it there (nothing to go by)."""
        page_text = self.page_text(source_path, page)
        if page_text is None or page_text[start:end] != text:
            return text
        return self.reading(source_path, page).read(page_text, start, end)

    def page_label(self, source_path: str, page: int) -> str | None:
        """The number printed on a page ("38" on a PDF's 40th page), when the parse found one."""
        labels = self._label_cache.get(source_path)
        if labels is None:
            self._read_pages(source_path)
            labels = self._label_cache.get(source_path) or {}
        return labels.get(page)

    def _pages(self, source_path: str) -> dict[int, str]:
        pages = self._page_cache.get(source_path)
        return pages if pages is not None else self._read_pages(source_path)

    def _read_pages(self, source_path: str) -> dict[int, str]:
        path = self.page_files.get(source_path)
        if path is None:  # not a source of this version: nothing to read, nothing to cache
            return {}
        pages: dict[int, str] = {}
        labels: dict[int, str] = {}
        with path.open(encoding="utf-8") as fh:
            for line in fh:
                row = json.loads(line)
                pages[int(row["page"])] = row["text"]
                if row.get("label") is not None:
                    labels[int(row["page"])] = str(row["label"])
        self._label_cache.put(source_path, labels)
        return self._page_cache.put(source_path, pages)
