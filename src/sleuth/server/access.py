"""Who asks (`Principal`) and what it may see (spec/api.md §3.1), decided here for every route, stream,
MCP tool and turn admission.

- A session, and with it its queries, traces, events, ratings and replays, belongs to the principal that
  opened it (`created_by`, the key's name): a query key sees its own, an admin sees all.
- A key limited to contexts (`Principal.contexts`, ids) sees only those. Other contexts do not exist for
  it, nor does a session whose scope names one, nor a task of one. The context and task routes get the
  check from one router dependency (`api/access.py` `context_guard`); listings filter with
  `Principal.sees_context`.

What a principal may not see is refused exactly like what does not exist (same code and message), so a
`404` tells nothing about anyone else's work.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sleuth.errors import ToldNotFound
from sleuth.server.context_files import find_context
from sleuth.server.state import Server
from sleuth.store.contexts.home import ContextDir, ContextNotFound
from sleuth.store.records.keys import ApiKey
from sleuth.store.records.rows import QueryDocument, SessionRow
from sleuth.store.records.server_db import LOCAL_PRINCIPAL


@dataclass(frozen=True)
class Principal:
    """Who is asking: the key's name and role, and the contexts a limited key sees."""

    name: str
    role: str  # "admin" | "query"
    key_id: str | None = None  # None in no-auth mode
    contexts: frozenset[str] | None = None  # the context ids a limited key sees; None: every context

    @classmethod
    def of(cls, key: ApiKey) -> Principal:
        contexts = None if key.contexts is None else frozenset(key.contexts)
        return cls(key.name, key.role, key.id, contexts)

    @property
    def is_admin(self) -> bool:
        return self.role == "admin"

    @property
    def limited(self) -> bool:
        """Limited to a list of contexts (`sleuth keys create --context`)."""
        return self.contexts is not None

    def sees_context(self, context_id: str | None) -> bool:
        """Whether the context with this id exists for this principal (None: one that is gone)."""
        return self.contexts is None or (context_id is not None and context_id in self.contexts)

    def owns(self, created_by: str) -> bool:
        """Whether a session opened by `created_by` is this principal's to see: an admin sees all."""
        return self.is_admin or created_by == self.name


def session_not_found(session_id: str) -> ToldNotFound:
    return ToldNotFound("session_not_found", f"no session {session_id!r}")


def query_not_found(query_id: str) -> ToldNotFound:
    return ToldNotFound("query_not_found", f"no query {query_id!r}")


def context_not_found(name: str, **extra: Any) -> ToldNotFound:
    return ToldNotFound("context_not_found", f"no context {name!r}", **extra)


def context_id(state: Server, entry: str) -> str | None:
    """The id of the context a slug or id names now; None when there is none."""
    try:
        return state.home.find(entry).info().id
    except (ContextNotFound, ValueError, OSError):
        return None


# ---------------------------------------------------------------------------------- contexts
def visible_context(state: Server, who: Principal, slug: str) -> ContextDir:
    """The context by slug or id, or the `404 context_not_found` of a context that does not exist."""
    ctx = find_context(state, slug)
    if who.limited:
        try:
            visible = who.sees_context(ctx.info().id)
        except FileNotFoundError:  # deleted meanwhile
            visible = False
        if not visible:
            raise context_not_found(slug, slug=slug)
    return ctx


def check_scope(state: Server, who: Principal, scope: list[str]) -> None:
    """A turn's scope names only contexts the principal sees, else the turn's own `404`
    (`Runtime.resolve` words it the same way for a context that does not exist)."""
    if not who.limited:
        return
    for entry in scope:
        if not who.sees_context(context_id(state, entry)):
            raise context_not_found(entry)


# ---------------------------------------------------------------------------------- sessions and queries
def sees_session(state: Server, who: Principal, stored: SessionRow) -> bool:
    """The principal opened the session (or is an admin), and sees every context of its scope."""
    if not who.owns(str(stored.get("created_by") or LOCAL_PRINCIPAL)):
        return False
    if not who.limited:
        return True
    return all(who.sees_context(context_id(state, str(entry))) for entry in stored.get("scope") or [])


def visible_session(state: Server, who: Principal, session_id: str) -> SessionRow:
    """The stored session, or `404 session_not_found`."""
    stored = state.db.get_session(session_id)
    if stored is None or not sees_session(state, who, stored):
        raise session_not_found(session_id)
    return stored


def visible_query(state: Server, who: Principal, query_id: str) -> QueryDocument:
    """The stored Query, or `404 query_not_found`: a query is visible with its session."""
    document = state.db.get_query(query_id)
    if document is None:
        raise query_not_found(query_id)
    if who.is_admin and not who.limited:
        return document
    session = state.db.get_session(str(document.get("session_id")))
    if session is None or not sees_session(state, who, session):
        raise query_not_found(query_id)
    return document


def visible_sessions(state: Server, who: Principal, limit: int) -> list[SessionRow]:
    """Up to `limit` sessions the principal sees, newest first. The database filters by creator; a key
    limited to contexts also drops the sessions whose scope left its list, reading on past them."""
    owner = None if who.is_admin else who.name
    if not who.limited:
        return state.db.list_sessions(limit, created_by=owner)
    found: list[SessionRow] = []
    offset = 0
    while len(found) < limit:
        page = state.db.list_sessions(limit, created_by=owner, offset=offset)
        found.extend(s for s in page if sees_session(state, who, s))
        if len(page) < limit:
            break
        offset += len(page)
    return found[:limit]
