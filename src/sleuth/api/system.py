"""Routes: system (spec/api.md §2, §3.2): `GET /version`, the login exchange, `GET /auth`, `GET /project`.

`/version` reports the sandbox from a probe: one sandbox is forked over a curated context with the
floor lifted, its `ready` message says which layers took effect, and the configured floor is checked
against them here, so a host below the floor is reported with what it lacks instead of an opaque
failure. The probe costs one fork (tens of ms once the zygote runs) and is cached per sandbox host.
"""

from __future__ import annotations

import logging
import threading
import time
import weakref
from dataclasses import replace
from typing import Annotated, Any

from fastapi import APIRouter, Body, Request, Response
from pydantic import BaseModel, ConfigDict

import sleuth
from sleuth.api.auth import LOCAL, AnyKey, presented_credential, principal, unauthenticated
from sleuth.api.errors import ApiError
from sleuth.api.state import api_state
from sleuth.api.versioning import DEFAULT_VERSION, VERSIONS
from sleuth.sandbox.host import SandboxHost
from sleuth.server.state import Server
from sleuth.settings import admin_only
from sleuth.store.keys import TOKEN_PREFIX, KeyStore, new_secret

log = logging.getLogger("sleuth.api")
router = APIRouter()

BACKEND = "zygote"  # spec/sandbox.md §7: the only backend so far
RETRY_FAILED_PROBE_S = 30.0

_probes: weakref.WeakKeyDictionary[SandboxHost, tuple[float, dict[str, Any]]] = weakref.WeakKeyDictionary()
_probe_lock = threading.Lock()


def public_settings(state: Server, admin: bool = True) -> dict[str, Any]:
    """The settings as served (`/version` needs no key): of the database URL only its kind, since a URL
    can carry a password in places that redaction misses (`?password=`), and names hosts besides. A
    caller without an admin key (`admin` false) gets no setting declared admin-only (folders, allow
    lists: they tell how the server is laid out and what it may reach)."""
    settings = state.settings.model_dump()
    if not admin:
        for name in admin_only():
            settings.pop(name, None)
    if settings.get("database_url"):
        settings["database_url"] = state.db.database.dialect
    if settings.get("storage_url"):
        settings["storage_url"] = str(settings["storage_url"]).split(":", 1)[0]  # file or s3
    return settings


def _probe(state: Server, host: SandboxHost) -> tuple[bool, dict[str, Any]]:
    """(cacheable, report). Not cacheable when nothing could be probed or the probe itself failed."""
    from sleuth.sandbox.zygote import meets_floor  # the zygote module is heavy; only probes need it

    floor = host.limits.floor
    report: dict[str, Any] = {"ok": False, "backend": BACKEND, "mode": None, "layers": [], "missing": []}
    target = next(
        (
            (info.slug, ctx.version_dir(live))
            for ctx, info in state.home.contexts()
            if (live := ctx.live_version())
        ),
        None,
    )
    if target is None:
        report["detail"] = "not probed yet: a sandbox needs a curated context to start"
        return False, report
    slug, version_dir = target
    try:
        with host.start_turn({slug: version_dir}, replace(host.limits, floor="none")) as sandbox:
            ready = sandbox.ready
    except Exception as exc:  # any failure to start one is what /version exists to report
        log.warning("sandbox probe failed: %s", exc)
        report["missing"] = ["setup"]
        report["detail"] = f"{type(exc).__name__}: {exc}"
        return False, report
    layers = list(ready.get("layers") or [])
    ok, missing = meets_floor(floor, layers, int(ready.get("landlock_abi") or 0))
    report.update(ok=ok, mode=ready.get("mode"), layers=layers, missing=missing)
    return True, report


def sandbox_report(state: Server) -> dict[str, Any]:
    """`GET /version`'s `sandbox` object, probed once per host (a failed probe is retried after 30 s)."""
    host = state.runtime.sandbox_host
    with _probe_lock:
        cached = _probes.get(host)
        if cached is not None and cached[0] > time.monotonic():
            return dict(cached[1])
        cacheable, report = _probe(state, host)
        if cacheable or report.get("missing"):  # "nothing to probe yet" is not a result to keep
            _probes[host] = (float("inf") if cacheable else time.monotonic() + RETRY_FAILED_PROBE_S, report)
        return dict(report)


def _is_admin(request: Request) -> bool:
    """Whether the caller of a route that needs no key presented an admin key (in no-auth mode every
    caller is the admin `local`); a missing or invalid key is simply no admin, never a 401."""
    if not api_state(request).auth:
        return True
    if presented_credential(request) is None:
        return False
    try:
        return principal(request).is_admin
    except ApiError:
        return False


@router.get("/version", summary="Server, API and sandbox versions (no auth) [ext]")
def get_version(request: Request) -> dict[str, Any]:
    """Without an admin key, no admin-only settings and no sandbox failure detail (an exception's text
    can name this machine's paths)."""
    state = api_state(request)
    admin = _is_admin(request)
    sandbox = sandbox_report(state)
    if not admin and sandbox.get("missing"):
        sandbox.pop("detail", None)
    return {
        "sleuth_version": sleuth.__version__,
        "api_versions": list(VERSIONS),
        "default_api_version": DEFAULT_VERSION,
        "auth": "api_key" if state.auth else "none",
        "sandbox": sandbox,
        "settings": public_settings(state, admin),
    }


class LoginBody(BaseModel):
    model_config = ConfigDict(extra="forbid")

    api_key: str | None = None


@router.post("/auth/login", summary="Exchange an API key for a bearer token (no auth)")
def login(request: Request, body: Annotated[LoginBody | None, Body()] = None) -> dict[str, Any]:
    """The key comes from the body, else from the credential headers. In no-auth mode the token is
    never checked, so any request gets one (spec/api.md §3.3)."""
    state = api_state(request)
    settings = state.settings
    project = {"project_id": settings.project_id, "project_name": settings.project_name}
    if not state.auth:
        return {"token": new_secret(TOKEN_PREFIX), "principal": LOCAL, **project}
    secret = body.api_key if body is not None and body.api_key is not None else None
    if secret is None:
        presented = presented_credential(request)
        secret = presented[1] if presented is not None else None
    if not secret:
        raise unauthenticated('no API key: send {"api_key": ...} or a key header')
    token = KeyStore.for_db(state.db).login(secret)
    if token is None:
        raise unauthenticated("invalid API key")
    return {"token": token.token, "principal": token.key.name, **project}


@router.post("/auth/logout", status_code=204, summary="End the login token presented (sign out)")
def logout(request: Request, _who: AnyKey) -> Response:
    """The bearer login token of this request stops working at once (its key and other tokens stay):
    a console's Sign out, so a token left in a tab or a log is dead. A key itself is revoked with
    `sleuth keys revoke`. In no-auth mode there is nothing to end."""
    state = api_state(request)
    presented = presented_credential(request)
    if state.auth and presented is not None and presented[1].startswith(TOKEN_PREFIX):
        KeyStore.for_db(state.db).logout(presented[1])
    return Response(status_code=204)


@router.get("/auth", summary="Who the credentials belong to")
def get_auth(request: Request, who: AnyKey) -> dict[str, Any]:
    settings = api_state(request).settings
    return {
        "user": who.name,
        "project_id": settings.project_id,
        "project_name": settings.project_name,
        "workspace_name": None,
        "org_id": None,
    }


@router.get("/project", summary="The one project this server is")
def get_project(request: Request, who: AnyKey) -> dict[str, Any]:
    settings = api_state(request).settings
    return {"id": settings.project_id, "name": settings.project_name, "workspaces_required": False}
