"""Routes: pack a context into a `.context.zip` and restore one into an empty context
(spec/api.md §7.3, spec/context.md §8), both as tasks (`server/packs.py`)."""

from __future__ import annotations

import os
from typing import Annotated, Any

from fastapi import APIRouter, Body, Request
from fastapi.concurrency import run_in_threadpool
from starlette.datastructures import UploadFile

from sleuth.api.auth import AdminKey
from sleuth.api.errors import ApiError
from sleuth.api.state import api_state, task_service
from sleuth.api.uploads import MULTIPART_OVERHEAD, UPLOAD_SCHEMA, parse_upload, single_file, staging_dir
from sleuth.compile.archives import SourceLimits, copy_capped
from sleuth.errors import ToldConflict
from sleuth.server.context_files import StrictBody, find_context, has_sources
from sleuth.server.packs import start_pack, start_restore
from sleuth.server.task_inputs import TaskInput
from sleuth.server.task_service import TaskService
from sleuth.store.contexts.home import ContextDir

router = APIRouter()


class PackRequest(StrictBody):
    include_traces: bool = False


@router.post("/contexts/{slug}/pack")
def pack_context(
    request: Request, slug: str, who: AdminKey, body: Annotated[PackRequest | None, Body()] = None
) -> dict[str, Any]:
    """Start a pack task; download the archive from `GET /tasks/{id}/files/read/<slug>.context.zip`."""
    ctx = find_context(api_state(request), slug)
    task = start_pack(task_service(request), ctx, body.include_traces if body else False, who.name)
    return {"task_id": task["id"], "state": "packing"}


@router.post("/contexts/{slug}/restore", openapi_extra=UPLOAD_SCHEMA)
async def restore_context(request: Request, slug: str, who: AdminKey) -> dict[str, Any]:
    """Restore a `.context.zip` (multipart field `file`) into an existing context without sources."""
    state, service = api_state(request), task_service(request)
    ctx = await run_in_threadpool(find_context, state, slug)
    if await run_in_threadpool(has_sources, ctx):
        raise ToldConflict("context_not_empty", "restore needs a context without sources")
    limits = SourceLimits.of_settings(state.settings)
    form = await parse_upload(request, limits.max_upload_bytes + MULTIPART_OVERHEAD)
    try:
        upload, filename = single_file(form)
        return await run_in_threadpool(_stage_and_restore, service, ctx, upload, filename, limits, who.name)
    finally:
        await form.close()


def _stage_and_restore(
    service: TaskService, ctx: ContextDir, upload: UploadFile, filename: str, limits: SourceLimits, who: str
) -> dict[str, Any]:
    staged = TaskInput(f"restore-{os.urandom(8).hex()}", "pack.zip")
    staging_dir(ctx, staged.folder_name)
    upload.file.seek(0)
    try:
        copy_capped(upload.file, staged.staged(ctx), limits.max_upload_bytes)
    except BaseException as exc:
        staged.discard(ctx, None)
        if isinstance(exc, OverflowError):
            raise ApiError(
                413, "file_too_large", f"the pack is over {limits.max_upload_bytes} bytes"
            ) from None
        raise
    task = start_restore(service, ctx, staged, filename, limits, who)
    return {"task_id": task["id"], "state": "restoring"}
