"""Routes: source import (one file, or an archive expanded by an `import` task, see `archives.py`)
and the source tree: list, stats, manifest, read, delete (spec/api.md §6.2).

Blocking work (file copies, tree walks, deletes) runs in worker threads: plain `def` routes run in
FastAPI's thread pool, and the `async` upload route (which streams the multipart body) hands its disk
work to `run_in_threadpool`.
"""

from __future__ import annotations

import os
from pathlib import Path, PurePosixPath
from typing import IO, Annotated, Any

from fastapi import APIRouter, Query, Request
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import FileResponse
from starlette.datastructures import UploadFile

from sleuth.api.auth import AdminKey, AnyKey
from sleuth.api.errors import ApiError
from sleuth.api.file_trees import dir_listing, file_response, iso, resolve_file, tree_stats
from sleuth.api.state import api_state, task_service
from sleuth.api.uploads import (
    MULTIPART_OVERHEAD,
    UPLOAD_SCHEMA,
    parse_upload,
    single_file,
    staging_dir,
)
from sleuth.compile.archives import SourceLimits, copy_capped
from sleuth.compile.parse import PARSERS
from sleuth.compile.sources import UnsafePath, archive_stem, is_archive, safe_join
from sleuth.server.archives import SourceUsage, refuse_connector_folder, start_import
from sleuth.server.context_files import find_context, safe_rel, tree_lock, update_extra
from sleuth.server.state import Server
from sleuth.server.task_inputs import TaskInput
from sleuth.server.task_service import TaskService
from sleuth.store.contexts.home import ContextDir, now_iso
from sleuth.store.contexts.trees import walk_files
from sleuth.store.files import prune_empty_dirs

router = APIRouter()


class _LimitHit(Exception):
    def __init__(self, status: int, code: str, message: str) -> None:
        super().__init__(message)
        self.status, self.code = status, code


def _place(ctx: ContextDir, rel: PurePosixPath, src: IO[bytes], limits: SourceLimits) -> dict[str, Any]:
    """Write one file into the source tree: staged in `staging/`, checked against the per-file and
    per-context limits (on the bytes read), then renamed into place (a reader never sees half a
    file)."""
    tmp = staging_dir(ctx) / f"{os.urandom(8).hex()}.partial"
    try:
        try:
            size, sha = copy_capped(src, tmp, limits.max_file_bytes)
        except OverflowError:
            raise _LimitHit(
                413, "file_too_large", f"{rel}: over the per-file limit of {limits.max_file_bytes} bytes"
            ) from None
        with tree_lock(ctx):
            if not ctx.info_file.exists():
                raise ApiError(404, "context_not_found", "the context was deleted during the upload")
            dest = safe_join(ctx.sources, str(rel))
            if dest.is_dir():
                raise _LimitHit(400, "invalid_request", f"{rel}: a directory exists at that path")
            old = dest.stat().st_size if dest.is_file() else None
            tally = SourceUsage.of(ctx)
            if old is None and tally.files + 1 > limits.max_files_per_context:
                raise _LimitHit(
                    409,
                    "context_file_limit",
                    f"the context holds {tally.files} files; the limit is {limits.max_files_per_context}",
                )
            if tally.bytes - (old or 0) + size > limits.max_context_bytes:
                raise _LimitHit(
                    413,
                    "context_byte_limit",
                    f"the context would hold more than {limits.max_context_bytes} bytes",
                )
            try:
                dest.parent.mkdir(parents=True, exist_ok=True)
            except (FileExistsError, NotADirectoryError):
                raise _LimitHit(400, "invalid_request", f"{rel}: a parent of the path is a file") from None
            os.chmod(tmp, 0o644)
            os.replace(tmp, dest)
        return {"path": str(rel), "size": size, "sha256": sha}
    finally:
        tmp.unlink(missing_ok=True)


def _store_plain(
    state: Server, service: TaskService, ctx: ContextDir, rel: PurePosixPath, upload: UploadFile, who: str
) -> dict[str, Any]:
    limits = SourceLimits.of_settings(state.settings)
    upload.file.seek(0)
    with ctx.editing():
        refuse_connector_folder(ctx, rel)  # again under the lock: a connector added meanwhile
        try:
            placed = _place(ctx, rel, upload.file, limits)
        except _LimitHit as hit:
            raise ApiError(hit.status, hit.code, str(hit), field="file") from None
        except UnsafePath as exc:
            raise ApiError(400, "unsafe_path", str(exc), field="path") from None
        try:
            info = ctx.info()
        except FileNotFoundError:
            raise ApiError(404, "context_not_found", "the context was deleted during the upload") from None
        update_extra(ctx, last_source_import_at=now_iso())
    task = service.store.create(
        "import",
        context_id=info.id,
        context_slug=info.slug,
        created_by=who,
        input={"path": str(rel.parent), "filename": upload.filename},
        state="completed",
        output={"files": [{**placed, "action": "copied", "reason": None}]},
    )
    return {"task_id": task["id"], "state": "completed", "files": [placed]}


