"""Authentication (spec/api.md §3): API keys in one of three headers, roles `admin` and `query`, and the
no-auth local mode in which every request is the admin `local`. What a principal may see once it is
known (its own sessions, its contexts) is decided in `server/access.py`, with `Principal`."""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Request

from sleuth.api.errors import ApiError
from sleuth.api.state import api_state
from sleuth.server.access import Principal
from sleuth.store.records.keys import KeyStore
from sleuth.store.records.server_db import LOCAL_PRINCIPAL

LOCAL = LOCAL_PRINCIPAL
# Checked in this order; the first one present decides (spec/api.md §3.1): no fall-through, so a stale
# bearer token is reported as such instead of being masked by another header.
KEY_HEADERS = ("X-Pinecone-Api-Key", "Api-Key")


def unauthenticated(message: str) -> ApiError:
    return ApiError(401, "unauthenticated", message, headers={"WWW-Authenticate": "Bearer"})


def presented_credential(request: Request) -> tuple[str, str] | None:
    """(header name, secret) of the first credential header present, or None when there is none.

    `Authorization` must use the Bearer scheme; any other scheme is an invalid credential, not an
    absent one, because that header came first and decides.
    """
    authorization = request.headers.get("Authorization")
    if authorization is not None:
        scheme, _, secret = authorization.strip().partition(" ")
        if scheme.lower() != "bearer":
            return "Authorization", ""
        return "Authorization", secret.strip()
    for header in KEY_HEADERS:
        value = request.headers.get(header)
        if value is not None:
            return header, value.strip()
    return None


def principal(request: Request) -> Principal:
    """Who is calling. In no-auth mode everyone is the admin `local` and credentials are ignored."""
    state = api_state(request)
    if not state.auth:
        return Principal(LOCAL, "admin")
    presented = presented_credential(request)
    if presented is None:
        raise unauthenticated(
            "missing credentials: send Authorization: Bearer <key>, X-Pinecone-Api-Key or Api-Key"
        )
    header, secret = presented
    # Login tokens only travel as bearer tokens; the key headers carry keys (spec/api.md §3.1).
    key = KeyStore.for_db(state.db).verify(secret, tokens=header == "Authorization") if secret else None
    if key is None:
        raise unauthenticated(f"invalid credentials in {header}")
    return Principal.of(key)


def admin(who: Annotated[Principal, Depends(principal)]) -> Principal:
    """Routes that change contexts, sources, curation, packs or tasks."""
    if not who.is_admin:
        raise ApiError(403, "forbidden", "this operation needs an admin key")
    return who


AnyKey = Annotated[Principal, Depends(principal)]  # role Q in spec/api.md §5
AdminKey = Annotated[Principal, Depends(admin)]  # role A
