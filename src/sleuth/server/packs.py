"""Packs (spec/context.md §8, spec/api.md §7.3): a context written as a `.context.zip`, and a pack
restored into an empty context. The `pack` and `restore` tasks run these on whichever machine takes them;
`sleuth pack` and `sleuth restore` run the same functions in the CLI's process."""

from __future__ import annotations

import json
import os
import zipfile
from pathlib import Path, PurePosixPath
from typing import Any

import sleuth
from sleuth.compile.archives import ZIP_ENTRY_BYTES, ArchiveRefused, SourceLimits, copy_capped, zip_directory
from sleuth.compile.extraction.cache import ExtractionCache
from sleuth.compile.extraction.choose import restore_extractor
from sleuth.compile.manifest import ManifestError, parse_manifest
from sleuth.compile.pipeline import curate
from sleuth.compile.report import Progress
from sleuth.compile.sources import UnsafePath, safe_join, safe_relative_path
from sleuth.errors import ToldConflict, ToldInvalid, ToldTooLarge
from sleuth.server.context_files import (
    EXCLUSIVE_WORKFLOWS,
    conflict_check,
    has_sources,
    read_extra,
    update_extra,
)
from sleuth.server.curation import CURATE_PHASES, curate_output
from sleuth.server.state import Server
from sleuth.server.task_handle import Job, TaskHandle
from sleuth.server.task_inputs import TaskInput
from sleuth.server.task_service import TaskService
from sleuth.settings import Settings
from sleuth.store.contexts.home import ContextDir, Home, now_iso
from sleuth.store.contexts.ledger import Ledger
from sleuth.store.contexts.lock import CurateInFlight, curate_lock
from sleuth.store.contexts.replica import context_storage
from sleuth.store.contexts.trees import walk_files
from sleuth.store.database import Database
from sleuth.store.records.rows import TaskRow

PACK_FORMAT = "sleuth-pack"
PACK_FORMAT_VERSION = 1
PACK_TOP_LEVEL = frozenset(
    {"pack.json", "manifest.json", "ledger.json", "tables.sqlite", "sources", "knowledge", "cache", "traces"}
)


def _extract_cache(ctx: ContextDir) -> Path:
    return ctx.extraction_cache


def _pack_members(ctx: ContextDir, live: str | None) -> list[tuple[str, Path]]:
    """(name in the archive, file on disk) of everything a pack carries (spec/context.md §8)."""
    fixed = (("manifest.json", ctx.manifest_file), ("ledger.json", ctx.ledger_file))
    members = [(name, path) for name, path in fixed if path.is_file()]
    members += [(f"sources/{rel}", ctx.sources / rel) for rel, _st in walk_files(ctx.sources)]
    if live is not None:
        vdir = ctx.version_dir(live)
        members += [
            (f"knowledge/{rel}", vdir / "knowledge" / rel) for rel, _st in walk_files(vdir / "knowledge")
        ]
        if (vdir / "tables.sqlite").is_file():
            members.append(("tables.sqlite", vdir / "tables.sqlite"))
    ExtractionCache.of(ctx).fill()  # whole here: entries other machines stored are copied first
    cache = _extract_cache(ctx)
    members += [(f"cache/extract/{rel}", cache / rel) for rel, _st in walk_files(cache)]
    return members