def _stage_archive(
    state: Server,
    service: TaskService,
    ctx: ContextDir,
    folder: PurePosixPath,
    upload: UploadFile,
    who: str,
) -> dict[str, Any]:
    """Stage the archive and start an `import` task that expands it."""
    limits = SourceLimits.of_settings(state.settings)
    name = PurePosixPath(str(upload.filename)).name
    info = ctx.info()
    task = service.store.create(
        "import",
        context_id=info.id,
        context_slug=info.slug,
        created_by=who,
        input={"path": str(folder), "filename": str(upload.filename), "archive": True},
    )
    staged = TaskInput(task["id"], name)
    try:
        staging_dir(ctx, staged.folder_name)
        upload.file.seek(0)
        copy_capped(upload.file, staged.staged(ctx), limits.max_upload_bytes)
        start_import(service, ctx, task, staged)
    except BaseException as exc:
        staged.discard(ctx, None)
        reason = exc.message if isinstance(exc, ApiError) else str(exc)
        service.store.finish(task["id"], "failed", error=f"staging the archive failed: {reason}")
        if isinstance(exc, OverflowError):
            raise ApiError(
                413, "file_too_large", f"the archive is over {limits.max_upload_bytes} bytes"
            ) from None
        raise
    return {"task_id": task["id"], "state": "importing", "files": []}


@router.post("/contexts/{slug}/import/upload", openapi_extra=UPLOAD_SCHEMA)
async def upload_source(
    request: Request, slug: str, who: AdminKey, path: Annotated[str, Query(max_length=1024)] = "uploads"
) -> dict[str, Any]:
    """One file per request (multipart field `file`) stored at `<path>/<filename>`; an archive is
    staged and expanded by an `import` task."""
    state, service = api_state(request), task_service(request)
    ctx = await run_in_threadpool(find_context, state, slug)
    folder = safe_rel(path)
    limits = SourceLimits.of_settings(state.settings)
    form = await parse_upload(request, limits.max_upload_bytes + MULTIPART_OVERHEAD)
    try:
        upload, filename = single_file(form)
        safe_rel(filename, source=True, field="file")  # a bad filename is the file part's fault
        rel = safe_rel(f"{folder}/{filename}", source=True)
        size = upload.size or 0
        if is_archive(Path(filename)):
            await run_in_threadpool(refuse_connector_folder, ctx, rel.parent / archive_stem(Path(filename)))
            if size > limits.max_upload_bytes:
                raise ApiError(413, "file_too_large", f"the archive is over {limits.max_upload_bytes} bytes")
            return await run_in_threadpool(_stage_archive, state, service, ctx, rel.parent, upload, who.name)
        if PurePosixPath(filename).suffix.lower() not in PARSERS:
            raise ApiError(415, "unsupported_format", unsupported(filename), field="file")
        await run_in_threadpool(refuse_connector_folder, ctx, rel)
        if size > limits.max_file_bytes:
            raise ApiError(413, "file_too_large", f"the file is over {limits.max_file_bytes} bytes")
        return await run_in_threadpool(_store_plain, state, service, ctx, rel, upload, who.name)
    finally:
        await form.close()


def unsupported(filename: str) -> str:
    """Why a file is refused, with what would be read: stored, it would only be skipped at the curate."""
    suffix = PurePosixPath(filename).suffix.lower() or "(no extension)"
    return (
        f"{filename}: Sleuth cannot read {suffix} files; it reads PDF, Word (.docx), Markdown, HTML, text, "
        "CSV, JSON and source code, or a .zip/.tar.gz of them"
    )


# --- sources --------------------------------------------------------------------------------------


@router.get("/contexts/{slug}/source/list")
def list_sources_root(request: Request, slug: str, _who: AnyKey) -> dict[str, Any]:
    return dir_listing(find_context(api_state(request), slug).sources, "", missing_root_is_empty=True)


@router.get("/contexts/{slug}/source/list/{path:path}")
def list_sources(request: Request, slug: str, path: str, _who: AnyKey) -> dict[str, Any]:
    return dir_listing(find_context(api_state(request), slug).sources, path, missing_root_is_empty=True)


@router.get("/contexts/{slug}/source/stats")
def source_stats(request: Request, slug: str, _who: AnyKey) -> dict[str, Any]:
    state = api_state(request)
    stats = tree_stats(find_context(state, slug).sources)
    limits = SourceLimits.of_settings(state.settings)
    return {
        **stats,
        "max_files_per_context": limits.max_files_per_context,
        "max_bytes_per_context": limits.max_context_bytes,
        "max_bytes_per_file": limits.max_file_bytes,
        "used_files": stats["file_count"],
        "used_bytes": stats["total_size"],
    }


@router.get("/contexts/{slug}/source/manifest")
def source_manifest(request: Request, slug: str, _who: AnyKey) -> dict[str, Any]:
    """Every source file (the staging area is outside the source tree, so never listed)."""
    ctx = find_context(api_state(request), slug)
    files = [
        {"path": rel, "size": st.st_size, "last_modified": iso(st.st_mtime)}
        for rel, st in walk_files(ctx.sources)
    ]
    return {"files": files, "total": len(files)}


@router.get("/contexts/{slug}/source/read/{path:path}")
def read_source(request: Request, slug: str, path: str, _who: AnyKey) -> FileResponse:
    return file_response(resolve_file(find_context(api_state(request), slug).sources, path))


@router.delete("/contexts/{slug}/source/delete/{path:path}")
def delete_source(request: Request, slug: str, path: str, _who: AdminKey) -> dict[str, Any]:
    """The file leaves the source tree now; its chunks and artifacts leave at the next curate."""
    ctx = find_context(api_state(request), slug)
    with tree_lock(ctx), ctx.editing():
        target = resolve_file(ctx.sources, path)
        target.unlink()
        prune_empty_dirs(target.parent, ctx.sources)
    return {"deleted": True, "path": str(safe_rel(path))}
