"""Routes: sessions (spec/api.md §10.1): list, read (with the session's turns, oldest first), delete.
A principal lists, reads and deletes only the sessions it may see (`server/access.py`).

The server database keeps a session with the scope as the caller wrote it (slugs or ids) and Unix
times; the Session object serves context ids and RFC 3339 times, and adds the project and creator.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated, Any

from fastapi import APIRouter, Query, Request
from starlette.concurrency import run_in_threadpool

from sleuth.api.auth import AnyKey
from sleuth.api.errors import ApiError, error_responses
from sleuth.api.state import api_state
from sleuth.server.access import session_not_found, visible_session, visible_sessions
from sleuth.server.admission import present
from sleuth.server.state import Server
from sleuth.store.contexts.home import ContextNotFound
from sleuth.store.records.rows import SessionRow
from sleuth.store.records.server_db import SessionBusy

router = APIRouter()


def rfc3339(stamp: float | None) -> str | None:
    """Unix seconds → `2026-07-01T12:00:00.123Z`."""
    if stamp is None:
        return None
    return datetime.fromtimestamp(stamp, UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _context_ids(state: Server, scope: list[str], cache: dict[str, str]) -> list[str]:
    """Slugs → context ids; an entry whose context is gone stays as it was stored."""
    ids = []
    for entry in scope:
        if entry not in cache:
            try:
                cache[entry] = state.home.find(entry).info().id
            except (ContextNotFound, ValueError, OSError):
                cache[entry] = entry
        ids.append(cache[entry])
    return ids


def session_object(state: Server, stored: SessionRow, cache: dict[str, str] | None = None) -> dict[str, Any]:
    """A stored session as the Session object of spec/api.md §10.1."""
    return {
        "id": stored["id"],
        "project_id": state.settings.project_id,
        "created_by": stored["created_by"],
        "scope": _context_ids(state, list(stored.get("scope") or []), {} if cache is None else cache),
        "title": stored.get("title"),
        "system_prompt": stored.get("system_prompt"),
        "guardrails": stored.get("guardrails"),
        "models": list(stored.get("models") or []),
        "tools": stored.get("tools"),
        "workflow": stored.get("workflow"),
        "last_query_id": stored.get("last_query_id"),
        "created_at": rfc3339(stored.get("created_at")),
        "updated_at": rfc3339(stored.get("updated_at")),
    }


@router.get(
    "/sessions",
    summary="Sessions, newest first",
    responses=error_responses((400, "invalid_request")),
)
async def list_sessions(
    request: Request,
    who: AnyKey,
    limit: Annotated[int, Query(ge=1, le=200)] = 50,
    queries_active: bool = False,
) -> dict[str, Any]:
    state = api_state(request)

    def load() -> dict[str, Any]:
        cache: dict[str, str] = {}
        body: dict[str, Any] = {
            "sessions": [session_object(state, s, cache) for s in visible_sessions(state, who, limit)]
        }
        if queries_active:
            body["queries_active"] = state.db.active_query_count()
        return body

    return await run_in_threadpool(load)


@router.get(
    "/sessions/{session_id}",
    summary="A session with its turns, oldest first",
    responses=error_responses((404, "session_not_found")),
)
async def get_session(request: Request, session_id: str, who: AnyKey) -> dict[str, Any]:
    state = api_state(request)

    def load() -> dict[str, Any]:
        stored = visible_session(state, who, session_id)
        queries = [present(state, q) for q in state.db.queries_for_session(session_id)]
        return {**session_object(state, stored), "queries": queries}

    return await run_in_threadpool(load)


@router.delete(
    "/sessions/{session_id}",
    summary="Delete a session with its turns, traces and events",
    responses=error_responses((404, "session_not_found"), (409, "session_busy")),
)
async def delete_session(request: Request, session_id: str, who: AnyKey) -> dict[str, Any]:
    state = api_state(request)
    await run_in_threadpool(visible_session, state, who, session_id)
    try:
        deleted = await run_in_threadpool(state.db.delete_session, session_id)
    except SessionBusy:
        raise ApiError(409, "session_busy", f"session {session_id} has a turn in flight") from None
    if not deleted:
        raise session_not_found(session_id)
    return {"deleted": True}
