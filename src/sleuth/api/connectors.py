"""Routes: connectors (issue 27): sources that stay in sync with a folder, a git repository or a bucket.

- `GET /connectors` → the kinds this server has, with their configuration fields;
- `GET /contexts/{slug}/connectors` → the context's connectors, each with its last sync's counts or error
  (never its credentials: `has_secret` only); a query key gets each one's name, kind and status only
  (`visible_to`): a URL, a folder, a bucket or an error message is the operator's, not an agent's;
- `POST /contexts/{slug}/connectors` `{name, kind, config, secret?, every?}` → add one (checked at once:
  the folder allow list, the address guard), `PUT …/{name}` replaces it, `DELETE …/{name}` removes it and
  the files it brought (the next curate drops them);
- a connector with `every` is synced on that schedule by `ConnectorSchedule` (each server ticks every
  30 s; the first scheduled sync comes one period after it was added, each next one a period after the
  last attempt, whether it succeeded or failed, however it failed);
- `POST /contexts/{slug}/import` `{connector, curate?: true}` → an `import` task that syncs it: new and
  changed items fetched, items gone deleted; then, when anything changed, a curate (incremental).

A connector's credentials are sealed (`store.secrets`); every sync is bounded (`SLEUTH_CONNECTOR_MAX_*`).
"""

from __future__ import annotations

import datetime
import logging
import threading
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from fastapi import APIRouter, FastAPI, Request
from pydantic import Field

from sleuth.api.auth import AdminKey, AnyKey, Principal
from sleuth.api.context_files import (
    EXCLUSIVE_WORKFLOWS,
    StrictBody,
    conflict_check,
    find_context,
    has_sources,
    update_extra,
)
from sleuth.api.curation import _start_curate
from sleuth.api.errors import ApiError
from sleuth.api.state import ApiState, api_state
from sleuth.api.task_service import TaskHandle, TaskService, service_for_app, task_service
from sleuth.compile.connectors import registry
from sleuth.compile.connectors.base import Connector, ConnectorConfigError, ConnectorError, Limits
from sleuth.compile.connectors.kinds import KINDS, build
from sleuth.compile.connectors.sync import sync
from sleuth.errors import Error
from sleuth.store.home import ContextDir, now_iso
from sleuth.store.secrets import SecretBox

log = logging.getLogger(__name__)
SCHEDULE_TICK_S = 30.0


class ConnectorSchedule:
    """Syncs on a schedule (`every`): each tick, every connector whose period has passed since its last
    attempt (or since it was added) gets a sync task, as `POST /contexts/{slug}/import` would start it.
    On many machines each server ticks; the task claim lets one of them start a given sync and the
    others see it running (409) and skip it."""

    def __init__(self, state: ApiState, service: TaskService, tick_s: float = SCHEDULE_TICK_S) -> None:
        self.state, self.service, self.tick_s = state, service, tick_s
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="sleuth-connector-schedule", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()

    def _run(self) -> None:
        while not self._stop.wait(self.tick_s):
            try:
                self.run_once()
            except Exception:  # a tick that failed is logged; the next one tries again
                log.exception("connector schedule: a tick failed")

    def run_once(self, now: float | None = None) -> list[str]:
        """Start the syncs that are due; the ids of the tasks started. A connector that cannot even be
        started (anything but a busy context) has that recorded as its attempt, so it waits a period
        like a failed sync, and the connectors after it still get their turn."""
        moment = time.time() if now is None else now
        started = []
        for ctx, info in self.state.home.contexts():
            try:
                entries = list(registry.load(ctx).values())
            except Exception:  # an unreadable connectors.json: the other contexts still sync
                log.exception("connector schedule: the connectors of %s cannot be read", info.slug)
                continue
            for entry in entries:
                since = entry.last_attempt_at or entry.created_at
                if entry.every_s is None or moment - _epoch(since) < entry.every_s:
                    continue
                try:
                    task = start_sync(self.state, self.service, ctx, entry.name, "schedule", True, "schedule")
                except ApiError as exc:  # busy (a curate, another import): the next tick tries again
                    log.info("connector %s/%s: not synced now: %s", info.slug, entry.name, exc.message)
                    continue
                except Exception as exc:
                    log.exception("connector %s/%s: the sync could not start", info.slug, entry.name)
                    _record_failure(ctx, entry.name, now_iso(), exc)
                    continue
                started.append(str(task["id"]))
        return started


def _epoch(iso: str) -> float:
    return datetime.datetime.fromisoformat(iso.replace("Z", "+00:00")).timestamp()


#: The most of a failure's message kept in `last_error`.
ERROR_CHARS = 1000


def failure_text(exc: BaseException) -> str:
    """What a failed sync keeps in `last_error`: Sleuth's own errors in their words, anything else (a
    client library's, the disk's, a bug) with its type, so a person can tell them apart."""
    text = str(exc) if isinstance(exc, Error) else f"{type(exc).__name__}: {exc}"
    return text[:ERROR_CHARS] or type(exc).__name__


