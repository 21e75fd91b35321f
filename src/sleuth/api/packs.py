"""Routes: pack a context into a `.context.zip` and restore one into an empty context
(spec/api.md §7.3, spec/context.md §8), both as background tasks."""

from __future__ import annotations

import json
import os
import shutil
import zipfile
from pathlib import Path, PurePosixPath
from typing import Annotated, Any

from fastapi import APIRouter, Body, Request
from fastapi.concurrency import run_in_threadpool
from starlette.datastructures import UploadFile

import sleuth
from sleuth.api.auth import AdminKey
from sleuth.api.errors import ApiError
from sleuth.api.state import api_state, task_service
from sleuth.api.uploads import (
    MULTIPART_OVERHEAD,
    UPLOAD_SCHEMA,
    parse_upload,
    single_file,
    staging_dir,
)
from sleuth.compile.archives import ZIP_ENTRY_BYTES, ArchiveRefused, SourceLimits, copy_capped, zip_directory
from sleuth.compile.extraction.cache import ExtractionCache
from sleuth.compile.extraction.choose import restore_extractor
from sleuth.compile.manifest import ManifestError, parse_manifest
from sleuth.compile.pipeline import CompileRun
from sleuth.compile.report import Progress
from sleuth.compile.sources import UnsafePath, safe_join, safe_relative_path
from sleuth.server.context_files import (
    EXCLUSIVE_WORKFLOWS,
    StrictBody,
    conflict_check,
    find_context,
    has_sources,
    read_extra,
    update_extra,
)
from sleuth.server.curation import CURATE_PHASES, curate_output
from sleuth.server.state import Server
from sleuth.server.task_service import Job, TaskHandle, TaskService
from sleuth.store.home import ContextDir, Home, now_iso
from sleuth.store.ledger import Ledger
from sleuth.store.lock import CurateInFlight, curate_lock
from sleuth.store.trees import walk_files

router = APIRouter()


PACK_FORMAT = "sleuth-pack"
PACK_FORMAT_VERSION = 1
PACK_TOP_LEVEL = frozenset(
    {"pack.json", "manifest.json", "ledger.json", "tables.sqlite", "sources", "knowledge", "cache", "traces"}
)


class PackRequest(StrictBody):
    include_traces: bool = False


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


def write_pack(ctx: ContextDir, target: Path, include_traces: bool, progress: Progress) -> dict[str, Any]:
    """Write the context as a `.context.zip` at `target` (a `.partial` beside it until complete), under
    the context's lock so no curate flips (and no collect removes the live version) half-way. The API's
    pack task and `sleuth pack` both run this. `CurateInFlight` when a compile holds the lock."""
    with curate_lock(ctx.lock_file, ctx.info().id):
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


def _pack_job(ctx: ContextDir, include_traces: bool) -> Job:
    """`write_pack` into the task's files, as `<slug>.context.zip`."""

    def job(handle: TaskHandle) -> dict[str, Any]:
        try:
            return write_pack(
                ctx, handle.files_dir / f"{ctx.info().slug}.context.zip", include_traces, handle
            )
        except CurateInFlight:
            raise RuntimeError("a compile of this context is running") from None

    return job


@router.post("/contexts/{slug}/pack")
def pack_context(
    request: Request, slug: str, who: AdminKey, body: Annotated[PackRequest | None, Body()] = None
) -> dict[str, Any]:
    """Start a pack task; download the archive from `GET /tasks/{id}/files/read/<slug>.context.zip`."""
    state, service = api_state(request), task_service(request)
    ctx = find_context(state, slug)
    include_traces = body.include_traces if body else False
    with service.claiming():
        conflict_check(service, ctx, EXCLUSIVE_WORKFLOWS)
        info = ctx.info()
        task = service.store.create(
            "pack",
            context_id=info.id,
            context_slug=info.slug,
            created_by=who.name,
            input={"include_traces": include_traces},
        )
        service.submit(task, _pack_job(ctx, include_traces), phases=("pack",))
    return {"task_id": task["id"], "state": "packing"}


