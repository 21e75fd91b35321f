"""One new version, built phase by phase into `versions/vN.building/` (spec/context.md §5.1): parse,
chunk, artifacts, embed, index, then the report and `version.json`. `pipeline.CompileRun` decides
what changed and whether to build at all, and flips `LIVE` once the build is complete."""

from __future__ import annotations

import dataclasses
from contextlib import AbstractContextManager
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from sleuth.compile import artifacts as cards
from sleuth.compile import boilerplate, integrity, typed_tables, version_files
from sleuth.compile import glossary as glossary_builder
from sleuth.compile.artifact_leg import ArtifactLeg
from sleuth.compile.artifacts import Artifact
from sleuth.compile.chunking import Window, chunk_pages
from sleuth.compile.documents import (
    chunk_windows,
    embed_header,
    identified,
    sample_queries,
    source_row,
    window_text,
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
from sleuth.settings import current
from sleuth.store import ann, dense, keyword
from sleuth.store.home import ContextDir, Home, now_iso, write_json_atomic
from sleuth.store.ledger import Failure, Ledger, SourceEntry
from sleuth.store.rescore import PageKey, TitleIndex, chunks_by_page, page_words

EMBED_BATCH = 256


def embedder_window(manifest: Manifest, state: SourceState) -> Window | None:
    """The embedder's window for `state`'s chunks; none when chunks are not embedded, are read by
    their head alone (`vectors: head`), or the embedder reads all of a text."""
    if not manifest.curate.chunks.enabled or manifest.curate.chunks.chunking.vectors == "head":
        return None
    embedder = get_embedder(manifest.curate.chunks.embedding_model)
    if embedder.window is None:
        return None
    return Window(embedder.window, embedder.piece_starts, lambda path: embed_header(state, path))


def chunk_window(chunking: Chunking, window: Window | None) -> Window | None:
    """The window the chunker fits chunks to: one embedder window (`vectors: fit`), or as many as
    `target_size` holds (`windows`: a 512-token chunk is read in two, with no short third one)."""
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
        self.fresh_pages: dict[str, list[Page]] = {}  # the pages parsed in this run
        self.chunks_flat: list[Chunk] = []
        self.arts_config = run.manifest.curate.artifacts
        self.artifacts: list[Artifact] = []
        self.glossary_entries: list[tuple[str, glossary_builder.Entry]] = []
        self.typed: list[typed_tables.TypedTable] = []
        self.pages_by_source: dict[str, list[Page]] = {}
        self.skipped_no_model: dict[str, str] = {}
        self.roster_files: dict[str, str] = {}
        self.artifact_files: dict[str, str] = {}
        self.chunk_vectors: np.ndarray | None = None
        self.chunk_windows: list[int] = []  # vectors per chunk, in `chunks_flat` order
        self._windows: dict[str, Window | None] = {}
        self.artifact_vectors: np.ndarray | None = None
        self.computed = 0
        self.embedder: Embedder = get_embedder(run.manifest.curate.chunks.embedding_model)
        self.sample_queries: list[str] = []

    def run_all(self) -> list[str]:
        self.parse()
        self.chunk()
        self.build_artifacts()
        self.embed()
        self.index()
        self.finish()
        return self.sample_queries

    def every_page(self) -> dict[str, list[Page]]:
        return {
            rel: self.fresh_pages.get(rel) or version_files.load_pages(self.knowledge, rel)
            for rel in sorted(self.states)
        }

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
                    parsed = parse_source(self.run.ctx.sources / rel)
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
                self.fresh_pages[rel] = parsed.pages
                self.run.progress.advance("parse")
        self.run.progress.finish("parse")

    def chunk(self) -> None:
        """Chunk every source whose chunk file is not carried over (new, changed, re-chunked)."""
        chunking = self.run.manifest.curate.chunks.chunking
        all_chunks: dict[str, list[Chunk]] = {}
        with self.run.timed("chunk"):
            for rel in self.states:
                target = self.knowledge / version_files.chunks_rel(rel)
                if target.exists():
                    all_chunks[rel] = [Chunk.from_json(d) for d in version_files.read_jsonl(target)]
                    continue
                pages = self.fresh_pages.get(rel) or version_files.load_pages(self.knowledge, rel)
                chunks = chunk_pages(
                    rel, pages, chunking, chunk_window(chunking, self.run.window(self.states[rel]))
                )
                integrity.check_chunks(chunks, pages)
                version_files.write_jsonl(target, (c.to_json() for c in chunks))
                all_chunks[rel] = chunks
        self.chunks_flat = [c for rel in sorted(all_chunks) for c in all_chunks[rel]]
        for rel, chunks in all_chunks.items():
            self.ledger.chunk_ids[rel] = [c.id for c in chunks]
        for rel in list(self.ledger.chunk_ids):
            if rel not in all_chunks:
                self.ledger.chunk_ids.pop(rel)

    def build_artifacts(self) -> None:
        """The artifacts, edges, typed tables, their files and the rosters."""
        leg = ArtifactLeg(self.run.manifest, self.run.extractor, self.run.warnings)
        with self.run.timed("artifacts"):
            if self.arts_config.is_enabled:
                self.pages_by_source = self.every_page()
                extractor = self.run.extractor
                if extractor.available():
                    extractor.watch(self.run.progress)
                    model_types = [
                        t for t in self.arts_config.artifact_types if t.kind not in DETERMINISTIC_KINDS
                    ]
                    self.run.progress.start("extract", len(model_types) * len(self.pages_by_source))
                self.artifacts, self.glossary_entries, self.typed, self.skipped_no_model = leg.build(
                    self.pages_by_source, self.states
                )
                leg.build_edges(self.artifacts, self.pages_by_source)
                if extractor.available():
                    self.run.progress.finish("extract")
            elif self.arts_config.artifact_types:
                self.run.warnings.append(
                    "artifact types are declared but curate.artifacts.enabled "
                    "is false: no artifacts were built"
                )
            cards.assign_slugs(self.artifacts)
            integrity.check_provenance(self.artifacts, self.typed, self.pages_by_source)
            parent_outline = version_files.read_outline(self.plan.parent_dir)
            self.artifact_files = leg.write_files(
                self.knowledge, self.artifacts, self.plan.version, parent_outline
            )
            self.roster_files = leg.write_rosters(
                self.knowledge, self.states, self.artifacts, self.typed, self.skipped_no_model
            )

    def embed(self) -> None:
        """Vectors for every chunk (one per embedder window, `chunk_windows`) and artifact, from the
        embedding cache where it has them. Texts are embedded longest first across the whole version,
        so that each batch pads little, and each is made only for its batch: the version's text is
        held once, in its chunks."""
        if not self.run.manifest.curate.chunks.enabled:
            return
        cache = EmbeddingCache.for_embedder(self.run.home.embedding_cache_dir, self.embedder)
        try:
            with self.run.timed("embed"):
                owner: list[int] = []  # per window: its chunk (then -1 - artifact) and span
                spans: list[tuple[int, int]] = []
                for i, chunk in enumerate(self.chunks_flat):
                    reads = chunk_windows(chunk, self._window_of(self.states[chunk.source_path]))
                    owner += [i] * len(reads)
                    spans += reads
                    self.chunk_windows.append(len(reads))
                split = len(owner)
                owner += [-1 - j for j in range(len(self.artifacts))]
                spans += [(0, len(a.body) + len(a.name)) for a in self.artifacts]

                def text(row: int) -> str:
                    if owner[row] < 0:
                        return self.artifacts[-1 - owner[row]].search_text()
                    chunk = self.chunks_flat[owner[row]]
                    first = row == 0 or owner[row - 1] != owner[row]
                    return window_text(chunk, self.states[chunk.source_path], spans[row], first)

                self.run.progress.start("embed", len(owner))
                matrix = np.zeros((len(owner), self.embedder.dim), dtype=np.float32)
                order = sorted(range(len(owner)), key=lambda row: spans[row][0] - spans[row][1])
                for begin in range(0, len(order), EMBED_BATCH):
                    rows = order[begin : begin + EMBED_BATCH]
                    vecs, n = embed_cached(self.embedder, cache, [text(row) for row in rows])
                    matrix[rows] = vecs
                    self.computed += n
                    self.run.progress.advance("embed", len(rows))
                self.run.progress.finish("embed")
                self.chunk_vectors, self.artifact_vectors = matrix[:split], matrix[split:]
        finally:
            cache.close()

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
                self.chunks_flat,
                self.artifacts,
                self.artifact_files,
                self.glossary_entries,
                self.typed,
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
                            self.states[c.source_path].title,
                            " > ".join(c.section_path),
                            c.text,
                        )
                        for c in self.chunks_flat
                    ),
                    ((a.id, a.type, a.kind, a.name, a.body) for a in self.artifacts),
                )
            # Boilerplate is a property of the whole version (a line shared by many documents), so it
            # is scored anew at every compile, over every source's pages.
            all_pages = (
                self.pages_by_source if self.arts_config.is_enabled else self.every_page()
            )  # read once
            boilerplate_file.write(index_dir, boilerplate.chunk_scores(self.chunks_flat, all_pages))
            self._write_titles(index_dir)
            self.run.progress.advance("index")
            if self.chunk_vectors is not None and self.artifact_vectors is not None:
                dense_dir = index_dir / "dense"
                dense.write(
                    dense_dir,
                    "chunks",
                    [c.id for c in self.chunks_flat],
                    self.chunk_vectors,
                    self.embedder.id,
                    self.embedder.dim,
                    per_id=self.chunk_windows,
                )
                dense.write(
                    dense_dir,
                    "artifacts",
                    [a.id for a in self.artifacts],
                    self.artifact_vectors,
                    self.embedder.id,
                    self.embedder.dim,
                )
                if len(self.chunk_vectors) >= current().ann_min_vectors:
                    if ann.available():
                        ann.build(
                            ann.graph_path(dense_dir, "chunks"),
                            self.chunk_vectors,
                            current().embed_threads or 0,
                        )
                    else:
                        self.run.warnings.append(
                            f"{len(self.chunk_vectors):,} chunk vectors: semantic search scans them all; "
                            "install the `ann` extra (pip install 'sleuth[ann]') for an HNSW graph"
                        )
                dense.write_meta(
                    dense_dir,
                    self.embedder.id,
                    self.embedder.dim,
                    {
                        "chunks": len(self.chunks_flat),
                        "chunk_vectors": len(self.chunk_vectors),
                        "artifacts": len(self.artifacts),
                    },
                )
            self.run.progress.advance("index")
        self.run.progress.finish("index")

    def _write_titles(self, index_dir: Path) -> None:
        """Each document's title-zone word index (`format.titles`), its pages put together from
        their chunks as a reader does (`rescore.chunks_by_page`, `rescore.page_words`)."""
        by_source: dict[str, dict[PageKey, list[Chunk]]] = {}
        for key, chunks in chunks_by_page(self.chunks_flat).items():
            by_source.setdefault(key[0], {})[key] = chunks
        for source, pages in by_source.items():
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
            "sources_parsed": len(self.fresh_pages),
            "pages": sum(s.pages for s in self.states.values()),
            "images_skipped_no_vision": sum(s.images_skipped for s in self.states.values()),
            "chunks": len(self.chunks_flat),
            "artifacts": len(self.artifacts),
            "artifacts_by_type": by_type,
            "edges": sum(len(a.edges) for a in self.artifacts),
            "glossary_terms": len(self.glossary_entries),
            "rows_by_table": {t.name: len(t.rows) for t in self.typed},
            "rows_screened": sum(t.screened for t in self.typed),
            "rosters": len(self.roster_files),
            "embedded": self.computed,
            "embedded_from_cache": (
                len(self.chunks_flat) + len(self.artifacts) - self.computed
                if self.run.manifest.curate.chunks.enabled
                else 0
            ),
        }
        for t in self.typed:
            self.run.warnings.extend(t.warnings)
        self.report.failures = failures
        self.report.counts = counts
        self.report.warnings = self.run.warnings
        self.report.artifacts_skipped_no_model = self.skipped_no_model
        written = self.run.extractor.sample_queries(self.artifacts) if self.run.extractor.available() else []
        suggested = written or sample_queries(self.states, self.pages_by_source)
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
            self.plan.out / "version.json",
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
