"""Routes: tasks (spec/api.md §7.1), long context operations run in the background, persisted in
`server.sqlite`: list, get, stats, cancel, and the files a task wrote.

A route records the task (`scheduled`) and hands a job to `task_service.TaskService`, a small thread
pool, so the event loop never waits on a compile or an archive. The job reports progress, steps and
cancellation checks through its `TaskHandle`; the handle is also the compiler's `Progress`, so a
curate checks for a cancel at every phase step and a cancelled curate stops before it can flip. The
task's files are browsed with the same helpers as a context's (`file_trees.py`).
"""

from __future__ import annotations

import logging
import time
from typing import Annotated, Any

from fastapi import APIRouter, Body, Query, Request
from fastapi.responses import FileResponse
from pydantic import BaseModel, ConfigDict, Field

from sleuth.api.auth import AdminKey, AnyKey
from sleuth.api.errors import ApiError
from sleuth.api.file_trees import (
    dir_listing,
    file_response,
    guess_type,
    iso,
    resolve_file,
)
from sleuth.api.state import api_state, task_service
from sleuth.server.access import Principal
from sleuth.server.state import Server
from sleuth.server.task_service import TaskService, TaskStopTimeout
from sleuth.store.contexts.home import ContextNotFound
from sleuth.store.records.rows import TaskRow
from sleuth.store.records.tasks import (
    STATES,
    TaskNotFound,
    bound_output,
    runtime_seconds,
)

log = logging.getLogger("sleuth.api.tasks")

#: `GET /tasks` cuts each output to this much JSON (`truncated: true`), so a page of 1,000 tasks stays
#: bounded; `GET /tasks/{id}` returns the whole stored output (itself bounded by the task store).
LIST_OUTPUT_BYTES = 16 * 1024


# --- jobs and their handle ------------------------------------------------------------------------


# --- the Task object ------------------------------------------------------------------------------


def task_json(state: Server, task: TaskRow, with_steps: bool = False) -> dict[str, Any]:
    """The Task object of spec/api.md §7.1 (`steps` on `GET /tasks/{id}` only)."""
    timeout = task["timeout_seconds"]
    body: dict[str, Any] = {
        "id": task["id"],
        "project_id": state.settings.project_id,
        "context_id": task["context_id"],
        "context_slug": task["context_slug"],
        "created_by": task["created_by"],
        "workflow": task["workflow"],
        "state": task["state"],
        "attempts": task["attempts"],  # runs begun: a curate begun again on another worker has 2 (§7.1)
        "error": task["error"],
        "input": task["input"],
        "output": task["output"],
        "tokens_prompt": task["tokens_prompt"],
        "tokens_completion": task["tokens_completion"],
        "runtime_seconds": runtime_seconds(task),
        "created_at": iso(task["created_at"]),
        "running_from": iso(task["running_from"]),
        "finished_at": iso(task["finished_at"]),
        "last_activity_at": iso(task["last_activity_at"]),
        "timeout_seconds": timeout,
        "timeout_at": iso(task["running_from"] + timeout) if timeout and task["running_from"] else None,
        "progress": {"phase": None, "phases": [], "label": None, "pct": 0, "eta_seconds": None}
        | (task["progress"] or {}),
    }
    if with_steps:
        body["steps"] = task["steps"] or []
    return body


def shown_to(who: Principal, body: dict[str, Any]) -> dict[str, Any]:
    """The Task object as `who` may see it. A query key sees every task of its contexts (what runs,
    its state and progress: a console shows a curate under way) but the input, output, error and steps
    only of its own: an admin's import names a connector's URL or folder, its error the server's words,
    a pack's output where the archive lies. An admin sees all."""
    if who.owns(str(body.get("created_by") or "")):
        return body
    hidden = {"input": None, "output": None, "error": None}
    return body | hidden | ({"steps": []} if "steps" in body else {})


def _require_task(service: TaskService, task_id: str) -> TaskRow:
    try:
        return service.store.require(task_id)
    except TaskNotFound:
        raise ApiError(404, "task_not_found", f"no task {task_id!r}", task_id=task_id) from None


def _own_task(service: TaskService, who: Principal, task_id: str) -> TaskRow:
    """The task, when `who` may see what it holds (its files); another's answers `404`, as if absent."""
    task = _require_task(service, task_id)
    if not who.owns(str(task.get("created_by") or "")):
        raise ApiError(404, "task_not_found", f"no task {task_id!r}", task_id=task_id)
    return task


# --- routes ---------------------------------------------------------------------------------------

router = APIRouter(tags=["tasks"])


class TaskCancelRequest(BaseModel):
    """`DELETE /tasks/{id}` body; `target` and `pushed` are contract fields Sleuth ignores (§13)."""

    model_config = ConfigDict(extra="forbid")

    reason: str | None = Field(None, max_length=2000)
    target: Any = None
    pushed: Any = None


