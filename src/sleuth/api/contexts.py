"""Routes: contexts (spec/api.md §6.1) and their manifest and task stats. `router` is the one `app.py`
mounts: it carries the task routes of §7.1 and the routers of the other context modules (sources,
curation, knowledge, pack and restore, manifest templates), in that order.

The routes reuse the compiler's pieces instead of re-implementing them: `Home` for contexts,
`parse_manifest` for validation, `safe_relative_path`/`safe_join` for every path a request names, and
`CompileRun` under `curate_lock` for curation, run as a background task (api/tasks.py). Blocking work
(file copies, tree walks, deletes) runs in worker threads: plain `def` routes run in FastAPI's thread
pool, and the `async` routes (uploads, which stream the multipart body) hand their disk work to
`run_in_threadpool`.

A key limited to contexts sees only those (spec/api.md §3.1): `router` carries `access.context_guard`, so
every route on it (these, the task routes and those of the other context modules) treats any other
context, and its tasks, as absent; the list of contexts leaves them out.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Any

from fastapi import APIRouter, Depends, Request
from pydantic import Field

from sleuth.api import connectors, curation, knowledge, packs, page_viewer, sources, tables, tasks, templates
from sleuth.api.access import context_guard
from sleuth.api.auth import AdminKey, AnyKey
from sleuth.api.errors import ApiError
from sleuth.api.state import api_state, task_service
from sleuth.compile.version_files import version_counts
from sleuth.server.context_files import (
    StrictBody,
    find_context,
    has_sources,
    manifest_or_400,
    read_extra,
    tree_lock,
    update_extra,
)
from sleuth.server.state import Server
from sleuth.server.task_service import TaskService, TaskStopTimeout
from sleuth.store.contexts.home import ContextDir, ContextNotFound, InvalidSlug, check_slug, now_iso
from sleuth.store.contexts.lock import CurateInFlight, curate_lock
from sleuth.store.contexts.replica import SlugTaken
from sleuth.store.files import write_json_atomic

SLUG_RULE = r"^[a-z][a-z0-9-]*$"

_identity_lock = threading.Lock()  # slug uniqueness across concurrent create/rename

router = APIRouter(tags=["contexts"], dependencies=[Depends(context_guard)])
router.include_router(tasks.router)


class ContextCreate(StrictBody):
    slug: str = Field(min_length=3, max_length=64, pattern=SLUG_RULE)
    name: str = Field(min_length=1, max_length=128)
    description: str | None = Field(None, max_length=2000)
    guide: str | None = Field(None, max_length=8000)
    manifest: Any = None
    kind: str | None = None
    pinecone_api_key: Any = None  # contract field, ignored (§13)


class ContextUpdate(StrictBody):
    slug: str | None = Field(None, min_length=3, max_length=64, pattern=SLUG_RULE)
    name: str | None = Field(None, min_length=1, max_length=128)
    description: str | None = Field(None, max_length=2000)
    guide: str | None = Field(None, max_length=8000)
    manifest: Any = None
    kind: str | None = None
    pinecone_api_key: Any = None


def _check_kind(kind: str | None, create: bool) -> None:
    if kind is None or kind == "search":
        return
    if create and kind == "work":
        raise ApiError(400, "unsupported_context_kind", "Sleuth serves 'search' contexts only", field="kind")
    message = "kind cannot change" if not create else f"kind: unknown kind {kind!r}; use 'search'"
    raise ApiError(400, "invalid_request", message, field="kind")


def _check_slug(slug: str) -> None:
    try:
        check_slug(slug)
    except InvalidSlug as exc:
        raise ApiError(400, "invalid_request", str(exc), field="slug") from None


def _index_name(vdir: Path | None, version: str | None, rel: str) -> str | None:
    return f"local:{version}" if vdir is not None and (vdir / rel).exists() else None


def context_json(
    state: Server, service: TaskService, ctx: ContextDir, with_stats: bool = False
) -> dict[str, Any]:
    """The Context object of spec/api.md §6.1."""
    info = ctx.info()
    extra = read_extra(ctx)
    live = ctx.live_version()
    vdir = ctx.version_dir(live) if live else None
    active = service.store.active(info.id)

    def first(workflow: str) -> str | None:
        return next((t["id"] for t in active if t["workflow"] == workflow), None)

    curate_id, import_id, restore_id = first("curate"), first("import"), first("restore")
    body: dict[str, Any] = {
        "id": info.id,
        "slug": info.slug,
        "name": info.name,
        "kind": "search",
        "description": info.description or None,
        "guide": extra.get("guide") or None,
        "manifest": ctx.manifest_data(),
        "created_by": extra.get("created_by") or "local",
        "created_at": info.created_at,
        "updated_at": info.updated_at,
        "has_sources": has_sources(ctx),
        "is_curating": curate_id is not None,
        "curate_task_id": curate_id,
        "is_importing": import_id is not None,
        "import_task_id": import_id,
        "is_restoring": restore_id is not None,
        "restore_task_id": restore_id,
        "is_optimizing": False,
        "is_exploring": False,
        "is_grooming": False,
        "last_curated_at": info.last_curated_at,
        "last_source_import_at": extra.get("last_source_import_at"),
        "sample_queries": list(info.sample_queries),
        "semantic_index": _index_name(vdir, live, "index/dense/meta.json"),
        "keyword_index": _index_name(vdir, live, "index/keyword")
        or _index_name(vdir, live, "index/keyword.sqlite"),  # a version compiled before tantivy
        "queryable": live is not None,
        "live_version": live,
    }
    if with_stats:
        body["stats"] = service.store.context_stats(info.id) | _version_counts(vdir)
    return body


def _version_counts(vdir: Path | None) -> dict[str, int]:
    """What the live version holds (sources, pages, chunks, artifacts), for a list that says how big
    each context is (issue 26, item 8); empty without a live version."""
    if vdir is None:
        return {}
    counts = version_counts(vdir)
    names = {"sources": "sources_compiled", "pages": "pages", "chunks": "chunks", "artifacts": "artifacts"}
    return {key: int(counts[name]) for key, name in names.items() if isinstance(counts.get(name), int)}


@router.get("/contexts")
def list_contexts(request: Request, who: AnyKey) -> list[dict[str, Any]]:
    """Every context the caller sees, newest first, with `stats`."""
    state, service = api_state(request), task_service(request)
    found: list[dict[str, Any]] = []
    for ctx in _context_dirs(state):
        with suppress(FileNotFoundError):  # deleted while listed
            if not who.limited or who.sees_context(ctx.info().id):
                found.append(context_json(state, service, ctx, with_stats=True))
    return sorted(found, key=lambda c: (c["created_at"], c["id"]), reverse=True)


def _context_dirs(state: Server) -> list[ContextDir]:
    """Every context directory; a scan that raced a delete is retried once."""
    for attempt in range(2):
        try:
            return [ctx for ctx, _info in state.home.contexts()]
        except FileNotFoundError:
            if attempt:
                raise
    return []


@contextmanager
def _slug_exists_as_409(slug: str | None) -> Iterator[None]:
    """A rename another server's context won first (the catalog refuses it as the change is shared)."""
    try:
        yield
    except SlugTaken:
        raise ApiError(409, "slug_exists", f"a context named {slug!r} exists", slug=slug) from None


