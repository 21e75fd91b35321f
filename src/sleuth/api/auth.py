"""Authentication (api.md §3): API keys in one of three headers, roles `admin` and `query`, and the
no-auth local mode in which every request is the admin `local`."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated

from fastapi import Depends, Request

from sleuth.api.errors import ApiError
from sleuth.api.state import api_state

LOCAL = "local"


@dataclass(frozen=True)
class Principal:
    name: str
    role: str  # "admin" | "query"


def principal(request: Request) -> Principal:
    """Who is calling. In no-auth mode everyone is the admin `local`."""
    state = api_state(request)
    if not state.settings.auth:
        return Principal(LOCAL, "admin")
    raise ApiError(
        401, "unauthenticated", "API keys are not configured", headers={"WWW-Authenticate": "Bearer"}
    )


def admin(who: Annotated[Principal, Depends(principal)]) -> Principal:
    """Routes that change contexts, sources, curation, packs or tasks."""
    if who.role != "admin":
        raise ApiError(403, "forbidden", "this operation needs an admin key")
    return who


AnyKey = Annotated[Principal, Depends(principal)]  # role Q in api.md §5
AdminKey = Annotated[Principal, Depends(admin)]  # role A
