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

from typing import Any

from fastapi import APIRouter, Request
from pydantic import Field

from sleuth.api.auth import AdminKey, AnyKey
from sleuth.api.errors import ApiError
from sleuth.api.state import api_state, task_service
from sleuth.compile.connectors import registry
from sleuth.compile.connectors.base import ConnectorConfigError, ConnectorError
from sleuth.compile.connectors.configs import KIND_SPECS
from sleuth.server.access import Principal
from sleuth.server.connectors import connector_of, entry_of, start_sync
from sleuth.server.context_files import (
    EXCLUSIVE_WORKFLOWS,
    StrictBody,
    conflict_check,
    find_context,
)
from sleuth.server.state import Server
from sleuth.store.contexts.home import ContextDir
from sleuth.store.records.secrets import SecretBox

router = APIRouter()


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


def _checked(
    state: Server, ctx: ContextDir, body: ConnectorBody, old: registry.ConnectorEntry | None
) -> registry.ConnectorEntry:
    """The entry `body` describes, its configuration built once to check it; 400 with the reason."""
    try:
        registry.check_name(body.name)
        every = registry.parse_every(body.every)
        sealed = SecretBox(state.home.root).seal(body.secret) if body.secret else (old.secret if old else "")
        entry = registry.ConnectorEntry(body.name, body.kind, body.config, every, sealed)
        connector_of(
            state.home, ctx, entry, state.settings, adding=True
        )  # a folder must be there when it is added
    except ConnectorConfigError as exc:
        raise ApiError(400, "invalid_request", str(exc), field="config") from None
    except ConnectorError as exc:
        raise ApiError(400, "connector_refused", str(exc), field="config") from None
    if old is not None:
        entry.created_at, entry.last_sync, entry.last_error = old.created_at, old.last_sync, old.last_error
    return entry


@router.get("/connectors")
def list_kinds(_who: AnyKey) -> dict[str, Any]:
    """Each kind, its configuration's fields (with what each means and its type for a form) and its
    credentials, from the one declaration of each kind (`compile/connectors/configs.py`)."""
    return {"kinds": [{"kind": kind, **spec.describe()} for kind, spec in KIND_SPECS.items()]}


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
        entries[name] = _checked(state, ctx, body, entry_of(ctx, name))
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
            entry_of(ctx, name)
            registry.remove(ctx, name)
    return {"deleted": True, "connector": name}


@router.post("/contexts/{slug}/import")
def import_from_connector(request: Request, slug: str, body: ImportBody, who: AdminKey) -> dict[str, Any]:
    state = api_state(request)
    ctx = find_context(state, slug)
    task = start_sync(state, task_service(request), ctx, body.connector, who.name, body.curate, "api")
    return {"task_id": task["id"], "state": "importing"}
