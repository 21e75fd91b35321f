"""What the services and the context routes share: finding a context, `context.extra.json`, the per-context
source-tree lock, the `task_in_flight` check and safe request paths.

The API's own context fields (`kind`, `guide`, `created_by`, `last_source_import_at`) live beside
`context.json` in `context.extra.json`, written atomically. Two files, because they have two writers: a
compile reads `context.json` at its start and saves it at its end, so a guide edited over HTTP while a
curate runs would be lost if it were written into the same file.
"""

from __future__ import annotations

import json
import threading
from pathlib import Path, PurePosixPath
from typing import Any

from pydantic import BaseModel, ConfigDict

from sleuth.compile.manifest import ManifestError, parse_manifest
from sleuth.compile.sources import UnsafePath, safe_relative_path, safe_source_path
from sleuth.errors import ToldConflict, ToldInvalid, ToldNotFound
from sleuth.server.state import Server
from sleuth.server.task_service import TaskService
from sleuth.store.contexts.home import ContextDir, ContextNotFound
from sleuth.store.contexts.lock import CurateInFlight, curate_lock
from sleuth.store.contexts.trees import walk_files
from sleuth.store.files import write_json_atomic

EXTRA_FILE = "context.extra.json"
#: Workflows that write the knowledge tree: one at a time per context (`409 task_in_flight`).
EXCLUSIVE_WORKFLOWS = ("curate", "restore", "pack")

_extra_lock = threading.Lock()  # read-modify-write of context.extra.json
_tree_locks: dict[str, threading.Lock] = {}
_tree_locks_guard = threading.Lock()


def tree_lock(ctx: ContextDir) -> threading.Lock:
    """Per context: a source-tree limit check and the write it allows happen together, and a delete
    never interleaves with them."""
    with _tree_locks_guard:
        return _tree_locks.setdefault(ctx.root.name, threading.Lock())


class StrictBody(BaseModel):
    """Unknown fields are `400 invalid_request`, so a typo never passes silently (spec/api.md §1)."""

    model_config = ConfigDict(extra="forbid")


def find_context(state: Server, slug: str) -> ContextDir:
    """The context by slug or id, or `404 context_not_found`."""
    for attempt in range(2):
        try:
            return state.home.find(slug)
        except ContextNotFound:
            break
        except FileNotFoundError:  # another context was deleted while the home was scanned
            if attempt:
                raise
    raise ToldNotFound("context_not_found", f"no context {slug!r}", slug=slug)


def live_version_dir(ctx: ContextDir) -> Path:
    """The directory of the context's live version, or `409 context_not_curated` before the first flip."""
    live = ctx.live_version()
    if live is None:
        raise ToldConflict("context_not_curated", f"context {ctx.info().slug!r} has no compiled version yet")
    return ctx.version_dir(live)


def read_extra(ctx: ContextDir) -> dict[str, Any]:
    try:
        data: dict[str, Any] = json.loads((ctx.root / EXTRA_FILE).read_text(encoding="utf-8"))
    except (FileNotFoundError, json.JSONDecodeError):
        return {}
    return data


def update_extra(ctx: ContextDir, **changes: Any) -> None:
    with _extra_lock:
        if ctx.info_file.exists():  # never recreate the directory of a deleted context
            write_json_atomic(ctx.root / EXTRA_FILE, {**read_extra(ctx), **changes})


def has_sources(ctx: ContextDir) -> bool:
    return next(walk_files(ctx.sources), None) is not None


def conflict_check(service: TaskService, ctx: ContextDir, workflows: tuple[str, ...]) -> None:
    """`409 task_in_flight` when a conflicting task of this server, or a compile started elsewhere
    (the CLI holds `curate.lock`), is working on the context."""
    busy = service.store.active(ctx.info().id, workflows)
    if busy:
        task_id = busy[0]["id"]
        raise ToldConflict(
            "task_in_flight", f"task {task_id} ({busy[0]['workflow']}) is active", task_id=task_id
        )
    try:
        with curate_lock(ctx.lock_file, ctx.info().id, service.store.database):
            pass
    except CurateInFlight:
        raise ToldConflict(
            "task_in_flight", "a compile started outside this server is running", task_id=None
        ) from None


def safe_rel(name: str, source: bool = False, field: str = "path") -> PurePosixPath:
    """A request path, or `400 unsafe_path` naming `field` (the query parameter or form part the
    name came from); `source=True` for the path a new source is stored at."""
    try:
        return safe_source_path(name) if source else safe_relative_path(name)
    except UnsafePath as exc:
        raise ToldInvalid("unsafe_path", str(exc), field=field) from None


def manifest_or_400(data: Any) -> dict[str, Any]:
    """The manifest as written, or `400 invalid_manifest` listing every problem with its JSON path."""
    try:
        parse_manifest(data)
    except ManifestError as exc:
        errors = []
        for problem in exc.problems:
            path, _, message = problem.partition(": ")
            errors.append({"path": "" if path == "(root)" else path, "message": message or problem})
        raise ToldInvalid(
            "invalid_manifest", f"invalid manifest: {len(errors)} problem(s)", errors=errors
        ) from None
    return dict(data)
