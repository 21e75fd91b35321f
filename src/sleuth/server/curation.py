"""Curate as a job (spec/api.md §6.3): a compile of a context under its `curate.lock`, run by the task
service here or by a worker (`curate_job` rebuilds it from the task row's JSON arguments), and, on a
shared curate, the parts other workers take (`curate_part`): each warms one source and hands its
vectors over through the shared storage. The routes that start and show it are `api/curation.py`."""

from __future__ import annotations

import hashlib
import json
import sqlite3
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

from sleuth.compile.manifest import Manifest, parse_manifest
from sleuth.compile.pipeline import CompileReport, curate
from sleuth.compile.sources import list_source_files
from sleuth.compile.warm import pack_vectors, take_vectors, warm_source
from sleuth.server.state import Server
from sleuth.server.task_handle import Job, TaskHandle
from sleuth.server.task_service import TaskService
from sleuth.store.contexts.home import ContextDir
from sleuth.store.contexts.lock import CurateInFlight, curate_lock
from sleuth.store.contexts.replica import shared_storage
from sleuth.store.files import write_json_atomic
from sleuth.store.records.rows import TaskRow
from sleuth.store.storage import Storage

CURATE_PHASES = ("snapshot", "parse", "embed", "index")  # `extract` joins when a model is used
FAN_OUT = 16  # the most other workers one curate asks for help


def _ids(vdir: Path | None, table: str) -> set[str]:
    if vdir is None or not (vdir / "tables.sqlite").is_file():
        return set()
    db = sqlite3.connect(f"file:{vdir / 'tables.sqlite'}?mode=ro&immutable=1", uri=True)
    try:
        return {row[0] for row in db.execute(f'SELECT id FROM "{table}"')}
    except sqlite3.Error:
        return set()
    finally:
        db.close()


def curate_output(ctx: ContextDir, report: CompileReport, force: bool) -> dict[str, Any]:
    """The contract's `CurateRunOutput` (spec/api.md §6.3) from the compiler's report, plus [ext] fields.
    Usage counts the extraction model's tokens (none without a model) and the embeddings."""
    mode = "full" if force else "incremental"
    if report.delta == "empty":
        return {
            "status": "completed",
            "flipped": False,
            "versioned": False,
            "mode": mode,
            "delta": "empty",
            "live_version": report.parent,
            "warnings": report.warnings,
        }
    live = report.version
    vdir = ctx.version_dir(live) if live else None
    pdir = ctx.version_dir(report.parent) if report.parent else None
    new_chunks, old_chunks = _ids(vdir, "_chunks"), _ids(pdir, "_chunks")
    new_arts, old_arts = _ids(vdir, "_artifacts"), _ids(pdir, "_artifacts")
    counts = report.counts
    embedder = "unknown"
    if vdir is not None and (vdir / "version.json").is_file():
        embedder = json.loads((vdir / "version.json").read_text("utf-8"))["embedder"]["id"]
    failed = sorted(p for p, f in report.failures.items() if f.get("status") == "failed")
    extraction: dict[str, Any] = counts.get("extraction") or {}
    types: dict[str, dict[str, Any]] = extraction.get("types", {})
    prompt_tokens, completion_tokens = extraction.get("input_tokens", 0), extraction.get("output_tokens", 0)
    by_model = (
        {extraction["model"]: {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens}}
        if extraction.get("calls")
        else {}
    )
    scopes = extraction.get("scopes", {})

    def screened(scope: str) -> int:
        return sum(types.get(name, {}).get("screened", 0) for name, s in scopes.items() if s == scope)

    return {
        "status": "completed",
        "flipped": report.flipped,
        "versioned": report.version is not None,
        "mode": mode,
        "scope": "all",
        "images_skipped_no_vision": counts.get("images_skipped_no_vision", 0),
        "sources_skipped_unreadable": counts.get("sources_skipped_unreadable", 0),
        "usage": {
            "prompt_tokens": prompt_tokens,
            "completion_tokens": completion_tokens,
            "total_tokens": prompt_tokens + completion_tokens,
            "by_model": by_model,
            "embed_by_model": {embedder: counts.get("embedded", 0)},
        },
        "extraction": extraction or None,
        "sample_queries": ctx.info().sample_queries,
        "delta": {
            "new": len(report.new),
            "changed": len(report.changed),
            "deleted": len(report.deleted),
            "processed": counts.get("sources_parsed", 0),
            "failed": len(failed),
            "failed_sources": failed,
            "corpus_artifacts": counts.get("artifacts", 0),
            "corpus_edges": counts.get("edges", 0),
            "corpus_artifacts_screened": screened("corpus"),
            "screened": screened("corpus") + screened("document") + screened("sqlite"),
            "chunks_created": len(new_chunks - old_chunks),
            "chunks_updated": 0,
            "artifacts_created": len(new_arts - old_arts),
            "artifacts_updated": len(new_arts & old_arts),
            "chunks_screened": 0,
            "artifacts_screened": screened("document"),
            "artifacts_errored": sum(t.get("errored", 0) for t in types.values()),
            "sources_content_truncated": len(extraction.get("sources_truncated", [])),
        },
        "live_version": live if report.flipped else report.parent,
        "artifacts_skipped_no_model": report.artifacts_skipped_no_model,
        "warnings": report.warnings,
        "failures": report.failures,
        "counts": counts,
    }