@router.get("/tasks")
def list_tasks(
    request: Request,
    who: AnyKey,
    workflow: str | None = None,
    state: str | None = None,
    context: str | None = None,
    q: str | None = Query(None, max_length=200),
    limit: int = Query(30, ge=1, le=1000),
    page: int = Query(1, ge=1),
    offset: int | None = Query(None, ge=0),
) -> dict[str, Any]:
    """A page of tasks, newest first; `offset` overrides `page`. Each output is cut to
    `LIST_OUTPUT_BYTES` (`GET /tasks/{id}` has it whole)."""
    api = api_state(request)
    service = task_service(request)
    if state is not None and state not in STATES:
        raise ApiError(
            400,
            "invalid_request",
            f"state: unknown task state {state!r}; one of {', '.join(STATES)}",
            field="state",
        )
    names: list[str] | None = None
    if context is not None:
        names = [context]
        try:
            info = api.home.find(context).info()
            names = [info.id, info.slug]
        except ContextNotFound:
            pass
    if who.contexts is not None:  # a key limited to contexts lists only their tasks (spec/api.md §3.1)
        names = sorted(who.contexts) if names is None else [n for n in names if who.sees_context(n)]
    start = offset if offset is not None else (page - 1) * limit
    items, total = service.store.page(
        workflow=workflow, state=state, context=names, q=q, limit=limit, offset=start
    )
    return {
        "items": [
            shown_to(who, task_json(api, t) | {"output": bound_output(t["output"], LIST_OUTPUT_BYTES)})
            for t in items
        ],
        "total": total,
        "limit": limit,
        "offset": start,
        "page": start // limit + 1,
        "pages": (total + limit - 1) // limit,
    }


@router.get("/tasks/{task_id}")
def get_task(request: Request, task_id: str, who: AnyKey) -> dict[str, Any]:
    task = _require_task(task_service(request), task_id)
    return shown_to(who, task_json(api_state(request), task, with_steps=True))


@router.get("/tasks/{task_id}/stats")
def get_task_stats(request: Request, task_id: str, _who: AnyKey) -> dict[str, Any]:
    task = _require_task(task_service(request), task_id)
    return {
        "task_id": task["id"],
        "tokens_prompt": task["tokens_prompt"],
        "tokens_completion": task["tokens_completion"],
        "tokens_total": task["tokens_prompt"] + task["tokens_completion"],
        "runtime_seconds": runtime_seconds(task),
        "captured_at": iso(time.time()),
    }


@router.delete("/tasks/{task_id}")
def cancel_task(
    request: Request,
    task_id: str,
    _who: AdminKey,
    body: Annotated[TaskCancelRequest | None, Body()] = None,
) -> dict[str, Any]:
    """Stop the task and wait for it (up to the stop timeout); a terminal task comes back unchanged."""
    service = task_service(request)
    _require_task(service, task_id)
    try:
        task = service.stop(task_id, body.reason if body else None)
    except TaskStopTimeout as exc:
        raise ApiError(504, "task_stop_timeout", str(exc), task_id=task_id) from None
    return task_json(api_state(request), task, with_steps=True)


@router.get("/tasks/{task_id}/files/list")
def list_task_files_root(request: Request, task_id: str, who: AnyKey) -> dict[str, Any]:
    return list_task_files(request, task_id, "", who)


@router.get("/tasks/{task_id}/files/list/{path:path}")
def list_task_files(request: Request, task_id: str, path: str, who: AnyKey) -> dict[str, Any]:
    service = task_service(request)
    _own_task(service, who, task_id)
    return dir_listing(service.readable_files(task_id), path, missing_root_is_empty=True)


@router.get("/tasks/{task_id}/files/read/{path:path}")
def read_task_file(request: Request, task_id: str, path: str, who: AnyKey) -> FileResponse:
    service = task_service(request)
    _own_task(service, who, task_id)
    target = resolve_file(service.readable_files(task_id), path)
    size = target.stat().st_size
    return file_response(target, {"x-nexus-file-size": str(size), "x-nexus-stale": "false"})


@router.get("/tasks/{task_id}/files/metadata/{path:path}")
def task_file_metadata(request: Request, task_id: str, path: str, who: AnyKey) -> dict[str, Any]:
    service = task_service(request)
    _own_task(service, who, task_id)
    target = resolve_file(service.readable_files(task_id), path)
    st = target.stat()
    return {
        "path": path,
        "size": st.st_size,
        "mtime": iso(st.st_mtime),
        "content_type": guess_type(target.name),
    }


# --- file trees (shared with the context routes) --------------------------------------------------