def write_pack(
    ctx: ContextDir, target: Path, include_traces: bool, progress: Progress, *, database: Database | None
) -> dict[str, Any]:
    """Write the context as a `.context.zip` at `target` (a `.partial` beside it until complete), under
    the context's lock (`database`: the process's server database) so no curate flips (and no collect
    removes the live version) half-way. The API's pack task and `sleuth pack` both run this.
    `CurateInFlight` when a compile holds the lock."""
    with curate_lock(ctx.lock_file, ctx.info().id, database):
        info, extra, live = ctx.info(), read_extra(ctx), ctx.live_version()
        members = _pack_members(ctx, live)
        counts = {
            top: sum(1 for name, _p in members if name.startswith(top + "/"))
            for top in ("sources", "knowledge", "cache")
        }
        pack = {
            "format": PACK_FORMAT,
            "format_version": PACK_FORMAT_VERSION,
            "slug": info.slug,
            "name": info.name,
            "description": info.description or None,
            "guide": extra.get("guide"),
            "sleuth_version": sleuth.__version__,
            "created_at": now_iso(),
            "live_version": live,
            "include_traces": include_traces,
            "sample_queries": info.sample_queries,
            "counts": counts,
        }
        progress.start("pack", len(members))
        target.parent.mkdir(parents=True, exist_ok=True)
        partial = target.with_name(f"{target.name}.partial")
        try:
            with zipfile.ZipFile(partial, "w", compression=zipfile.ZIP_DEFLATED) as zf:
                zf.writestr("pack.json", json.dumps(pack, ensure_ascii=False, indent=2))
                for name, path in members:
                    progress.advance("pack")
                    zf.write(path, name)
            os.replace(partial, target)
        finally:
            partial.unlink(missing_ok=True)
        progress.finish("pack")
    warnings = ["include_traces: traces are not packed yet; the pack has none"] if include_traces else []
    return {
        "state": "completed",
        "slug": info.slug,
        "include_traces": include_traces,
        "pack_filename": target.name,
        "pack_size": target.stat().st_size,
        "sources_files": counts["sources"],
        "knowledge_files": counts["knowledge"],
        "traces_files": 0,
        "corpus_groups_included": bool(Ledger.load(ctx.ledger_file).corpus_groups),
        "details": {"description": info.description or None, "sample_queries": info.sample_queries},
        "live_version": live,
        "warnings": warnings,
    }


def pack_job(state: Server, args: dict[str, Any]) -> Job:
    """`write_pack` into the task's files, as `<slug>.context.zip` (`TaskService.kinds`)."""
    ctx = state.home.find(str(args["context"]))
    include_traces = bool(args.get("include_traces"))

    def job(handle: TaskHandle) -> dict[str, Any]:
        try:
            return write_pack(
                ctx,
                handle.files_dir / f"{ctx.info().slug}.context.zip",
                include_traces,
                handle,
                database=state.db.database,
            )
        except CurateInFlight:
            raise RuntimeError("a compile of this context is running") from None

    return job


def _invalid_pack(message: str) -> ToldInvalid:
    return ToldInvalid("invalid_pack", message, field="file")


