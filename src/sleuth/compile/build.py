"""One new version, built phase by phase into `versions/vN.building/` (spec/context.md §5.1): parse,
chunk, artifacts, embed, index, then the report and `version.json`. `pipeline.CompileRun` decides
what changed and whether to build at all, and flips `LIVE` once the build is complete."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from contextlib import AbstractContextManager
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from sleuth.compile import artifacts as cards
from sleuth.compile import boilerplate, integrity, table_cells, typed_tables, version_files
from sleuth.compile import glossary as glossary_builder
from sleuth.compile.artifact_leg import ArtifactLeg
from sleuth.compile.artifacts import Artifact
from sleuth.compile.chunking import Window, chunk_pages
from sleuth.compile.documents import (
    chunk_windows,
    embed_header,
    identified,
    index_title,
    sample_queries,
    source_row,
    window_text,
    with_issuer_year_ends,
)
from sleuth.compile.extract import Extractor
from sleuth.compile.manifest import DETERMINISTIC_KINDS, Chunking, Manifest
from sleuth.compile.pages import Page, ParseError
from sleuth.compile.parse import parse_source
from sleuth.compile.report import CompileReport, Progress
from sleuth.compile.tables_db import write_tables
from sleuth.compile.version_files import SourceState
from sleuth.format import boilerplate as boilerplate_file
from sleuth.format import titles
from sleuth.format.chunks import Chunk
from sleuth.models.embedder import Embedder, EmbeddingCache, embed_cached, get_embedder
from sleuth.settings import Settings
from sleuth.store.contexts.home import ContextDir, Home, now_iso
from sleuth.store.contexts.ledger import Failure, Ledger, SourceEntry
from sleuth.store.files import write_json_atomic
from sleuth.store.version import ann, dense, keyword
from sleuth.store.version.info import version_file
from sleuth.store.version.rescore import TitleIndex, chunks_by_page, page_words

EMBED_BATCH = 256
#: Windows embedded together: sorting them by length keeps batches' padding low, and a buffer this
#: size pads about as little as sorting the whole version did, for a few MB of text.
EMBED_BUFFER = 16 * EMBED_BATCH
ANN_BLOCK = 65_536  # rows read at a time from the matrix into the graph


def embedder_window(manifest: Manifest, state: SourceState, *, embed_threads: int | None) -> Window | None:
    """The embedder's window for `state`'s chunks (the embedder run on `embed_threads`); none when chunks
    are not embedded, are read by their head alone (`vectors: head`), or the embedder reads all of a
    text."""
    if not manifest.curate.chunks.enabled or manifest.curate.chunks.chunking.vectors == "head":
        return None
    embedder = get_embedder(manifest.curate.chunks.embedding_model, threads=embed_threads)
    if embedder.window is None:
        return None
    return Window(embedder.window, embedder.piece_starts, lambda path: embed_header(state, path))


def chunk_window(chunking: Chunking, window: Window | None) -> Window | None:
    """The window the chunker fits chunks to: one embedder window (`vectors: fit`), or as many as
    `target_size` holds (`windows`: a 512-token chunk is read in two, with no short third one; the
    default 256 fills one)."""
    if window is None or chunking.vectors == "head":
        return None
    if chunking.vectors == "fit":
        return window
    return dataclasses.replace(window, per_chunk=max(1, chunking.target_size // window.pieces))


def read_window(chunking: Chunking, window: Window | None) -> Window | None:
    """The window the dense index reads a chunk in, one vector each (`vectors: windows`); none for
    the other layouts, whose chunks have one vector."""
    return window if chunking.vectors == "windows" else None


@dataclass(frozen=True)
class BuildPlan:
    """What a build starts from: where it writes, the parent it carries from, what changed."""

    out: Path  # `versions/vN.building`
    version: str
    parent_dir: Path | None
    parent_sources: dict[str, dict[str, Any]]  # the parent's `sources.json`
    snapshot: dict[str, SourceEntry]  # every source now
    unchanged: list[str]
    chunk_leg_changed: bool  # the chunker or its settings changed: every source is chunked again
    identity_changed: bool  # a newer `identify`: carried sources are identified again


class Compiler(Protocol):
    """What a build reads from the run that started it (`pipeline.CompileRun`)."""

    ctx: ContextDir
    home: Home
    manifest: Manifest
    settings: Settings  # the process's, read at its start
    force: bool
    progress: Progress
    extractor: Extractor
    warnings: list[str]
    timings: dict[str, float]

    def timed(self, phase: str) -> AbstractContextManager[None]: ...
    def window(self, state: SourceState) -> Window | None: ...


class VersionBuild:
    """The build of one version; `run()` runs every phase and returns the sample queries."""

    def __init__(self, run: Compiler, plan: BuildPlan, ledger: Ledger, report: CompileReport) -> None:
        self.run = run
        self.plan = plan
        self.ledger = ledger
        self.report = report
        self.knowledge = plan.out / "knowledge"
        self.states: dict[str, SourceState] = {}
        self.parsed: set[str] = set()  # the sources parsed in this run
        self.chunk_count = 0
        self.arts_config = run.manifest.curate.artifacts
        self.artifacts: list[Artifact] = []
        self.glossary_entries: list[tuple[str, glossary_builder.Entry]] = []
        self.typed: list[typed_tables.TypedTable] = []
        self.skipped_no_model: dict[str, str] = {}
        self.roster_files: dict[str, str] = {}
        self.artifact_files: dict[str, str] = {}
        self.chunk_rows = 0  # rows of `index/dense/chunks.npy`, once embedded
        self.chunk_windows: list[int] = []  # vectors per chunk, in `chunks()` order
        self._windows: dict[str, Window | None] = {}
        self.artifact_vectors: np.ndarray | None = None
        self.computed = 0  # vectors embedded in this run (one per window of a chunk, one per artifact)
        self.reused = 0  # vectors read from the embedding cache (or shared by a repeated text)
        self.embedder: Embedder = get_embedder(
            run.manifest.curate.chunks.embedding_model, threads=run.settings.embed_threads
        )
        self.sample_queries: list[str] = []

    def run_all(self) -> list[str]:
        self.parse()
        self.chunk()
        self.build_artifacts()
        self.embed()
        self.index()
        self.finish()
        return self.sample_queries

    def every_page(self) -> version_files.StoredPages:
        """Every source's pages, read from this version's files one source at a time."""
        return version_files.StoredPages(self.knowledge, self.states)

    def chunks(self) -> Iterator[Chunk]:
        """Every chunk of the version, source by source, read from its chunk files: the compile
        holds one source's chunks at a time, not the corpus's (issue 24, bounded memory)."""
        for rel in sorted(self.states):
            yield from version_files.load_chunks(self.knowledge, rel)

    def chunk_ids(self) -> list[str]:
        return [cid for rel in sorted(self.states) for cid in self.ledger.chunk_ids[rel]]

    def parse(self) -> None:
        """Parse every new or changed source into pages; carry the others over from the parent."""
        carried = set(self.plan.unchanged) & set(self.plan.parent_sources) if self.plan.parent_dir else set()

        self.run.progress.start("parse", len(self.plan.snapshot))
        with self.run.timed("parse"):
            for rel in self.plan.snapshot:
                entry = self.plan.snapshot[rel]
                if rel in carried and self.plan.parent_dir is not None:
                    self.states[rel] = SourceState(**self.plan.parent_sources[rel])
                    version_files.carry(
                        self.plan.parent_dir, self.plan.out, rel, with_chunks=not self.plan.chunk_leg_changed
                    )
                    if self.plan.identity_changed:  # a newer `identify` reads the same pages again
                        self.states[rel] = identified(
                            self.states[rel], version_files.load_pages(self.knowledge, rel)
                        )
                    self.ledger.manifest[rel] = entry
                    self.run.progress.advance("parse")
                    continue
                previously_failed = self.ledger.failures.get(rel)
                if (
                    previously_failed
                    and rel in self.ledger.manifest
                    and self.ledger.manifest[rel].hash == entry.hash
                    and not self.run.force
                ):
                    self.run.progress.advance("parse")
                    continue  # unchanged and still unreadable: nothing new to learn
                try:
                    parsed = parse_source(
                        self.run.ctx.sources / rel, max_text_bytes=self.run.settings.max_text_bytes
                    )
                except ParseError as exc:
                    self.ledger.failures[rel] = Failure(
                        version=self.plan.version, status=exc.status, reason=exc.reason
                    )
                    self.ledger.manifest[rel] = entry
                    if rel in self.plan.parent_sources and self.plan.parent_dir is not None:
                        # A source that fails keeps its outputs from the previous version.
                        self.states[rel] = SourceState(**self.plan.parent_sources[rel])
                        version_files.carry(
                            self.plan.parent_dir,
                            self.plan.out,
                            rel,
                            with_chunks=not self.plan.chunk_leg_changed,
                        )
                    self.run.progress.advance("parse")
                    continue
                self.ledger.failures.pop(rel, None)
                self.ledger.manifest[rel] = entry
                title = cards.document_title(rel, parsed.title, parsed.pages)
                parsed_state = SourceState(
                    path=rel,
                    title=title,
                    format=parsed.format,
                    pages=len(parsed.pages),
                    chars=parsed.chars,
                    sha256=entry.hash,
                    size=entry.size,
                    mtime=entry.mtime,
                    curated_at=now_iso(),
                    images_skipped=parsed.images_skipped,
                )
                self.states[rel] = identified(parsed_state, parsed.pages)
                version_files.write_jsonl(
                    self.knowledge / version_files.pages_rel(rel), (p.to_json() for p in parsed.pages)
                )
                self.parsed.add(rel)
                self.run.progress.advance("parse")
            # a document that states no fiscal year end takes its issuer's, from the whole context
            self.states = with_issuer_year_ends(
                self.states, lambda rel: version_files.load_pages(self.knowledge, rel)
            )
        self.run.progress.finish("parse")

    def chunk(self) -> None:
        """Chunk every source whose chunk file is not carried over (new, changed, re-chunked)."""
        chunking = self.run.manifest.curate.chunks.chunking
        with self.run.timed("chunk"):
            for rel in self.states:
                target = self.knowledge / version_files.chunks_rel(rel)
                if target.exists():
                    self.ledger.chunk_ids[rel] = [d["id"] for d in version_files.read_jsonl(target)]
                    continue
                pages = version_files.load_pages(self.knowledge, rel)
                chunks = chunk_pages(
                    rel, pages, chunking, chunk_window(chunking, self.run.window(self.states[rel]))
                )
                integrity.check_chunks(chunks, pages)
                version_files.write_jsonl(target, (c.to_json() for c in chunks))
                self.ledger.chunk_ids[rel] = [c.id for c in chunks]
        for rel in list(self.ledger.chunk_ids):
            if rel not in self.states:
                self.ledger.chunk_ids.pop(rel)
        self.chunk_count = sum(len(self.ledger.chunk_ids[rel]) for rel in self.states)

    def build_artifacts(self) -> None:
        """The artifacts, edges, typed tables, their files and the rosters."""
        leg = ArtifactLeg(self.run.manifest, self.run.extractor, self.run.warnings)
        # The artifact builders read across documents (edges, glossaries, tables, corpus summaries):
        # they get every page at once, for this phase only.
        pages_by_source: dict[str, list[Page]] = {}
        with self.run.timed("artifacts"):
            if self.arts_config.is_enabled:
                pages_by_source = dict(self.every_page())
                extractor = self.run.extractor
                if extractor.available():
                    extractor.watch(self.run.progress)
                    model_types = [
                        t for t in self.arts_config.artifact_types if t.kind not in DETERMINISTIC_KINDS
                    ]
                    self.run.progress.start("extract", len(model_types) * len(pages_by_source))
                self.artifacts, self.glossary_entries, self.typed, self.skipped_no_model = leg.build(
                    pages_by_source, self.states
                )
                leg.build_edges(self.artifacts, pages_by_source)
                if extractor.available():
                    self.run.progress.finish("extract")
            elif self.arts_config.artifact_types:
                self.run.warnings.append(
                    "artifact types are declared but curate.artifacts.enabled "
                    "is false: no artifacts were built"
                )
            cards.assign_slugs(self.artifacts)
            integrity.check_provenance(self.artifacts, self.typed, pages_by_source)
            parent_outline = version_files.read_outline(self.plan.parent_dir)
            self.artifact_files = leg.write_files(
                self.knowledge, self.artifacts, self.plan.version, parent_outline
            )
            self.roster_files = leg.write_rosters(
                self.knowledge, self.states, self.artifacts, self.typed, self.skipped_no_model
            )

    def embed(self) -> None:
        """Vectors for every chunk (one per embedder window, `chunk_windows`) and artifact, from the
        embedding cache where it has them. Chunks are read source by source and embedded
        `EMBED_BUFFER` windows at a time, longest first within the buffer so that each batch pads
        little; their vectors go straight to `index/dense/chunks.npy`. The compile holds one buffer's
        texts and vectors, never the version's."""
        if not self.run.manifest.curate.chunks.enabled:
            return
        cache = EmbeddingCache.for_embedder(self.run.home.embedding_cache_dir, self.embedder)
        dense_dir = self.plan.out / "index" / "dense"
        dense_dir.mkdir(parents=True, exist_ok=True)
        try:
            with self.run.timed("embed"):
                self.run.progress.start("embed", self.chunk_count + len(self.artifacts))
                with dense.MatrixWriter(dense.matrix_path(dense_dir, "chunks"), self.embedder.dim) as matrix:
                    texts: list[str] = []
                    held = 0  # chunks whose windows are in `texts`
                    for chunk in self.chunks():
                        state = self.states[chunk.source_path]
                        reads = chunk_windows(chunk, self._window_of(state))
                        texts += [window_text(chunk, state, span, i == 0) for i, span in enumerate(reads)]
                        self.chunk_windows.append(len(reads))
                        held += 1
                        if len(texts) >= EMBED_BUFFER:
                            matrix.append(self._embed(cache, texts))
                            self.run.progress.advance("embed", held)
                            texts, held = [], 0
                    matrix.append(self._embed(cache, texts))
                    self.run.progress.advance("embed", held)
                self.chunk_rows = matrix.rows
                self.artifact_vectors = self._embed(cache, [a.search_text() for a in self.artifacts])
                self.run.progress.advance("embed", len(self.artifacts))
                self.run.progress.finish("embed")
        finally:
            cache.close()

    def _embed(self, cache: EmbeddingCache, texts: list[str]) -> np.ndarray:
        """`texts`' vectors, in their order, embedded longest first in batches of `EMBED_BATCH`."""
        out = np.zeros((len(texts), self.embedder.dim), dtype=np.float32)
        order = sorted(range(len(texts)), key=lambda row: -len(texts[row]))
        for begin in range(0, len(order), EMBED_BATCH):
            rows = order[begin : begin + EMBED_BATCH]
            vecs, computed = embed_cached(self.embedder, cache, [texts[row] for row in rows])
            out[rows] = vecs
            self.computed += computed
            self.reused += len(rows) - computed
        return out

    def _window_of(self, state: SourceState) -> Window | None:
        """`read_window` for `state`'s chunks, made once per source."""
        if state.path not in self._windows:
            chunking = self.run.manifest.curate.chunks.chunking
            self._windows[state.path] = read_window(chunking, self.run.window(state))
        return self._windows[state.path]

    def index(self) -> None:
        """`tables.sqlite`, the keyword index, the boilerplate scores and the dense indexes."""
        self.run.progress.start("index", 3)
        with self.run.timed("index"):
            source_rows = [source_row(s) for s in sorted(self.states.values(), key=lambda s: s.path)]
            write_tables(
                self.plan.out / "tables.sqlite",
                self.run.manifest,
                source_rows,
                self.chunks(),
                self.artifacts,
                self.artifact_files,
                self.glossary_entries,
                self.typed,
                table_cells.every_cell(self.every_page().items()),
            )
            self.run.progress.advance("index")
            index_dir = self.plan.out / "index"
            index_dir.mkdir(parents=True, exist_ok=True)
            if self.run.manifest.curate.chunks.keyword.enabled:
                keyword.build(
                    index_dir / "keyword",
                    (
                        (
                            c.id,
                            c.source_path,
                            c.page,
                            index_title(self.states[c.source_path]),
                            " > ".join(c.section_path),
                            c.text,
                        )
                        for c in self.chunks()
                    ),
                    ((a.id, a.type, a.kind, a.name, a.body) for a in self.artifacts),
                )
            # Boilerplate is a property of the whole version (a line shared by many documents), so it
            # is scored anew at every compile, over every source's pages.
            boilerplate_file.write(index_dir, boilerplate.chunk_scores(self.chunks(), self.every_page()))
            self._write_titles(index_dir)
            self.run.progress.advance("index")
            if self.artifact_vectors is not None:  # embedded: `chunks.npy` is written
                dense_dir = index_dir / "dense"
                dense.write_ids(dense_dir, "chunks", self.chunk_ids(), self.chunk_rows, self.chunk_windows)
                dense.write(
                    dense_dir,
                    "artifacts",
                    [a.id for a in self.artifacts],
                    self.artifact_vectors,
                    self.embedder.id,
                    self.embedder.dim,
                )
                if self.chunk_rows >= self.run.settings.ann_min_vectors:
                    if ann.available():
                        ann.build_blocks(
                            ann.graph_path(dense_dir, "chunks"),
                            dense.read_blocks(dense.matrix_path(dense_dir, "chunks"), ANN_BLOCK),
                            self.run.settings.embed_threads or 0,
                        )
                    else:
                        self.run.warnings.append(
                            f"{self.chunk_rows:,} chunk vectors: semantic search scans them all; "
                            "install the `ann` extra (pip install 'sleuth[ann]') for an HNSW graph"
                        )
                dense.write_meta(
                    dense_dir,
                    self.embedder.id,
                    self.embedder.dim,
                    {
                        "chunks": self.chunk_count,
                        "chunk_vectors": self.chunk_rows,
                        "artifacts": len(self.artifacts),
                    },
                )
            self.run.progress.advance("index")
        self.run.progress.finish("index")

    def _write_titles(self, index_dir: Path) -> None:
        """Each document's title-zone word index (`format.titles`), its pages put together from
        their chunks as a reader does (`rescore.chunks_by_page`, `rescore.page_words`)."""
        for source in sorted(self.states):
            pages = chunks_by_page(version_files.load_chunks(self.knowledge, source))
            if not pages:
                continue
            words = {key: page_words(chunks, len(pages)) for key, chunks in pages.items()}
            index = TitleIndex.build(list(words), words.__getitem__)
            titles.write(index_dir, source, [page for _source, page in index.pages], index.by_word)

    def finish(self) -> None:
        """The report's counts, `sources.json` and `version.json`."""
        failures = {p: f.model_dump() for p, f in self.ledger.failures.items() if p in self.plan.snapshot}
        self.ledger.failures = {p: f for p, f in self.ledger.failures.items() if p in self.plan.snapshot}
        by_type: dict[str, int] = {}
        for a in self.artifacts:
            by_type[a.type] = by_type.get(a.type, 0) + 1
        counts: dict[str, Any] = {
            "sources": len(self.plan.snapshot),
            "sources_compiled": len(self.states),
            "sources_failed": sum(1 for f in failures.values() if f["status"] == "failed"),
            "sources_skipped": sum(1 for f in failures.values() if f["status"] == "skipped"),
            "sources_skipped_unreadable": sum(
                1 for f in failures.values() if f["reason"] == "unsupported format"
            ),
            "sources_parsed": len(self.parsed),
            "pages": sum(s.pages for s in self.states.values()),
            "images_skipped_no_vision": sum(s.images_skipped for s in self.states.values()),
            "chunks": self.chunk_count,
            "artifacts": len(self.artifacts),
            "artifacts_by_type": by_type,
            "edges": sum(len(a.edges) for a in self.artifacts),
            "glossary_terms": len(self.glossary_entries),
            "rows_by_table": {t.name: len(t.rows) for t in self.typed},
            "rows_screened": sum(t.screened for t in self.typed),
            "rosters": len(self.roster_files),
            # Both in vectors: a chunk has one per embedder window, so chunks are not their unit.
            "embedded": self.computed,
            "embedded_from_cache": self.reused,
        }
        for t in self.typed:
            self.run.warnings.extend(t.warnings)
        self.report.failures = failures
        self.report.counts = counts
        self.report.warnings = self.run.warnings
        self.report.artifacts_skipped_no_model = self.skipped_no_model
        written = self.run.extractor.sample_queries(self.artifacts) if self.run.extractor.available() else []
        pages = self.every_page() if self.arts_config.is_enabled else {}  # as before: none without artifacts
        suggested = written or sample_queries(self.states, pages)
        extraction = self.run.extractor.report()
        groups, pointers = extraction.pop("groups", []), extraction.pop("pointers", {})
        before = {(g.get("type"), g.get("group_key")): g for g in self.ledger.corpus_groups}
        self.ledger.corpus_groups = [
            {
                **g,
                "added_version": before.get((g["type"], g["group_key"]), {}).get(
                    "added_version", self.plan.version
                ),
            }
            for g in groups
        ]
        self.ledger.source_pointers = pointers
        self.ledger.extraction = extraction  # the last run's: empty when it called no model
        if extraction:
            counts["extraction"] = extraction
        write_json_atomic(
            self.knowledge / "sources.json",
            {s.path: asdict(s) for s in sorted(self.states.values(), key=lambda s: s.path)},
        )
        write_json_atomic(
            version_file(self.plan.out),
            {
                "version": self.plan.version,
                "parent": self.plan.parent_dir.name if self.plan.parent_dir else None,
                "created_at": now_iso(),
                "flipped_at": now_iso(),
                "manifest": self.run.manifest.model_dump(mode="json", by_alias=True),
                "manifest_hash": self.run.manifest.curate_hash(),
                "embedder": {
                    "id": self.embedder.id,
                    "dim": self.embedder.dim,
                    "enabled": self.run.manifest.curate.chunks.enabled,
                },
                "keyword": self.run.manifest.curate.chunks.keyword.enabled,
                "counts": counts,
                "timings": dict(self.run.timings),
                "warnings": self.run.warnings,
                "artifacts_skipped_no_model": self.skipped_no_model,
                "sample_queries": suggested,
            },
        )
        self.sample_queries = suggested
        self.ledger.embedding_model = {"id": self.embedder.id, "dim": self.embedder.dim}