def _record_failure(ctx: ContextDir, name: str, attempt: str, exc: BaseException) -> None:
    """Record a failed attempt; a failure to record it is logged (the schedule must go on)."""
    try:
        registry.record(ctx, name, attempt, None, failure_text(exc))
    except Exception:
        log.exception("connector %s: its failure could not be recorded", name)


@asynccontextmanager
async def schedule_lifespan(app: FastAPI) -> AsyncIterator[None]:
    """One schedule per server (the router is mounted twice: the second start finds it running)."""
    schedule: ConnectorSchedule | None = getattr(app.state, "connector_schedule", None)
    if schedule is None:
        schedule = ConnectorSchedule(app.state.sleuth, service_for_app(app))
        app.state.connector_schedule = schedule
        schedule.start()
    try:
        yield
    finally:
        schedule.stop()


router = APIRouter(lifespan=schedule_lifespan)

KIND_FIELDS: dict[str, dict[str, Any]] = {
    "folder": {
        "description": "Files below a folder of the server (a mounted share included), polled.",
        "config": {
            "path": "absolute path, below a folder SLEUTH_CONNECTOR_FOLDERS allows",
            "include": "globs",
        },
        "secret": {},
    },
    "git": {
        "description": "A branch or tag of a git repository; only changed files are fetched again.",
        "config": {
            "url": "https:// (or file:// where allowed)",
            "ref": "branch or tag (main)",
            "include": "globs",
        },
        "secret": {},
    },
    "web": {
        "description": "Web pages: URLs, a sitemap, or the links below a prefix; robots.txt honoured.",
        "config": {
            "urls": "page URLs",
            "sitemap": "a sitemap URL",
            "prefix": "follow links below it",
            "max_pages": "200",
            "delay_s": "1.0 between requests to one host",
        },
        "secret": {},
    },
    "s3": {
        "description": "Objects below a prefix of an S3-compatible bucket; etags say what changed.",
        "config": {
            "bucket": "name",
            "prefix": "key prefix",
            "endpoint_url": "for non-AWS",
            "region": "region",
        },
        "secret": {
            "access_key_id": "without keys: public buckets only, unsigned (unless the operator allows "
            "this machine's AWS credentials: SLEUTH_CONNECTOR_S3_INSTANCE_CREDENTIALS)",
            "secret_access_key": "",
            "session_token": "optional",
        },
    },
}


class ConnectorBody(StrictBody):
    name: str = Field(min_length=1, max_length=63)
    kind: str = Field(min_length=1, max_length=32)
    config: dict[str, Any] = Field(default_factory=dict)
    secret: dict[str, str] | None = Field(None, description="Credentials: sealed, never returned.")
    every: str | float | None = Field(
        None, description="Sync on a schedule: 30m, 1h, 1d (at least a minute)."
    )


class ImportBody(StrictBody):
    connector: str = Field(min_length=1, max_length=63)
    curate: bool = True


def _workdir(ctx: ContextDir) -> Path:
    return ctx.root / "connectors" / "cache"


def _connector(
    state: ApiState, ctx: ContextDir, entry: registry.ConnectorEntry, *, adding: bool = False
) -> Connector:
    secret = SecretBox(state.home.root).open(entry.secret)
    return build(
        entry.kind, entry.config, secret, state.settings, _workdir(ctx), adding=adding, home=state.home.root
    )


def _checked(
    state: ApiState, ctx: ContextDir, body: ConnectorBody, old: registry.ConnectorEntry | None
) -> registry.ConnectorEntry:
    """The entry `body` describes, its configuration built once to check it; 400 with the reason."""
    try:
        registry.check_name(body.name)
        every = registry.parse_every(body.every)
        sealed = SecretBox(state.home.root).seal(body.secret) if body.secret else (old.secret if old else "")
        entry = registry.ConnectorEntry(body.name, body.kind, body.config, every, sealed)
        _connector(state, ctx, entry, adding=True)  # a folder must be there when it is added
    except ConnectorConfigError as exc:
        raise ApiError(400, "invalid_request", str(exc), field="config") from None
    except ConnectorError as exc:
        raise ApiError(400, "connector_refused", str(exc), field="config") from None
    if old is not None:
        entry.created_at, entry.last_sync, entry.last_error = old.created_at, old.last_sync, old.last_error
    return entry


def _entry(ctx: ContextDir, name: str) -> registry.ConnectorEntry:
    entry = registry.load(ctx).get(name)
    if entry is None:
        raise ApiError(404, "connector_not_found", f"no connector {name!r} in this context", connector=name)
    return entry


@router.get("/connectors")
def list_kinds(_who: AnyKey) -> dict[str, Any]:
    return {"kinds": [{"kind": k, **KIND_FIELDS[k]} for k in KINDS]}


