"""The compiler: one generic run of the curation phases over a context (context.md §5.1).

snapshot → delta → cleanup deletes → per-source (parse, pages, chunks) → embeddings →
artifacts, edges, typed tables → finalize (tables, indexes, rosters, outline, integrity) → flip →
collect. Everything is written into `versions/vNNNNNN.building/`; only a run that finishes renames
it and replaces `LIVE`, so a crash at any point leaves the previous version queryable.

Expensive work is per source and incremental: an unchanged source's page and chunk files are
hard-linked from the parent version and its vectors come from the embedding cache. Artifacts,
tables and indexes are rebuilt from the stored pages on every run, which is cheap and keeps
corpus-wide outputs (rosters, glossary, mention edges, merged rows) consistent by construction.
"""

from __future__ import annotations

import itertools
import os
import shutil
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from sleuth.compile import artifacts as cards
from sleuth.compile import boilerplate, integrity, typed_tables, version_files
from sleuth.compile import glossary as glossary_builder
from sleuth.compile.artifact_leg import ArtifactLeg
from sleuth.compile.artifacts import Artifact
from sleuth.compile.chunking import CHUNKER_VERSION, Window, chunk_pages
from sleuth.compile.documents import (
    chunk_embed_text,
    embed_header,
    identified,
    sample_queries,
    source_row,
)
from sleuth.compile.extract import Extractor, NoModelExtractor
from sleuth.compile.identity import IDENTITY_VERSION
from sleuth.compile.manifest import Manifest, parse_manifest, read_manifest_file
from sleuth.compile.pages import TEXT_VERSION, Page, ParseError
from sleuth.compile.parse import parse_source
from sleuth.compile.sources import ImportReport, import_sources, list_source_files
from sleuth.compile.tables_db import write_tables
from sleuth.compile.version_files import SourceState
from sleuth.format import boilerplate as boilerplate_file
from sleuth.format.chunks import Chunk
from sleuth.models.embedder import EmbeddingCache, embed_cached, file_sha256, get_embedder
from sleuth.settings import TURN_CAP_SECONDS  # a version superseded less long ago may still be read
from sleuth.store import dense, keyword
from sleuth.store.home import ContextDir, Home, now_iso, write_json_atomic, write_text_atomic
from sleuth.store.ledger import Failure, Ledger, SourceEntry, Tombstone
from sleuth.store.lock import curate_lock

EMBED_BATCH = 256


class Progress(Protocol):
    """Where a compile reports its phases; the CLI draws a progress bar per phase."""

    def start(self, phase: str, total: int) -> None: ...
    def advance(self, phase: str, amount: int = 1) -> None: ...
    def finish(self, phase: str) -> None: ...


class NullProgress:
    def start(self, phase: str, total: int) -> None:
        pass

    def advance(self, phase: str, amount: int = 1) -> None:
        pass

    def finish(self, phase: str) -> None:
        pass


@dataclass
class CompileReport:
    context: str
    version: str | None
    parent: str | None
    flipped: bool
    delta: str  # "empty" | "changed"
    new: list[str] = field(default_factory=list)
    changed: list[str] = field(default_factory=list)
    deleted: list[str] = field(default_factory=list)
    unchanged: list[str] = field(default_factory=list)
    failures: dict[str, dict[str, str]] = field(default_factory=dict)
    counts: dict[str, Any] = field(default_factory=dict)
    timings: dict[str, float] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)
    artifacts_skipped_no_model: dict[str, str] = field(default_factory=dict)
    imported: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def compile_context(
    slug: str,
    inputs: list[Path] | None = None,
    manifest_file: Path | None = None,
    force: bool = False,
    home: Home | None = None,
    progress: Progress | None = None,
    extractor: Extractor | None = None,
) -> CompileReport:
    """Create the context if needed, import `inputs`, and curate it (the `sleuth compile` verb)."""
    home = home or Home()
    # Validate before touching anything: a bad manifest must leave no trace.
    manifest_data = read_manifest_file(manifest_file) if manifest_file is not None else None
    for given in inputs or []:
        if not given.exists():
            raise FileNotFoundError(f"no such file or directory: {given}")
    ctx, _created = home.find_or_create(slug)
    with curate_lock(ctx.lock_file):
        if manifest_data is not None:
            write_json_atomic(ctx.manifest_file, manifest_data)
        imported = import_sources(ctx.sources, list(inputs)) if inputs else ImportReport()
        manifest = parse_manifest(ctx.manifest_data())
        run = CompileRun(
            ctx, home, manifest, force, progress or NullProgress(), extractor or NoModelExtractor()
        )
        report = run.execute()
        report.imported = {
            "copied": len(imported.copied),
            "unchanged": len(imported.unchanged),
            "deleted": len(imported.deleted),
            "skipped": [{"path": p, "reason": r} for p, r in imported.skipped],
        }
        return report