def check_pack(path: Path, limits: SourceLimits) -> dict[str, Any]:
    """`pack.json` of a valid pack: a zip whose members all have safe names, are regular files under
    the known top-level entries, fit the limits, with a known format version and a valid manifest.
    The zip's end record is read first, so a directory of any size is never loaded."""
    try:
        entries, directory = zip_directory(path)
    except (ArchiveRefused, OSError) as exc:
        raise _invalid_pack(f"not a valid Sleuth pack: {exc}") from None
    if entries > limits.max_archive_members or directory > max(1, entries) * ZIP_ENTRY_BYTES:
        raise _invalid_pack(
            f"the pack has {entries} members in a {directory}-byte directory; "
            f"the limit is {limits.max_archive_members} members"
        )
    try:
        with zipfile.ZipFile(path) as zf:
            sources = total = 0
            for info in zf.infolist():
                try:
                    rel = safe_relative_path(info.filename)
                except UnsafePath as exc:
                    raise _invalid_pack(f"unsafe member: {exc}") from None
                mode = (info.external_attr >> 16) & 0o170000
                if mode not in (0, 0o100000, 0o040000):
                    raise _invalid_pack(f"member {info.filename!r} is a link or device")
                if rel.parts[0] not in PACK_TOP_LEVEL:
                    raise _invalid_pack(f"unknown member {info.filename!r}")
                if info.is_dir():
                    continue
                if info.file_size > limits.max_file_bytes:
                    raise ToldTooLarge(
                        "file_too_large", f"{info.filename}: over {limits.max_file_bytes} bytes", field="file"
                    )
                total += info.file_size
                sources += rel.parts[0] == "sources"
            if total > limits.max_context_bytes:
                raise ToldTooLarge(
                    "context_byte_limit",
                    f"the pack expands to more than {limits.max_context_bytes} bytes",
                    field="file",
                )
            if sources > limits.max_files_per_context:
                raise ToldConflict(
                    "context_file_limit",
                    f"the pack holds {sources} sources; the limit is {limits.max_files_per_context}",
                    field="file",
                )
            try:
                pack = json.loads(zf.read("pack.json"))
            except KeyError:
                raise _invalid_pack("the archive has no pack.json") from None
            if not isinstance(pack, dict) or pack.get("format") != PACK_FORMAT:
                raise _invalid_pack(f"pack.json: format must be {PACK_FORMAT!r}")
            if pack.get("format_version") != PACK_FORMAT_VERSION:
                raise _invalid_pack(
                    f"pack.json: unknown format_version {pack.get('format_version')!r}; "
                    f"this Sleuth reads {PACK_FORMAT_VERSION}"
                )
            if "manifest.json" in zf.namelist():
                try:
                    parse_manifest(json.loads(zf.read("manifest.json")))
                except (ManifestError, json.JSONDecodeError) as exc:
                    raise _invalid_pack(f"manifest.json: {exc}") from None
            return pack
    except (zipfile.BadZipFile, EOFError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise _invalid_pack(f"not a valid Sleuth pack: {exc}") from None


def _restore_target(ctx: ContextDir, rel: PurePosixPath) -> Path | None:
    """Where a pack member goes; None for what the curate rebuilds (knowledge, tables, ledger, traces)."""
    parts = rel.parts
    if parts[0] == "sources" and len(parts) > 1:
        return safe_join(ctx.sources, "/".join(parts[1:]))
    if parts[:2] == ("cache", "extract") and len(parts) > 2:
        return safe_join(_extract_cache(ctx), "/".join(parts[2:]))
    if parts == ("manifest.json",):
        return ctx.manifest_file
    return None


def _packed_extractor(zf: zipfile.ZipFile) -> str:
    """The model that filled the packed extraction cache, from the pack's ledger ("none" if unsaid)."""
    try:
        info = zf.getinfo("ledger.json")
    except KeyError:
        return "none"
    if info.file_size > 64 * 1024 * 1024:
        return "none"
    try:
        return str(Ledger.model_validate_json(zf.read(info)).leg_hashes.get("extractor", "none"))
    except ValueError:
        return "none"


def restore_pack(
    home: Home,
    ctx: ContextDir,
    staged: Path,
    pack: dict[str, Any],
    progress: Progress,
    *,
    settings: Settings,
    database: Database | None,
) -> dict[str, Any]:
    """Write the pack's sources, manifest and extraction cache into `ctx`, then curate (trigger
    `restore`), under the process's `settings` and the lock of its server `database`. `pack` is
    `check_pack`'s reading of `staged`. The API's restore task and `sleuth restore` both run this.
    `CurateInFlight` when a compile holds the lock.

    The curate re-embeds and re-indexes; the knowledge files are rebuilt from the sources rather than
    copied. That gives the same artifacts: the deterministic kinds by construction, the model-made
    ones from the packed extraction cache under the model that filled it, with no model call.
    """
    limits = SourceLimits.of_settings(settings)
    with curate_lock(ctx.lock_file, ctx.info().id, database), ctx.editing():
        restored = 0
        ctx.staging.mkdir(parents=True, exist_ok=True)
        with zipfile.ZipFile(staged) as zf:
            recorded = _packed_extractor(zf)
            infos = [i for i in zf.infolist() if not i.is_dir()]
            progress.start("restore", len(infos))
            for info in infos:
                progress.advance("restore")
                target = _restore_target(ctx, safe_relative_path(info.filename))
                if target is None:
                    continue
                target.parent.mkdir(parents=True, exist_ok=True)
                partial = ctx.staging / f"{os.urandom(8).hex()}.partial"
                try:
                    with zf.open(info) as src:
                        copy_capped(src, partial, limits.max_file_bytes)
                    os.chmod(partial, 0o644)
                    os.replace(partial, target)
                finally:
                    partial.unlink(missing_ok=True)
                restored += 1 if target.is_relative_to(ctx.sources) else 0
        progress.finish("restore")
        ctx_info = ctx.info()
        if not ctx_info.description and pack.get("description"):
            ctx_info.description = str(pack["description"])[:2000]
            ctx.save_info(ctx_info)
        if not read_extra(ctx).get("guide") and pack.get("guide"):
            update_extra(ctx, guide=str(pack["guide"])[:8000])
        update_extra(ctx, last_source_import_at=now_iso())
        ExtractionCache.of(ctx).publish()  # the packed replies, for curates on other machines
        manifest = parse_manifest(ctx.manifest_data())
        extractor = restore_extractor(ctx, manifest, recorded, settings)
        report = curate(ctx, home, manifest, progress, settings=settings, extractor=extractor)
    return {
        "state": "completed",
        "slug": ctx.info().slug,
        "pack": {k: pack.get(k) for k in ("slug", "sleuth_version", "created_at", "live_version")},
        "sources_files": restored,
        "live_version": ctx.live_version(),
        "curate": curate_output(ctx, report, False) | {"trigger": "restore"},
    }


def start_pack(service: TaskService, ctx: ContextDir, include_traces: bool, who: str) -> TaskRow:
    """Record and submit a `pack` task; `409 task_in_flight` while a curate, pack or restore runs."""
    with service.claiming():
        conflict_check(service, ctx, EXCLUSIVE_WORKFLOWS)
        info = ctx.info()
        task = service.store.create(
            "pack",
            context_id=info.id,
            context_slug=info.slug,
            created_by=who,
            input={"include_traces": include_traces},
        )
        args = {"context": info.id, "include_traces": include_traces}
        service.submit(task, "pack", args, phases=("pack",))
    return task


def restore_job(state: Server, args: dict[str, Any]) -> Job:
    """`restore_pack` from the task's staged upload (`TaskInput`), checked again where it runs; the upload
    is discarded once the task has ended."""
    ctx = state.home.find(str(args["context"]))
    upload, storage = TaskInput.of_args(args), context_storage(ctx)
    if upload is None:
        raise ValueError("a restore task names its upload")

    def job(handle: TaskHandle) -> dict[str, Any]:
        handle.when_ended(lambda: upload.discard(ctx, storage))
        settings = state.settings
        staged = upload.fetch(ctx, storage)
        try:
            pack = check_pack(staged, SourceLimits.of_settings(settings))
            return restore_pack(
                state.home, ctx, staged, pack, handle, settings=settings, database=state.db.database
            )
        except CurateInFlight:
            raise RuntimeError("a compile of this context is running") from None

    return job


def start_restore(
    service: TaskService, ctx: ContextDir, upload: TaskInput, filename: str, limits: SourceLimits, who: str
) -> TaskRow:
    """Check the pack staged for `upload` and submit its `restore` task; the staged file is removed when
    anything here refuses it."""
    submitted = False
    try:
        pack = check_pack(upload.staged(ctx), limits)
        with service.claiming():
            conflict_check(service, ctx, EXCLUSIVE_WORKFLOWS)
            if has_sources(ctx):
                raise ToldConflict("context_not_empty", "restore needs a context without sources")
            info = ctx.info()
            task = service.store.create(
                "restore",
                context_id=info.id,
                context_slug=info.slug,
                created_by=who,
                input={"filename": filename, "pack_slug": pack.get("slug"), "trigger": "restore"},
            )
            upload.share(ctx, context_storage(ctx))
            args = {"context": info.id, **upload.args()}
            service.submit(task, "restore", args, phases=("restore", *CURATE_PHASES))
            submitted = True
    finally:
        if not submitted:
            upload.discard(ctx, None)
    return task