def visible_to(who: Principal, entry: registry.ConnectorEntry) -> dict[str, Any]:
    """A connector as `who` may see it. An admin: all but its credentials (`public`). A query key: its
    name, kind, schedule and status (`never`, `ok`, `failed`) and when it last ran, since an agent may
    want to know how fresh a folder of sources is; not its configuration (a URL, a folder, a bucket),
    its last sync's details or its error, which name what only the operator should know."""
    if who.is_admin:
        return entry.public()
    status = "never" if entry.last_attempt_at is None else "failed" if entry.last_error else "ok"
    return {
        "name": entry.name,
        "kind": entry.kind,
        "every_s": entry.every_s,
        "status": status,
        "last_attempt_at": entry.last_attempt_at,
    }


@router.get("/contexts/{slug}/connectors")
def list_connectors(request: Request, slug: str, who: AnyKey) -> dict[str, Any]:
    ctx = find_context(api_state(request), slug)
    return {"connectors": [visible_to(who, e) for e in registry.load(ctx).values()]}


@router.post("/contexts/{slug}/connectors")
def add_connector(request: Request, slug: str, body: ConnectorBody, _who: AdminKey) -> dict[str, Any]:
    state = api_state(request)
    ctx = find_context(state, slug)
    with ctx.editing():
        entries = registry.load(ctx)
        if body.name in entries:
            raise ApiError(
                409, "connector_exists", f"a connector named {body.name!r} exists", connector=body.name
            )
        if len(entries) >= registry.MAX_CONNECTORS:
            raise ApiError(
                409, "connector_limit", f"a context has at most {registry.MAX_CONNECTORS} connectors"
            )
        entries[body.name] = _checked(state, ctx, body, None)
        registry.save(ctx, entries)
    return entries[body.name].public()


@router.put("/contexts/{slug}/connectors/{name}")
def replace_connector(
    request: Request, slug: str, name: str, body: ConnectorBody, _who: AdminKey
) -> dict[str, Any]:
    state = api_state(request)
    ctx = find_context(state, slug)
    if body.name != name:
        raise ApiError(400, "invalid_request", "a connector's name cannot change", field="name")
    with ctx.editing():
        entries = registry.load(ctx)
        entries[name] = _checked(state, ctx, body, _entry(ctx, name))
        registry.save(ctx, entries)
    return entries[name].public()


@router.delete("/contexts/{slug}/connectors/{name}")
def delete_connector(request: Request, slug: str, name: str, _who: AdminKey) -> dict[str, Any]:
    """Remove the connector and the files it brought; the next curate drops them from the context."""
    state, service = api_state(request), task_service(request)
    ctx = find_context(state, slug)
    with service.claiming():
        conflict_check(service, ctx, EXCLUSIVE_WORKFLOWS)
        with ctx.editing():
            _entry(ctx, name)
            registry.remove(ctx, name)
    return {"deleted": True, "connector": name}


def start_sync(
    state: ApiState, service: TaskService, ctx: ContextDir, name: str, who: str, curate: bool, trigger: str
) -> dict[str, Any]:
    """An `import` task that syncs connector `name`, then curates when anything changed. Refused
    (409) while a curate, restore, pack or another import of the context runs."""
    entry = _entry(ctx, name)
    info = ctx.info()
    with service.claiming():
        conflict_check(service, ctx, (*EXCLUSIVE_WORKFLOWS, "import"))
        task = service.store.create(
            "import",
            context_id=info.id,
            context_slug=info.slug,
            created_by=who,
            input={"connector": name, "kind": entry.kind, "curate": curate, "trigger": trigger},
        )

    def job(handle: TaskHandle) -> dict[str, Any]:
        attempt = now_iso()
        try:
            connector = _connector(state, ctx, entry)
            with ctx.editing():
                report = sync(ctx, name, connector, Limits.of(state.settings), stop=handle.check)
        except Exception as exc:  # any failure, not only the connector's own: recorded, so it is seen
            # and the schedule waits a period before the next attempt instead of retrying every tick
            _record_failure(ctx, name, attempt, exc)
            raise
        registry.record(ctx, name, attempt, report.to_json(), None)
        update_extra(ctx, last_source_import_at=now_iso())
        output: dict[str, Any] = {"connector": name, "summary": report.summary, **report.to_json()}
        changed = report.added or report.changed or report.deleted
        if curate and changed and has_sources(ctx):
            curate_task = _start_curate(state, service, ctx, who, {"trigger": "connector", "connector": name})
            output["curate_task_id"] = curate_task["id"]
        return output

    service.submit(task, job, phases=("sync",))
    return task


@router.post("/contexts/{slug}/import")
def import_from_connector(request: Request, slug: str, body: ImportBody, who: AdminKey) -> dict[str, Any]:
    state = api_state(request)
    ctx = find_context(state, slug)
    task = start_sync(state, task_service(request), ctx, body.connector, who.name, body.curate, "api")
    return {"task_id": task["id"], "state": "importing"}