def _claim_slug(state: Server, slug: str, make: Callable[[], ContextDir]) -> ContextDir:
    """`make()` the context that takes `slug` (the caller holds `_identity_lock`): `409 slug_exists`
    when a context has it already, or another machine's create took it first (`FileExistsError`)."""
    try:
        state.home.find(slug)
    except ContextNotFound:
        pass
    else:
        raise ApiError(409, "slug_exists", f"a context named {slug!r} exists", slug=slug)
    try:
        return make()
    except FileExistsError:
        raise ApiError(409, "slug_exists", f"a context named {slug!r} exists", slug=slug) from None


@router.post("/contexts")
def create_context(request: Request, body: ContextCreate, who: AdminKey) -> dict[str, Any]:
    state, service = api_state(request), task_service(request)
    _check_kind(body.kind, create=True)
    manifest = manifest_or_400({} if body.manifest is None else body.manifest)
    _check_slug(body.slug)
    with _identity_lock:
        ctx = _claim_slug(state, body.slug, lambda: state.home.create(body.slug, body.name))
        with ctx.editing():
            info = ctx.info()
            info.description = body.description or ""
            ctx.save_info(info)
            write_json_atomic(ctx.manifest_file, manifest)
            update_extra(ctx, kind="search", guide=body.guide or None, created_by=who.name)
    return context_json(state, service, ctx)


class ContextFork(StrictBody):
    slug: str = Field(min_length=3, max_length=64, pattern=SLUG_RULE)
    name: str | None = Field(None, min_length=1, max_length=128)


