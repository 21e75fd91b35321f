"""Routes: system (spec/api.md §2, §3.2): `GET /version`, the login exchange, `GET /auth`, `GET /project`.

`/version` reports the sandbox from the server's probe (`server/sandbox_probe.py`), which also gates
turn admission."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Body, Request, Response
from pydantic import BaseModel, ConfigDict

import sleuth
from sleuth.api.auth import LOCAL, AnyKey, presented_credential, principal, unauthenticated
from sleuth.api.errors import ApiError
from sleuth.api.state import api_state
from sleuth.api.versioning import DEFAULT_VERSION, VERSIONS
from sleuth.server.sandbox_probe import sandbox_report
from sleuth.server.state import Server
from sleuth.settings import admin_only
from sleuth.store.records.keys import TOKEN_PREFIX, KeyStore, new_secret

router = APIRouter()


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
