"""The compiler: one generic run of the curation phases over a context (spec/context.md §5.1).

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
import json
import os
import shutil
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path

from sleuth.compile import version_files
from sleuth.compile.archives import SourceLimits
from sleuth.compile.build import BuildPlan, VersionBuild, embedder_window
from sleuth.compile.chunking import CHUNKER_VERSION, Window
from sleuth.compile.errors import NothingToCompile, SourceClash
from sleuth.compile.extract import Extractor, NoModelExtractor
from sleuth.compile.extraction.cache import ExtractionCache
from sleuth.compile.extraction.choose import choose_extractor, curation_model, needs_model
from sleuth.compile.identity import IDENTITY_VERSION
from sleuth.compile.manifest import Manifest, parse_manifest, read_manifest_file
from sleuth.compile.pages import TEXT_VERSION
from sleuth.compile.sources import ImportReport, holds_files, import_sources, list_source_files, upload_dir
from sleuth.compile.version_files import SourceState
from sleuth.models.catalog import Catalog
from sleuth.models.embedder import file_sha256
from sleuth.settings import TURN_CAP_SECONDS, Settings  # a version superseded less long ago may still be read
from sleuth.store.contexts.home import ContextDir, ContextNotFound, Home, now_iso
from sleuth.store.contexts.ledger import Ledger, SourceEntry, Tombstone
from sleuth.store.contexts.lock import curate_lock, lock_database
from sleuth.store.contexts.replica import open_home
from sleuth.store.files import write_json_atomic, write_text_atomic

__all__ = ["CompileReport", "CompileRun", "NullProgress", "Progress", "compile_context", "curate"]
from sleuth.compile.report import CompileReport, NullProgress, Progress


def compile_context(
    slug: str,
    inputs: list[Path] | None = None,
    manifest_file: Path | None = None,
    force: bool = False,
    home: Home | None = None,
    progress: Progress | None = None,
    extractor: Extractor | None = None,
    *,
    settings: Settings,
    model: str | None = None,
    token_budget: int | None = None,
    catalog: Catalog | None = None,
    replace: bool = False,
) -> CompileReport:
    """Create the context if needed, import `inputs`, and curate it (the `sleuth compile` verb), under
    the `settings` its caller read at its start (`home` by default: the one they open).
    `replace`: a folder may replace the sources another folder of its name put in the context.

    The extractor is `extractor` when given, else the one `choose_extractor` picks for `model`, the
    manifest and the catalog (by default the home's `config.toml`)."""
    home = home or open_home(None, settings)
    # Validate before touching anything: a bad manifest must leave no trace.
    manifest_data = read_manifest_file(manifest_file) if manifest_file is not None else None
    for given in inputs or []:
        if not given.exists():
            raise FileNotFoundError(f"no such file or directory: {given}")
    if inputs and not any(holds_files(given) for given in inputs) and _absent(home, slug):
        names = ", ".join(str(given) for given in inputs)
        raise NothingToCompile(f"nothing to compile: {names} holds no files, so no context was made")
    if model is not None and extractor is None:  # a model that does not resolve leaves no trace either
        catalog = catalog or Catalog.load(home.root)
        curation_model(parse_manifest({}), catalog, model)
    ctx, _created = home.find_or_create(slug)
    with curate_lock(ctx.lock_file, ctx.info().id, lock_database(settings.database_url)):
        origins = _origins(ctx, list(inputs or []), replace)
        if manifest_data is not None:
            write_json_atomic(ctx.manifest_file, manifest_data)
        limits = SourceLimits.of_settings(settings)
        imported = import_sources(ctx.sources, list(inputs), limits) if inputs else ImportReport()
        write_json_atomic(ctx.root / ORIGINS_FILE, origins)
        manifest = parse_manifest(ctx.manifest_data())
        report = curate(
            ctx,
            home,
            manifest,
            progress or NullProgress(),
            settings=settings,
            force=force,
            extractor=extractor,
            catalog=catalog,
            model=model,
            token_budget=token_budget,
        )
        report.imported = {
            "copied": len(imported.copied),
            "unchanged": len(imported.unchanged),
            "deleted": len(imported.deleted),
            "skipped": [{"path": p, "reason": r} for p, r in imported.skipped],
        }
        _count_import_skips(report, imported)
        return report


def curate(
    ctx: ContextDir,
    home: Home,
    manifest: Manifest,
    progress: Progress,
    *,
    settings: Settings,
    force: bool = False,
    extractor: Extractor | None = None,
    catalog: Catalog | None = None,
    model: str | None = None,
    token_budget: int | None = None,
    env: Mapping[str, str] | None = None,
) -> CompileReport:
    """One curate of `ctx` as it is now, under the lock its caller holds: `sleuth compile`, the `curate`
    task and a restore all run this. The extractor is `extractor` when given, else the one
    `choose_extractor` picks for `model`, the manifest and the catalog (read only when the manifest needs
    a model: by default the home's `config.toml`)."""
    note = None
    if extractor is None and not needs_model(manifest):
        extractor = NoModelExtractor()  # nothing to call a model for: the catalog is not even read
        if model is not None:
            note = f"{model!r} is not called: nothing in the manifest needs a model"
    elif extractor is None:
        choice = choose_extractor(
            ctx,
            manifest,
            catalog or Catalog.load(home.root),
            settings=settings,
            model=model,
            token_budget=token_budget,
            env=env,
        )
        extractor, note = choice.extractor, choice.note
    run = CompileRun(ctx, home, manifest, force, progress, extractor, settings=settings)
    if note:
        run.warnings.append(f"no model for curation: {note}")
    return run.execute()


#: Which folder or archive each `uploads/<name>` was mirrored from (absolute paths), per context.
ORIGINS_FILE = "origins.json"


def _absent(home: Home, slug: str) -> bool:
    try:
        home.find(slug)
    except (ContextNotFound, ValueError):
        return True
    return False


def _origins(ctx: ContextDir, inputs: list[Path], replace: bool) -> dict[str, str]:
    """The origins after importing `inputs`; a folder or archive whose `uploads/<name>` already holds
    another folder's sources raises `SourceClash` (`replace`: it replaces them, as asked)."""
    try:
        known: dict[str, str] = json.loads((ctx.root / ORIGINS_FILE).read_text("utf-8"))
    except (OSError, ValueError):
        known = {}
    for given in inputs:
        path = given.resolve()
        name = upload_dir(path)
        if name is None:
            continue
        before = known.get(name)
        if before is not None and before != str(path) and (ctx.sources / name).exists() and not replace:
            raise SourceClash(
                f"{name}/ holds the sources compiled from {before}; compiling {path} there would delete "
                "them. Rename the folder, or pass --replace to replace them"
            )
        known[name] = str(path)
    return known


def _count_import_skips(report: CompileReport, imported: ImportReport) -> None:
    """A file left out at import (over `max_file_bytes`, an unsafe name, a link) is a skipped source
    like one the parser skips: listed in `failures` with its reason and counted in `sources_skipped`,
    so a report never hides what it did not compile."""
    version = report.version or report.parent or ""
    for path, reason in imported.skipped:
        report.failures.setdefault(path, {"version": version, "status": "skipped", "reason": reason})
    report.counts["sources_skipped"] = sum(1 for f in report.failures.values() if f["status"] == "skipped")


class CompileRun:
    """One curate of `ctx`, under the `settings` of the process that runs it (read once, at its start:
    a server's `Server.settings`, a CLI command's own)."""

    def __init__(
        self,
        ctx: ContextDir,
        home: Home,
        manifest: Manifest,
        force: bool,
        progress: Progress,
        extractor: Extractor,
        *,
        settings: Settings,
    ) -> None:
        self.ctx = ctx
        self.home = home
        self.manifest = manifest
        self.settings = settings
        self.force = force
        self.progress = progress
        self.extractor = extractor
        self.timings: dict[str, float] = {}
        self.warnings: list[str] = []
        self.sample_queries: list[str] = []

    def window(self, state: SourceState) -> Window | None:
        return embedder_window(self.manifest, state, embed_threads=self.settings.embed_threads)

    @contextmanager
    def timed(self, phase: str) -> Iterator[None]:
        began = time.perf_counter()
        try:
            yield
        finally:
            self.timings[phase] = round(self.timings.get(phase, 0.0) + time.perf_counter() - began, 4)

    # ---------------------------------------------------------------- phases 0-1: snapshot, delta
    def execute(self) -> CompileReport:
        """The curate; a context many machines share is brought up to date first, and what it wrote
        (the version, the ledger, the live pointer) is published to them after."""
        with self.ctx.editing():
            return self._execute()

    def _execute(self) -> CompileReport:
        started = time.perf_counter()
        self._remove_stale_builds()
        if self.force:
            ExtractionCache.of(self.ctx).clear()  # a forced curate re-extracts (§5.2)
        previous_ledger = Ledger.load(self.ctx.ledger_file)
        ledger = Ledger() if self.force else previous_ledger.model_copy(deep=True)
        parent = self.ctx.live_version()
        parent_dir = self.ctx.version_dir(parent) if parent else None
        if parent_dir is not None and not parent_dir.is_dir():
            parent_dir = None
        parent_sources = version_files.read_sources(parent_dir) if parent_dir and not self.force else {}

        with self.timed("snapshot"):
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
        extractor_changed = ledger.leg_hashes.get("extractor", "none") != self.extractor.fingerprint
        legs_changed = (
            ledger.leg_hashes.get("curate") != curate_hash
            or chunk_leg_changed
            or identity_changed
            or extractor_changed
        )
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
        plan = BuildPlan(
            building,
            version,
            parent_dir,
            parent_sources,
            snapshot,
            unchanged,
            chunk_leg_changed,
            identity_changed,
        )
        self.sample_queries = VersionBuild(self, plan, ledger, report).run_all()
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
            # An incomplete extraction (budget spent, provider errors) is redone by the next run; the
            # cache makes the finished part free.
            "extractor": self.extractor.fingerprint
            if self.extractor.complete
            else f"{self.extractor.fingerprint}+incomplete",
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
        with self.timed("collect"):
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
        # With shared storage a version may have been published by a curate that died before its flip:
        # its name is never used again.
        stamped = [*ledger.versions_stamped, *self.ctx.published_versions()]
        numbers = [int(v[1:]) for v in stamped if v[1:].isdigit()]
        if self.ctx.versions.is_dir():
            for entry in self.ctx.versions.iterdir():
                stem = entry.name.split(".")[0]
                if stem.startswith("v") and stem[1:].isdigit():
                    numbers.append(int(stem[1:]))
        return f"v{max(numbers, default=0) + 1:06d}"

    # ------------------------------------------------------------------- phases 3-6: the build
    # ----------------------------------------------------------------------- phase 7: collect
    def _collect(self, live: str, parent: str | None) -> None:
        """Drop versions other than the live one and its predecessor, unless a turn may still
        read them: one that stopped being live less than the turn cap ago is kept."""
        names = sorted(
            e.name
            for e in self.ctx.versions.iterdir()
            if e.is_dir() and not e.name.endswith(".building") and not e.name.startswith(".")
        )
        now = time.time()
        for older, newer in itertools.pairwise(names):
            if older in (live, parent):
                continue
            flipped_at = version_files.flipped_epoch(self.ctx.versions / newer)
            if flipped_at is not None and now - flipped_at > TURN_CAP_SECONDS:
                shutil.rmtree(self.ctx.versions / older, ignore_errors=True)