@router.post("/contexts/{slug}/fork")
def fork_context(request: Request, slug: str, body: ContextFork, who: AdminKey) -> dict[str, Any]:
    """A new context that starts as this one is now (sources, manifest, live version, caches), its
    files shared by hard links until either side changes them (`Home.fork`)."""
    state, service = api_state(request), task_service(request)
    source = find_context(state, slug)
    _check_slug(body.slug)
    with _identity_lock:
        fork = _claim_slug(state, body.slug, lambda: state.home.fork(source, body.slug, body.name))
        with fork.editing():
            extra = read_extra(source)
            update_extra(fork, kind="search", guide=extra.get("guide"), created_by=who.name, forked_from=slug)
    return context_json(state, service, fork)


@router.get("/contexts/{slug}")
def get_context(request: Request, slug: str, _who: AnyKey) -> dict[str, Any]:
    state = api_state(request)
    return context_json(state, task_service(request), find_context(state, slug))


@router.put("/contexts/{slug}")
def update_context(request: Request, slug: str, body: ContextUpdate, _who: AdminKey) -> dict[str, Any]:
    """Change the given fields only; `""` clears description or guide, `manifest: {}` resets it."""
    state, service = api_state(request), task_service(request)
    ctx = find_context(state, slug)
    given = body.model_fields_set
    if "kind" in given:
        _check_kind(body.kind, create=False)
    manifest = manifest_or_400(body.manifest) if "manifest" in given and body.manifest is not None else None
    with _identity_lock, _slug_exists_as_409(body.slug), ctx.editing():
        info = ctx.info()
        if body.slug is not None and body.slug != info.slug:
            _check_slug(body.slug)
            try:
                state.home.find(body.slug)
            except ContextNotFound:
                info.slug = body.slug
            else:
                raise ApiError(409, "slug_exists", f"a context named {body.slug!r} exists", slug=body.slug)
        if body.name is not None:
            info.name = body.name
        if body.description is not None:
            info.description = body.description
        info.updated_at = now_iso()
        ctx.save_info(info)
        if manifest is not None:
            write_json_atomic(ctx.manifest_file, manifest)
        if body.guide is not None:
            update_extra(ctx, guide=body.guide or None)
    return context_json(state, service, ctx)


@router.delete("/contexts/{slug}")
def delete_context(request: Request, slug: str, _who: AdminKey) -> dict[str, Any]:
    """Cancel the context's tasks, wait for them and for any outside compile, then remove it all."""
    state, service = api_state(request), task_service(request)
    ctx = find_context(state, slug)
    info = ctx.info()
    deadline = time.monotonic() + service.stop_timeout_s

    def timed_out(what: str) -> ApiError:
        return ApiError(504, "task_stop_timeout", f"{what}; nothing was deleted")

    while True:
        active = [t["id"] for t in service.store.active(info.id)]
        if active:
            try:
                service.stop_all(active, "context deleted", max(0.0, deadline - time.monotonic()))
            except TaskStopTimeout as exc:
                raise timed_out(str(exc)) from None
        # Under the claim no new task can start on the context while its directory goes.
        with service.claiming():
            if not service.store.active(info.id):
                try:
                    with tree_lock(ctx), curate_lock(ctx.lock_file, ctx.info().id, service.store.database):
                        state.home.delete(ctx)
                    break
                except CurateInFlight:
                    pass
        if time.monotonic() >= deadline:
            raise timed_out("a task or a compile of this context is still running")
        time.sleep(0.1)
    return {"deleted": True, "slug": info.slug}


@router.get("/contexts/{slug}/manifest")
def get_manifest(request: Request, slug: str, _who: AnyKey) -> dict[str, Any]:
    """The pinned, sparse manifest as written (`{}` on defaults)."""
    return find_context(api_state(request), slug).manifest_data()


@router.get("/contexts/{slug}/tasks/stats")
def context_task_stats(request: Request, slug: str, _who: AnyKey) -> dict[str, Any]:
    ctx = find_context(api_state(request), slug)
    # A plain object: FastAPI would make a response model (and a new OpenAPI schema) of the TypedDict.
    return dict(task_service(request).store.context_stats(ctx.info().id))


# Mounted after the routes above, in this order: the route order (and the OpenAPI order) is the same
# as when all of these lived in this one module.
router.include_router(sources.router)
router.include_router(curation.router)
router.include_router(knowledge.router)
router.include_router(page_viewer.router)
router.include_router(tables.router)
router.include_router(packs.router)
router.include_router(templates.router)
router.include_router(connectors.router)
