"""Tasks (api.md §7.1): long context operations run in the background, persisted in `server.sqlite`.

A route records the task (`scheduled`) and hands a job to `TaskService`, a small thread pool, so the
event loop never waits on a compile or an archive. The job reports progress, steps and cancellation
checks through its `TaskHandle`; the handle is also the compiler's `Progress`, so a curate checks for a
cancel at every phase step and a cancelled curate stops before it can flip.

The file-tree helpers at the end (safe path resolution, `DirListing`, raw file reads) are shared with
the context routes, which browse sources and knowledge the same way tasks expose their files.
"""

from __future__ import annotations

import contextlib
import logging
import mimetypes
import os
import threading
import time
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated, Any

from fastapi import APIRouter, Body, FastAPI, Query, Request
from fastapi.responses import FileResponse
from pydantic import BaseModel, ConfigDict, Field

from sleuth.api.auth import AdminKey, AnyKey
from sleuth.api.errors import ApiError
from sleuth.api.state import ApiState, api_state
from sleuth.compile.sources import UnsafePath, safe_join
from sleuth.errors import Failed
from sleuth.store.home import ContextNotFound
from sleuth.store.tasks import (
    STATES,
    TERMINAL_STATES,
    TaskNotFound,
    TaskStore,
    bound_output,
    runtime_seconds,
)

log = logging.getLogger("sleuth.api.tasks")

DEFAULT_WORKERS = 2
DEFAULT_STOP_TIMEOUT_S = 30.0
PROGRESS_WRITE_INTERVAL_S = 0.5  # a compile advances per source and per batch: write at most this often
#: `GET /tasks` cuts each output to this much JSON (`truncated: true`), so a page of 1,000 tasks stays
#: bounded; `GET /tasks/{id}` returns the whole stored output (itself bounded by the task store).
LIST_OUTPUT_BYTES = 16 * 1024
_SERVICE_KEY = "sleuth_tasks"
_service_lock = threading.Lock()