def _curate_job(
    state: Server,
    ctx: ContextDir,
    force: bool,
    chunks_only: bool,
    model: str | None = None,
    token_budget: int | None = None,
) -> Job:
    """A compile of the context as it is now, under its `curate.lock`. The handle is the compiler's
    progress sink, so a cancel stops the run at its next step (or its next model call), always before
    the flip. From the queue, other workers warm its sources first (`TaskHandle.share`); the curate
    itself is `compile.pipeline.curate`, as `sleuth compile` runs it."""

    def job(handle: TaskHandle) -> dict[str, Any]:
        settings = state.settings
        try:
            database = state.db.database
            lease_s = 3 * settings.worker_heartbeat_s
            # Many machines: a curate begun again after its worker stopped answering waits for that
            # worker's lock to lapse (a frozen holder), rather than failing at once.
            wait_s = 2 * lease_s if database.is_postgres else 0.0
            with curate_lock(ctx.lock_file, ctx.info().id, database, lease_s=lease_s, wait_s=wait_s):
                data = ctx.manifest_data()
                if chunks_only:
                    data.setdefault("curate", {}).setdefault("artifacts", {})["enabled"] = False
                manifest = parse_manifest(data)
                if handle.shared:  # from the queue: other workers embed sources beside this one
                    # Biggest first, so the last part to finish is a small one.
                    sources = sorted(
                        list_source_files(ctx.sources), key=lambda rel: -(ctx.sources / rel).stat().st_size
                    )
                    warm = partial(warm_source, ctx, state.home, manifest, settings=settings)
                    stale_s = 3 * settings.worker_heartbeat_s  # three missed renewals: that worker died
                    handle.share("warm", sources, warm, FAN_OUT, stale_after_s=stale_s)
                    storage = shared_storage(state.home)
                    if storage is not None:
                        _take_handed_over(storage, state, manifest, handle.task_id)
                catalog = state.runtime.catalog
                report = curate(
                    ctx,
                    state.home,
                    manifest,
                    handle,
                    settings=settings,
                    force=force,
                    catalog=catalog,
                    model=model,
                    token_budget=token_budget,
                    env=catalog.env,
                )
        except CurateInFlight:
            raise RuntimeError("another compile of this context is running") from None
        handle.files_dir.mkdir(parents=True, exist_ok=True)
        write_json_atomic(handle.files_dir / "curate-report.json", report.to_json())
        return curate_output(ctx, report, force)

    return job


def start_curate_task(
    state: Server,
    service: TaskService,
    ctx: ContextDir,
    who: str,
    task_input: dict[str, Any],
    force: bool = False,
    chunks_only: bool = False,
) -> TaskRow:
    info = ctx.info()
    task = service.store.create(
        "curate", context_id=info.id, context_slug=info.slug, created_by=who, input=task_input
    )
    args = {
        "task": task["id"],  # a shared curate's helpers hand their vectors over under it
        "context": info.id,
        "force": force,
        "chunks_only": chunks_only,
        "model": task_input.get("model"),
        "max_tokens": task_input.get("max_tokens"),
    }
    service.submit(task, "curate", args, phases=CURATE_PHASES)
    return task


def curate_part(state: Server, args: dict[str, Any]) -> Callable[[str], object]:
    """One part of a shared curate (`TaskHandle.share`): warm one source, as another worker asks.
    With shared storage each machine has an embedding cache of its own, so the part's vectors are
    handed over through the storage to the worker that compiles (`_take_handed_over`)."""
    ctx = state.home.find(str(args["context"]))
    manifest = parse_manifest(ctx.manifest_data())
    settings = state.settings
    storage, task_id = shared_storage(state.home), args.get("task")
    if storage is None or not task_id:
        return partial(warm_source, ctx, state.home, manifest, settings=settings)

    def part(rel: str) -> int:
        def hand_over(items: dict[str, Any]) -> None:
            storage.put_bytes(_handed_over_key(str(task_id), rel), pack_vectors(items))

        return warm_source(ctx, state.home, manifest, rel, hand_over, settings=settings)

    return part


def _handed_over_key(task_id: str, rel: str) -> str:
    return f"tasks/{task_id}/vectors/{hashlib.sha256(rel.encode()).hexdigest()}.npz"


def _take_handed_over(storage: Storage, state: Server, manifest: Manifest, task_id: str) -> None:
    """Vectors other workers computed for this curate, into this node's cache; then removed."""
    keys = list(storage.keys(f"tasks/{task_id}/vectors"))
    threads = state.settings.embed_threads
    for key in keys:
        take_vectors(state.home, manifest, storage.get_bytes(key), embed_threads=threads)
    storage.delete(keys)


def curate_job(state: Server, args: dict[str, Any]) -> Job:
    """A curate from its JSON arguments, as a worker rebuilds it from the task row (`TaskService.kinds`)."""
    ctx = state.home.find(str(args["context"]))
    return _curate_job(
        state,
        ctx,
        bool(args.get("force")),
        bool(args.get("chunks_only")),
        args.get("model"),
        args.get("max_tokens"),
    )