def _invalid_pack(message: str) -> ApiError:
    return ApiError(400, "invalid_pack", message, field="file")


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
                    raise ApiError(
                        413, "file_too_large", f"{info.filename}: over {limits.max_file_bytes} bytes"
                    )
                total += info.file_size
                sources += rel.parts[0] == "sources"
            if total > limits.max_context_bytes:
                raise ApiError(
                    413,
                    "context_byte_limit",
                    f"the pack expands to more than {limits.max_context_bytes} bytes",
                )
            if sources > limits.max_files_per_context:
                raise ApiError(
                    409,
                    "context_file_limit",
                    f"the pack holds {sources} sources; the limit is {limits.max_files_per_context}",
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
    home: Home, ctx: ContextDir, staged: Path, pack: dict[str, Any], limits: SourceLimits, progress: Progress
) -> dict[str, Any]:
    """Write the pack's sources, manifest and extraction cache into `ctx`, then curate (trigger
    `restore`). `pack` is `check_pack`'s reading of `staged`. The API's restore task and `sleuth
    restore` both run this. `CurateInFlight` when a compile holds the lock.

    The curate re-embeds and re-indexes; the knowledge files are rebuilt from the sources rather than
    copied. That gives the same artifacts: the deterministic kinds by construction, the model-made
    ones from the packed extraction cache under the model that filled it, with no model call.
    """
    with curate_lock(ctx.lock_file, ctx.info().id), ctx.editing():
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
        extractor = restore_extractor(ctx, manifest, recorded)
        report = CompileRun(ctx, home, manifest, False, progress, extractor).execute()
    return {
        "state": "completed",
        "slug": ctx.info().slug,
        "pack": {k: pack.get(k) for k in ("slug", "sleuth_version", "created_at", "live_version")},
        "sources_files": restored,
        "live_version": ctx.live_version(),
        "curate": curate_output(ctx, report, False) | {"trigger": "restore"},
    }


def _restore_job(
    state: Server, ctx: ContextDir, staged: Path, pack: dict[str, Any], limits: SourceLimits
) -> Job:
    """`restore_pack` as a task; the staged upload is removed when it ends."""

    def job(handle: TaskHandle) -> dict[str, Any]:
        try:
            return restore_pack(state.home, ctx, staged, pack, limits, handle)
        except CurateInFlight:
            raise RuntimeError("a compile of this context is running") from None
        finally:
            shutil.rmtree(staged.parent, ignore_errors=True)

    return job


@router.post("/contexts/{slug}/restore", openapi_extra=UPLOAD_SCHEMA)
async def restore_context(request: Request, slug: str, who: AdminKey) -> dict[str, Any]:
    """Restore a `.context.zip` (multipart field `file`) into an existing context without sources."""
    state, service = api_state(request), task_service(request)
    ctx = await run_in_threadpool(find_context, state, slug)
    if await run_in_threadpool(has_sources, ctx):
        raise ApiError(409, "context_not_empty", "restore needs a context without sources")
    limits = SourceLimits.of_settings(state.settings)
    form = await parse_upload(request, limits.max_upload_bytes + MULTIPART_OVERHEAD)
    try:
        upload, _filename = single_file(form)
        return await run_in_threadpool(_start_restore, state, service, ctx, upload, limits, who.name)
    finally:
        await form.close()


def _start_restore(
    state: Server, service: TaskService, ctx: ContextDir, upload: UploadFile, limits: SourceLimits, who: str
) -> dict[str, Any]:
    staged_dir = staging_dir(ctx, f"restore-{os.urandom(8).hex()}")
    staged = staged_dir / "pack.zip"
    submitted = False
    try:
        upload.file.seek(0)
        try:
            copy_capped(upload.file, staged, limits.max_upload_bytes)
        except OverflowError:
            raise ApiError(
                413, "file_too_large", f"the pack is over {limits.max_upload_bytes} bytes"
            ) from None
        pack = check_pack(staged, limits)
        with service.claiming():
            conflict_check(service, ctx, EXCLUSIVE_WORKFLOWS)
            if has_sources(ctx):
                raise ApiError(409, "context_not_empty", "restore needs a context without sources")
            info = ctx.info()
            task = service.store.create(
                "restore",
                context_id=info.id,
                context_slug=info.slug,
                created_by=who,
                input={"filename": upload.filename, "pack_slug": pack.get("slug"), "trigger": "restore"},
            )
            service.submit(
                task, _restore_job(state, ctx, staged, pack, limits), phases=("restore", *CURATE_PHASES)
            )
            submitted = True
    finally:
        if not submitted:
            shutil.rmtree(staged_dir, ignore_errors=True)
    return {"task_id": task["id"], "state": "restoring"}