def iso(epoch: float | None) -> str | None:
    """RFC 3339 UTC, the format of every `*_at` field (api.md §1)."""
    if epoch is None:
        return None
    return datetime.fromtimestamp(epoch, UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


# --- jobs and their handle ------------------------------------------------------------------------


class TaskCancelled(Failed):
    """Raised inside a job at its next check once a stop was requested."""


class TaskHandle:
    """What a running job sees: cancellation, progress by phase, steps and a partial output.

    It implements the compiler's `Progress` protocol (`start`, `advance`, `finish`); each call first
    checks for a cancel, so a long compile stops at its next step. Progress is written to the store
    at phase boundaries and at most every `PROGRESS_WRITE_INTERVAL_S` in between.
    """

    def __init__(self, store: TaskStore, task_id: str, phases: Sequence[str], files_dir: Path) -> None:
        self.store = store
        self.task_id = task_id
        self.phases = list(phases)
        self.files_dir = files_dir
        self.output: Any = None  # kept when the job fails or is cancelled half-way
        self.cancel_message = "cancelled"
        self._cancel = threading.Event()
        self._steps: list[dict[str, Any]] = []
        self._phase: str | None = None
        self._done_phases: set[str] = set()
        self._total = 0
        self._count = 0
        self._began = time.monotonic()
        self._last_write = 0.0

    # cancellation
    def request_cancel(self, message: str) -> None:
        self.cancel_message = message
        self._cancel.set()

    @property
    def cancelled(self) -> bool:
        return self._cancel.is_set()

    def check(self) -> None:
        if self._cancel.is_set():
            raise TaskCancelled(self.cancel_message)

    # Progress protocol
    def start(self, phase: str, total: int) -> None:
        self.check()
        if phase not in self.phases:
            self.phases.append(phase)
        self._close_step("completed")
        self._phase, self._total, self._count = phase, max(0, total), 0
        self._steps.append(
            {
                "step_id": str(len(self._steps) + 1),
                "status": "running",
                "type": phase,
                "commentary": f"{phase}: 0/{total}",
                "path": None,
            }
        )
        self._write(force=True)

    def advance(self, phase: str, amount: int = 1) -> None:
        self.check()
        if phase == self._phase:
            self._count += amount
            self._write()

    def finish(self, phase: str) -> None:
        self.check()
        if phase == self._phase:
            self._count = self._total
        self._done_phases.add(phase)
        self._close_step("completed")
        self._write(force=True)

    # reporting
    def progress(self, final_pct: float | None = None) -> dict[str, Any]:
        phases = self.phases or ([self._phase] if self._phase else [])
        if final_pct is not None:
            pct = final_pct
        elif not phases:
            pct = 0.0
        else:
            done = sum(1 for p in phases if p in self._done_phases)
            fraction = 0.0
            if self._phase is not None and self._phase not in self._done_phases and self._total:
                fraction = min(1.0, self._count / self._total)
            pct = min(99.0, 100.0 * (done + fraction) / len(phases))
        elapsed = time.monotonic() - self._began
        eta = round(elapsed * (100 - pct) / pct, 1) if 0 < pct < 100 else (0.0 if pct >= 100 else None)
        label = None
        if self._phase is not None:
            label = f"{self._phase} {self._count}/{self._total}" if self._total else self._phase
        return {
            "phase": self._phase,
            "phases": phases,
            "label": label,
            "pct": round(pct, 1),
            "eta_seconds": eta,
        }

    def steps(self, end_status: str | None = None) -> list[dict[str, Any]]:
        if end_status is not None:
            self._close_step(end_status)
        return [dict(s) for s in self._steps]

    def _close_step(self, status: str) -> None:
        if self._steps and self._steps[-1]["status"] == "running":
            step = self._steps[-1]
            step["status"] = status
            total = self._total
            step["commentary"] = f"{step['type']}: {self._count}/{total}" if total else step["commentary"]

    def _write(self, force: bool = False) -> None:
        now = time.monotonic()
        if not force and now - self._last_write < PROGRESS_WRITE_INTERVAL_S:
            return
        self._last_write = now
        if self._steps and self._steps[-1]["status"] == "running" and self._total:
            self._steps[-1]["commentary"] = f"{self._phase}: {self._count}/{self._total}"
        self.store.report(self.task_id, progress=self.progress(), steps=self.steps())


Job = Callable[[TaskHandle], Any]


@dataclass
class _Live:
    handle: TaskHandle
    done: threading.Event = field(default_factory=threading.Event)


class TaskStopTimeout(Failed):
    """A task did not stop within the wait (`504 task_stop_timeout`)."""


class TaskService:
    """The bounded worker pool and the registry of live tasks of one server."""

    def __init__(self, store: TaskStore, files_root: Path, workers: int, stop_timeout_s: float) -> None:
        self.store = store
        self.files_root = files_root
        self.stop_timeout_s = stop_timeout_s
        self._pool = ThreadPoolExecutor(max_workers=max(1, workers), thread_name_prefix="sleuth-task")
        self._live: dict[str, _Live] = {}
        self._lock = threading.Lock()
        self._claim = threading.Lock()
        self._closed = False

    def files_dir(self, task_id: str) -> Path:
        return self.files_root / task_id / "files"

    @contextlib.contextmanager
    def claiming(self) -> Iterator[None]:
        """Held while a route checks for a conflicting task and records its own, so two requests
        cannot both pass the check."""
        with self._claim:
            yield

    def submit(self, task: dict[str, Any], job: Job, phases: Sequence[str] = ()) -> None:
        """Run `job` for the scheduled `task` on the pool."""
        task_id = task["id"]
        handle = TaskHandle(self.store, task_id, phases, self.files_dir(task_id))
        live = _Live(handle)
        with self._lock:
            if self._closed:
                self.store.finish(task_id, "failed", error="server stopping")
                return
            self._live[task_id] = live
        self._pool.submit(self._run, task_id, job, live)

    def _run(self, task_id: str, job: Job, live: _Live) -> None:
        handle = live.handle
        try:
            if not self.store.start(task_id):
                return  # cancelled while it waited
            handle.check()
            output = job(handle)
            self.store.finish(
                task_id,
                "completed",
                output=output,
                progress=handle.progress(100.0),
                steps=handle.steps("completed"),
            )
        except TaskCancelled:
            self.store.finish(
                task_id,
                "cancelled",
                output=handle.output,
                error=handle.cancel_message,
                progress=handle.progress(),
                steps=handle.steps("cancelled"),
            )
        except Exception as exc:
            log.exception("task %s failed", task_id)
            self.store.finish(
                task_id,
                "failed",
                output=handle.output,
                error=str(exc) or type(exc).__name__,
                progress=handle.progress(),
                steps=handle.steps("failed"),
            )
        finally:
            live.done.set()
            with self._lock:
                self._live.pop(task_id, None)

    def stop(self, task_id: str, reason: str | None = None, timeout_s: float | None = None) -> dict[str, Any]:
        """Cancel and wait (blocking: call from a worker thread). A terminal task is returned as is;
        `TaskStopTimeout` if it is still live after the wait."""
        task = self.store.request_stop(task_id, reason)
        if task["state"] in TERMINAL_STATES:
            return task
        with self._lock:
            live = self._live.get(task_id)
        if live is not None:
            live.handle.request_cancel(task["error"] or "cancelled")
            wait = self.stop_timeout_s if timeout_s is None else timeout_s
            if not live.done.wait(wait):
                raise TaskStopTimeout(f"task {task_id} did not stop within {wait:g} s")
        else:  # not ours (another process or lost): it can never report back
            self.store.finish(task_id, "cancelled", error=task["error"])
        return self.store.require(task_id)

    def stop_all(self, task_ids: Sequence[str], reason: str, timeout_s: float | None = None) -> None:
        """Cancel several tasks, then wait for them together within one timeout."""
        deadline = time.monotonic() + (self.stop_timeout_s if timeout_s is None else timeout_s)
        waits: list[tuple[str, _Live]] = []
        for task_id in task_ids:
            task = self.store.request_stop(task_id, reason)
            if task["state"] in TERMINAL_STATES:
                continue
            with self._lock:
                live = self._live.get(task_id)
            if live is None:
                self.store.finish(task_id, "cancelled", error=task["error"])
                continue
            live.handle.request_cancel(task["error"] or "cancelled")
            waits.append((task_id, live))
        for task_id, live in waits:
            if not live.done.wait(max(0.0, deadline - time.monotonic())):
                raise TaskStopTimeout(f"task {task_id} did not stop within {self.stop_timeout_s:g} s")

    def close(self, wait_s: float = 5.0) -> None:
        """Server shutdown: cancel what is queued or running and give running jobs a moment to stop;
        anything still live is failed as `server restarted` at the next start."""
        with self._lock:
            self._closed = True
            live = list(self._live.items())
        for _task_id, item in live:
            item.handle.request_cancel("cancelled: server stopping")
        self._pool.shutdown(wait=False, cancel_futures=True)
        deadline = time.monotonic() + wait_s
        for task_id, item in live:
            if not item.done.wait(max(0.0, deadline - time.monotonic())):
                log.warning("task %s still running at shutdown", task_id)
        for task_id, _item in live:  # queued jobs the pool dropped
            task = self.store.get(task_id)
            if task is not None and task["state"] == "scheduled":
                self.store.finish(task_id, "cancelled", error="cancelled: server stopping")
        self.store.close()


def service_for_app(app: FastAPI) -> TaskService:
    """The app's `TaskService`, made on first use: it opens the task table next to the server
    database and fails the tasks a previous process left live (api.md §7.1)."""
    service: TaskService | None = getattr(app.state, _SERVICE_KEY, None)
    if service is not None:
        return service
    with _service_lock:
        service = getattr(app.state, _SERVICE_KEY, None)
        if service is None:
            state: ApiState = app.state.sleuth
            store = TaskStore(state.db.path)
            recovered = store.recover_interrupted()
            if recovered:
                log.warning("marked %d interrupted task(s) failed: server restarted", recovered)
            service = TaskService(
                store,
                state.home.root / "tasks",
                workers=state.settings.task_workers,
                stop_timeout_s=state.settings.task_stop_timeout_s,
            )
            setattr(app.state, _SERVICE_KEY, service)
    return service


def task_service(request: Request) -> TaskService:
    return service_for_app(request.app)


@asynccontextmanager
async def lifespan(app: FastAPI) -> AsyncIterator[None]:
    """Start the task service with the server (recovering interrupted tasks) and stop it with it.
    The router is mounted twice (`/api`, `/api/v0`), so both steps are idempotent."""
    service_for_app(app)
    try:
        yield
    finally:
        with _service_lock:
            service: TaskService | None = getattr(app.state, _SERVICE_KEY, None)
            if service is not None:
                delattr(app.state, _SERVICE_KEY)
        if service is not None:
            service.close()


# --- the Task object ------------------------------------------------------------------------------


def task_json(state: ApiState, task: dict[str, Any], with_steps: bool = False) -> dict[str, Any]:
    """The Task object of api.md §7.1 (`steps` on `GET /tasks/{id}` only)."""
    timeout = task["timeout_seconds"]
    body: dict[str, Any] = {
        "id": task["id"],
        "project_id": state.settings.project_id,
        "context_id": task["context_id"],
        "context_slug": task["context_slug"],
        "created_by": task["created_by"],
        "workflow": task["workflow"],
        "state": task["state"],
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


def _require_task(service: TaskService, task_id: str) -> dict[str, Any]:
    try:
        return service.store.require(task_id)
    except TaskNotFound:
        raise ApiError(404, "task_not_found", f"no task {task_id!r}", task_id=task_id) from None


# --- routes ---------------------------------------------------------------------------------------

router = APIRouter(tags=["tasks"], lifespan=lifespan)


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
    if who.contexts is not None:  # a key limited to contexts lists only their tasks (api.md §3.1)
        names = sorted(who.contexts) if names is None else [n for n in names if who.sees_context(n)]
    start = offset if offset is not None else (page - 1) * limit
    items, total = service.store.page(
        workflow=workflow, state=state, context=names, q=q, limit=limit, offset=start
    )
    return {
        "items": [
            task_json(api, t) | {"output": bound_output(t["output"], LIST_OUTPUT_BYTES)} for t in items
        ],
        "total": total,
        "limit": limit,
        "offset": start,
        "page": start // limit + 1,
        "pages": (total + limit - 1) // limit,
    }


@router.get("/tasks/{task_id}")
def get_task(request: Request, task_id: str, _who: AnyKey) -> dict[str, Any]:
    return task_json(api_state(request), _require_task(task_service(request), task_id), with_steps=True)


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
def list_task_files_root(request: Request, task_id: str, _who: AnyKey) -> dict[str, Any]:
    return list_task_files(request, task_id, "", _who)


@router.get("/tasks/{task_id}/files/list/{path:path}")
def list_task_files(request: Request, task_id: str, path: str, _who: AnyKey) -> dict[str, Any]:
    service = task_service(request)
    _require_task(service, task_id)
    return dir_listing(service.files_dir(task_id), path, missing_root_is_empty=True)


@router.get("/tasks/{task_id}/files/read/{path:path}")
def read_task_file(request: Request, task_id: str, path: str, _who: AnyKey) -> FileResponse:
    service = task_service(request)
    _require_task(service, task_id)
    target = resolve_file(service.files_dir(task_id), path)
    size = target.stat().st_size
    return file_response(target, {"x-nexus-file-size": str(size), "x-nexus-stale": "false"})


@router.get("/tasks/{task_id}/files/metadata/{path:path}")
def task_file_metadata(request: Request, task_id: str, path: str, _who: AnyKey) -> dict[str, Any]:
    service = task_service(request)
    _require_task(service, task_id)
    target = resolve_file(service.files_dir(task_id), path)
    st = target.stat()
    return {
        "path": path,
        "size": st.st_size,
        "mtime": iso(st.st_mtime),
        "content_type": guess_type(target.name),
    }


# --- file trees (shared with the context routes) --------------------------------------------------


def resolve_in(root: Path, path: str) -> Path:
    """`root/path` for a request path: `400 unsafe_path` for anything that could leave `root`."""
    try:
        return safe_join(root, path)
    except UnsafePath as exc:
        raise ApiError(400, "unsafe_path", str(exc), field="path") from None


def resolve_file(root: Path, path: str) -> Path:
    target = resolve_in(root, path)
    if not target.is_file() or target.is_symlink():
        raise ApiError(404, "path_not_found", f"no file {path!r}", path=path)
    return target


def guess_type(name: str) -> str:
    """`Content-Type` from the name; the knowledge tree's own formats first (mimetypes lacks them)."""
    if name.endswith(".md"):
        return "text/markdown"
    if name.endswith(".jsonl"):
        return "application/x-ndjson"
    kind, _ = mimetypes.guess_type(name)
    return kind or "application/octet-stream"


def file_response(target: Path, headers: dict[str, str] | None = None) -> FileResponse:
    """Raw bytes with a guessed `Content-Type` and `Content-Length` (FileResponse streams from disk)."""
    return FileResponse(target, media_type=guess_type(target.name), headers=headers)


EMPTY_LISTING: dict[str, Any] = {"entries": [], "total": 0, "offset": 0, "limit": 0, "next_offset": None}


def _hidden(name: str) -> bool:
    """Files a listing never shows: partial writes of an upload in progress."""
    return name.endswith(".partial")


def dir_listing(root: Path, path: str, missing_root_is_empty: bool = False) -> dict[str, Any]:
    """`DirListing` of one directory (api.md §6.2): the whole directory in one page."""
    if path.strip("/") == "":
        directory = root
        if not directory.is_dir():
            if missing_root_is_empty:
                return EMPTY_LISTING.copy()
            raise ApiError(404, "path_not_found", "no such directory", path=path)
    else:
        directory = resolve_in(root, path)
        if not directory.is_dir() or directory.is_symlink():
            raise ApiError(404, "path_not_found", f"no directory {path!r}", path=path)
    entries: list[dict[str, Any]] = []
    with os.scandir(directory) as scan:
        for entry in scan:
            if entry.is_symlink() or _hidden(entry.name):
                continue
            st = entry.stat()
            if entry.is_dir():
                entries.append({"name": entry.name, "kind": "dir", "size": 0, "mtime": iso(st.st_mtime)})
            elif entry.is_file():
                entries.append(
                    {"name": entry.name, "kind": "file", "size": st.st_size, "mtime": iso(st.st_mtime)}
                )
    entries.sort(key=lambda e: (e["kind"] != "dir", e["name"]))
    return {
        "entries": entries,
        "total": len(entries),
        "offset": 0,
        "limit": len(entries),
        "next_offset": None,
    }


def walk_files(root: Path) -> Iterator[tuple[str, os.stat_result]]:
    """Every regular file under `root` (no symlinks, no partial writes) as (POSIX path, stat)."""
    if not root.is_dir():
        return
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames.sort()
        base = Path(dirpath)
        for name in sorted(filenames):
            full = base / name
            if _hidden(name) or full.is_symlink():
                continue
            yield full.relative_to(root).as_posix(), full.stat()


def tree_stats(root: Path) -> dict[str, int]:
    """`{file_count, dir_count, total_size}` of a tree."""
    files = dirs = size = 0
    if root.is_dir():
        for dirpath, dirnames, filenames in os.walk(root):
            dirs += sum(1 for d in dirnames if not (Path(dirpath) / d).is_symlink())
            for name in filenames:
                full = Path(dirpath) / name
                if _hidden(name) or full.is_symlink():
                    continue
                files += 1
                size += full.stat().st_size
    return {"file_count": files, "dir_count": dirs, "total_size": size}