class CompileRun:
    def __init__(
        self,
        ctx: ContextDir,
        home: Home,
        manifest: Manifest,
        force: bool,
        progress: Progress,
        extractor: Extractor,
    ) -> None:
        self.ctx = ctx
        self.home = home
        self.manifest = manifest
        self.force = force
        self.progress = progress
        self.extractor = extractor
        self.timings: dict[str, float] = {}
        self.warnings: list[str] = []
        self.sample_queries: list[str] = []

    def _window(self, state: SourceState) -> Window | None:
        """The embedder's window for `state`'s chunks; none when chunks are not embedded or the
        embedder reads all of a text (then only `target_size` bounds a chunk)."""
        if not self.manifest.curate.chunks.enabled or not self.manifest.curate.chunks.chunking.fit_embedder:
            return None
        embedder = get_embedder(self.manifest.curate.chunks.embedding_model)
        if embedder.window is None:
            return None
        return Window(embedder.window, embedder.piece_starts, lambda path: embed_header(state, path))

    @contextmanager
    def _timed(self, phase: str) -> Iterator[None]:
        began = time.perf_counter()
        try:
            yield
        finally:
            self.timings[phase] = round(self.timings.get(phase, 0.0) + time.perf_counter() - began, 4)

    # ---------------------------------------------------------------- phases 0-1: snapshot, delta
    def execute(self) -> CompileReport:
        started = time.perf_counter()
        self._remove_stale_builds()
        previous_ledger = Ledger.load(self.ctx.ledger_file)
        ledger = Ledger() if self.force else previous_ledger.model_copy(deep=True)
        parent = self.ctx.live_version()
        parent_dir = self.ctx.version_dir(parent) if parent else None
        if parent_dir is not None and not parent_dir.is_dir():
            parent_dir = None
        parent_sources = version_files.read_sources(parent_dir) if parent_dir and not self.force else {}

        with self._timed("snapshot"):
            snapshot = self._snapshot(ledger)
        new = [p for p in snapshot if p not in ledger.manifest]
        changed = [
            p for p in snapshot if p in ledger.manifest and snapshot[p].hash != ledger.manifest[p].hash
        ]
        deleted = sorted(p for p in ledger.manifest if p not in snapshot)
        if previous_ledger.manifest and ledger.leg_hashes.get("text", 1) != TEXT_VERSION:
            changed += [p for p in snapshot if p in ledger.manifest and p not in changed]  # re-parse all
        unchanged = [p for p in snapshot if p not in new and p not in changed]
        curate_hash = self.manifest.curate_hash()
        chunk_hash = f"{self.manifest.chunk_leg_hash()}:{CHUNKER_VERSION}"  # a new chunker re-chunks
        chunk_leg_changed = ledger.leg_hashes.get("chunks") != chunk_hash
        identity_changed = bool(previous_ledger.manifest) and (
            ledger.leg_hashes.get("identity", 1) != IDENTITY_VERSION
        )

        report = CompileReport(
            self.ctx.info().slug,
            None,
            parent,
            False,
            "changed",
            new=new,
            changed=changed,
            deleted=deleted,
            unchanged=unchanged,
        )
        legs_changed = ledger.leg_hashes.get("curate") != curate_hash or chunk_leg_changed or identity_changed
        if parent_dir is not None and not (new or changed or deleted or legs_changed):
            report.delta = "empty"
            report.failures = {p: f.model_dump() for p, f in previous_ledger.failures.items()}
            report.timings = {**self.timings, "total": round(time.perf_counter() - started, 4)}
            return report

        version = self._next_version_name(previous_ledger)
        building = self.ctx.versions / f"{version}.building"
        building.mkdir(parents=True)
        report.version = version
        # On any error the half-built directory stays for inspection; the next run removes it.
        self._build(
            building,
            version,
            parent_dir,
            parent_sources,
            snapshot,
            ledger,
            unchanged,
            chunk_leg_changed,
            identity_changed,
            report,
        )
        final = self.ctx.versions / version
        os.rename(building, final)

        # ------------------------------------------------------------------ flip, then the ledger
        write_text_atomic(self.ctx.live_file, version + "\n")
        report.flipped = True
        now = now_iso()
        ledger.live_version = version
        ledger.versions_stamped = [*previous_ledger.versions_stamped, version]
        ledger.leg_hashes = {
            "curate": curate_hash,
            "chunks": chunk_hash,
            "text": TEXT_VERSION,
            "identity": IDENTITY_VERSION,
        }
        for path in deleted:
            ledger.source_removed[path] = Tombstone(removed_version=version, removed_at=now)
            ledger.manifest.pop(path, None)
            ledger.chunk_ids.pop(path, None)
            ledger.failures.pop(path, None)
        ledger.save(self.ctx.ledger_file)
        info = self.ctx.info()
        info.last_curated_at = now
        info.updated_at = now
        info.sample_queries = self.sample_queries
        self.ctx.save_info(info)
        with self._timed("collect"):
            self._collect(version, parent)
        report.timings = {**self.timings, "total": round(time.perf_counter() - started, 4)}
        return report

    def _remove_stale_builds(self) -> None:
        if self.ctx.versions.is_dir():
            for entry in self.ctx.versions.iterdir():
                if entry.name.endswith(".building"):
                    shutil.rmtree(entry, ignore_errors=True)

    def _snapshot(self, ledger: Ledger) -> dict[str, SourceEntry]:
        files = list_source_files(self.ctx.sources)
        self.progress.start("snapshot", len(files))
        snapshot: dict[str, SourceEntry] = {}
        for rel in files:
            full = self.ctx.sources / rel
            st = full.stat()
            known = ledger.manifest.get(rel)
            if known and not self.force and known.size == st.st_size and known.mtime == st.st_mtime:
                digest = known.hash
                curated_at = known.curated_at
            else:
                digest = file_sha256(full)
                curated_at = now_iso()
            snapshot[rel] = SourceEntry(
                hash=digest, curated_at=curated_at, size=st.st_size, mtime=st.st_mtime
            )
            self.progress.advance("snapshot")
        self.progress.finish("snapshot")
        return snapshot

    def _next_version_name(self, ledger: Ledger) -> str:
        numbers = [int(v[1:]) for v in ledger.versions_stamped if v[1:].isdigit()]
        if self.ctx.versions.is_dir():
            for entry in self.ctx.versions.iterdir():
                stem = entry.name.split(".")[0]
                if stem.startswith("v") and stem[1:].isdigit():
                    numbers.append(int(stem[1:]))
        return f"v{max(numbers, default=0) + 1:06d}"

    # ------------------------------------------------------------------- phases 3-6: the build
    def _build(
        self,
        out: Path,
        version: str,
        parent_dir: Path | None,
        parent_sources: dict[str, dict[str, Any]],
        snapshot: dict[str, SourceEntry],
        ledger: Ledger,
        unchanged: list[str],
        chunk_leg_changed: bool,
        identity_changed: bool,
        report: CompileReport,
    ) -> None:
        knowledge = out / "knowledge"
        chunking = self.manifest.curate.chunks.chunking
        states: dict[str, SourceState] = {}
        fresh_pages: dict[str, list[Page]] = {}
        carried = set(unchanged) & set(parent_sources) if parent_dir else set()

        self.progress.start("parse", len(snapshot))
        with self._timed("parse"):
            for rel in snapshot:
                entry = snapshot[rel]
                if rel in carried and parent_dir is not None:
                    states[rel] = SourceState(**parent_sources[rel])
                    version_files.carry(parent_dir, out, rel, with_chunks=not chunk_leg_changed)
                    if identity_changed:  # a newer `identify` reads the same pages again
                        states[rel] = identified(states[rel], version_files.load_pages(knowledge, rel))
                    ledger.manifest[rel] = entry
                    self.progress.advance("parse")
                    continue
                previously_failed = ledger.failures.get(rel)
                if (
                    previously_failed
                    and rel in ledger.manifest
                    and ledger.manifest[rel].hash == entry.hash
                    and not self.force
                ):
                    self.progress.advance("parse")
                    continue  # unchanged and still unreadable: nothing new to learn
                try:
                    parsed = parse_source(self.ctx.sources / rel)
                except ParseError as exc:
                    ledger.failures[rel] = Failure(version=version, status=exc.status, reason=exc.reason)
                    ledger.manifest[rel] = entry
                    if rel in parent_sources and parent_dir is not None:
                        # A source that fails keeps its outputs from the previous version.
                        states[rel] = SourceState(**parent_sources[rel])
                        version_files.carry(parent_dir, out, rel, with_chunks=not chunk_leg_changed)
                    self.progress.advance("parse")
                    continue
                ledger.failures.pop(rel, None)
                ledger.manifest[rel] = entry
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
                states[rel] = identified(parsed_state, parsed.pages)
                version_files.write_jsonl(
                    knowledge / version_files.pages_rel(rel), (p.to_json() for p in parsed.pages)
                )
                fresh_pages[rel] = parsed.pages
                self.progress.advance("parse")
        self.progress.finish("parse")

        # Chunk every source whose chunk file is not carried over (new, changed, re-chunked).
        all_chunks: dict[str, list[Chunk]] = {}
        with self._timed("chunk"):
            for rel in states:
                target = knowledge / version_files.chunks_rel(rel)
                if target.exists():
                    all_chunks[rel] = [Chunk.from_json(d) for d in version_files.read_jsonl(target)]
                    continue
                pages = fresh_pages.get(rel) or version_files.load_pages(knowledge, rel)
                chunks = chunk_pages(rel, pages, chunking, self._window(states[rel]))
                integrity.check_chunks(chunks, pages)
                version_files.write_jsonl(target, (c.to_json() for c in chunks))
                all_chunks[rel] = chunks
        chunks_flat = [c for rel in sorted(all_chunks) for c in all_chunks[rel]]
        for rel, chunks in all_chunks.items():
            ledger.chunk_ids[rel] = [c.id for c in chunks]
        for rel in list(ledger.chunk_ids):
            if rel not in all_chunks:
                ledger.chunk_ids.pop(rel)

        # ----------------------------------------------------------------------- artifacts
        arts_config = self.manifest.curate.artifacts
        artifacts: list[Artifact] = []
        glossary_entries: list[tuple[str, glossary_builder.Entry]] = []
        typed: list[typed_tables.TypedTable] = []
        pages_by_source: dict[str, list[Page]] = {}
        skipped_no_model: dict[str, str] = {}
        roster_files: dict[str, str] = {}
        leg = ArtifactLeg(self.manifest, self.extractor, self.warnings)

        def every_page() -> dict[str, list[Page]]:
            return {
                rel: fresh_pages.get(rel) or version_files.load_pages(knowledge, rel)
                for rel in sorted(states)
            }

        with self._timed("artifacts"):
            if arts_config.is_enabled:
                pages_by_source = every_page()
                artifacts, glossary_entries, typed, skipped_no_model = leg.build(pages_by_source, states)
                leg.build_edges(artifacts, pages_by_source)
            elif arts_config.artifact_types:
                self.warnings.append(
                    "artifact types are declared but curate.artifacts.enabled "
                    "is false: no artifacts were built"
                )
            cards.assign_slugs(artifacts)
            integrity.check_provenance(artifacts, typed, pages_by_source)
            parent_outline = version_files.read_outline(parent_dir)
            artifact_files = leg.write_files(knowledge, artifacts, version, parent_outline)
            roster_files = leg.write_rosters(knowledge, states, artifacts, typed, skipped_no_model)

        # ----------------------------------------------------------------------- embeddings
        chunk_vectors: np.ndarray | None = None
        artifact_vectors: np.ndarray | None = None
        computed = 0
        embedder = get_embedder(self.manifest.curate.chunks.embedding_model)
        if self.manifest.curate.chunks.enabled:
            cache = EmbeddingCache.for_embedder(self.home.embedding_cache_dir, embedder)
            try:
                with self._timed("embed"):
                    texts = [chunk_embed_text(c, states) for c in chunks_flat]
                    art_texts = [a.search_text() for a in artifacts]
                    self.progress.start("embed", len(texts) + len(art_texts))
                    vectors: list[np.ndarray] = []
                    for begin in range(0, len(texts) + len(art_texts), EMBED_BATCH):
                        batch = (texts + art_texts)[begin : begin + EMBED_BATCH]
                        vecs, n = embed_cached(embedder, cache, batch)
                        vectors.append(vecs)
                        computed += n
                        self.progress.advance("embed", len(batch))
                    self.progress.finish("embed")
                    matrix = (
                        np.concatenate(vectors) if vectors else np.zeros((0, embedder.dim), dtype=np.float32)
                    )
                    chunk_vectors, artifact_vectors = matrix[: len(texts)], matrix[len(texts) :]
            finally:
                cache.close()

        # ----------------------------------------------------------------------- finalize
        self.progress.start("index", 3)
        with self._timed("index"):
            source_rows = [source_row(s) for s in sorted(states.values(), key=lambda s: s.path)]
            write_tables(
                out / "tables.sqlite",
                self.manifest,
                source_rows,
                chunks_flat,
                artifacts,
                artifact_files,
                glossary_entries,
                typed,
            )
            self.progress.advance("index")
            index_dir = out / "index"
            index_dir.mkdir(parents=True, exist_ok=True)
            if self.manifest.curate.chunks.keyword.enabled:
                keyword.build(
                    index_dir / "keyword.sqlite",
                    (
                        (
                            c.id,
                            c.source_path,
                            c.page,
                            states[c.source_path].title,
                            " > ".join(c.section_path),
                            c.text,
                        )
                        for c in chunks_flat
                    ),
                    ((a.id, a.type, a.kind, a.name, a.body) for a in artifacts),
                )
            # Boilerplate is a property of the whole version (a line shared by many documents), so it
            # is scored anew at every compile, over every source's pages.
            all_pages = pages_by_source if arts_config.is_enabled else every_page()  # read once
            boilerplate_file.write(index_dir, boilerplate.chunk_scores(chunks_flat, all_pages))
            self.progress.advance("index")
            if chunk_vectors is not None and artifact_vectors is not None:
                dense_dir = index_dir / "dense"
                dense.write(
                    dense_dir, "chunks", [c.id for c in chunks_flat], chunk_vectors, embedder.id, embedder.dim
                )
                dense.write(
                    dense_dir,
                    "artifacts",
                    [a.id for a in artifacts],
                    artifact_vectors,
                    embedder.id,
                    embedder.dim,
                )
                dense.write_meta(
                    dense_dir,
                    embedder.id,
                    embedder.dim,
                    {"chunks": len(chunks_flat), "artifacts": len(artifacts)},
                )
            self.progress.advance("index")
        self.progress.finish("index")

        # ----------------------------------------------------------------------- report
        failures = {p: f.model_dump() for p, f in ledger.failures.items() if p in snapshot}
        ledger.failures = {p: f for p, f in ledger.failures.items() if p in snapshot}
        by_type: dict[str, int] = {}
        for a in artifacts:
            by_type[a.type] = by_type.get(a.type, 0) + 1
        counts: dict[str, Any] = {
            "sources": len(snapshot),
            "sources_compiled": len(states),
            "sources_failed": sum(1 for f in failures.values() if f["status"] == "failed"),
            "sources_skipped": sum(1 for f in failures.values() if f["status"] == "skipped"),
            "sources_skipped_unreadable": sum(
                1 for f in failures.values() if f["reason"] == "unsupported format"
            ),
            "sources_parsed": len(fresh_pages),
            "pages": sum(s.pages for s in states.values()),
            "images_skipped_no_vision": sum(s.images_skipped for s in states.values()),
            "chunks": len(chunks_flat),
            "artifacts": len(artifacts),
            "artifacts_by_type": by_type,
            "edges": sum(len(a.edges) for a in artifacts),
            "glossary_terms": len(glossary_entries),
            "rows_by_table": {t.name: len(t.rows) for t in typed},
            "rows_screened": sum(t.screened for t in typed),
            "rosters": len(roster_files),
            "embedded": computed,
            "embedded_from_cache": (
                len(chunks_flat) + len(artifacts) - computed if self.manifest.curate.chunks.enabled else 0
            ),
        }
        for t in typed:
            self.warnings.extend(t.warnings)
        report.failures = failures
        report.counts = counts
        report.warnings = self.warnings
        report.artifacts_skipped_no_model = skipped_no_model
        suggested = sample_queries(states, pages_by_source)
        write_json_atomic(
            knowledge / "sources.json",
            {s.path: asdict(s) for s in sorted(states.values(), key=lambda s: s.path)},
        )
        write_json_atomic(
            out / "version.json",
            {
                "version": version,
                "parent": parent_dir.name if parent_dir else None,
                "created_at": now_iso(),
                "flipped_at": now_iso(),
                "manifest": self.manifest.model_dump(mode="json", by_alias=True),
                "manifest_hash": self.manifest.curate_hash(),
                "embedder": {
                    "id": embedder.id,
                    "dim": embedder.dim,
                    "enabled": self.manifest.curate.chunks.enabled,
                },
                "keyword": self.manifest.curate.chunks.keyword.enabled,
                "counts": counts,
                "timings": dict(self.timings),
                "warnings": self.warnings,
                "artifacts_skipped_no_model": skipped_no_model,
                "sample_queries": suggested,
            },
        )
        self.sample_queries = suggested
        ledger.embedding_model = {"id": embedder.id, "dim": embedder.dim}

    # ----------------------------------------------------------------------- phase 7: collect
    def _collect(self, live: str, parent: str | None) -> None:
        """Drop versions other than the live one and its predecessor, unless a turn may still
        read them: one that stopped being live less than the turn cap ago is kept."""
        names = sorted(
            e.name for e in self.ctx.versions.iterdir() if e.is_dir() and not e.name.endswith(".building")
        )
        now = time.time()
        for older, newer in itertools.pairwise(names):
            if older in (live, parent):
                continue
            flipped_at = version_files.flipped_epoch(self.ctx.versions / newer)
            if flipped_at is not None and now - flipped_at > TURN_CAP_SECONDS:
                shutil.rmtree(self.ctx.versions / older, ignore_errors=True)
