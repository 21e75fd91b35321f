"""Sessions (spec/api.md §10, spec/runtime.md §9): what is pinned when one opens (scope, prompts, models,
tools, workflow), who opened it, and its claim, the one turn in flight on it.

A claim is one conditional UPDATE, so two racing callers never both win; a session is deleted with
its turns, their events and traces, then their replay logs.
"""

from __future__ import annotations

import time
from contextlib import suppress
from pathlib import Path
from typing import Any, TypedDict

from sqlalchemy import delete, func, insert, or_, select, update
from sqlalchemy.engine import Connection, Row

from sleuth.store.database import SqlStore, dumps, loads, new_id
from sleuth.store.records.outage import durable
from sleuth.store.records.replay_log import delete_replay_log
from sleuth.store.records.rows import LOCAL_PRINCIPAL, SessionRow
from sleuth.store.records.server_db.errors import SessionBusy, SessionNotFound
from sleuth.store.records.server_schema import TITLE_CHARS, queries_t, sessions_t
from sleuth.store.storage import Storage


def _title(text: str) -> str:
    """The opening ask on one line, cut to 80 characters (spec/api.md §10.1)."""
    return " ".join(text.split())[:TITLE_CHARS]


class SessionColumns(TypedDict):
    """A `SessionRow` as the `sessions` table's values: its lists as JSON text."""

    id: str
    scope: str
    title: str
    system_prompt: str | None
    guardrails: str | None
    models: str
    tools: str | None
    workflow: str
    last_query_id: str | None
    active_query_id: str | None
    created_by: str
    created_at: float
    updated_at: float


def _session_dict(row: Row[Any]) -> SessionRow:
    return {
        "id": row.id,
        "scope": loads(row.scope),
        "title": row.title,
        "system_prompt": row.system_prompt,
        "guardrails": row.guardrails,
        "models": loads(row.models),
        "tools": loads(row.tools),
        "workflow": row.workflow,
        "last_query_id": row.last_query_id,
        "active_query_id": row.active_query_id,
        "created_by": row.created_by or LOCAL_PRINCIPAL,
        "created_at": row.created_at,
        "updated_at": row.updated_at,
    }


def session_row(session: SessionRow) -> SessionColumns:
    tools = session.get("tools")
    return {
        **session,
        "scope": dumps(session["scope"]),
        "models": dumps(session["models"]),
        "tools": None if tools is None else dumps(tools),
    }


def claim(conn: Connection, session_id: str, query_id: str, now: float) -> bool:
    """Make `query_id` the session's turn in flight; False when another holds it (one conditional
    UPDATE: two racing callers never both win). `SessionNotFound` when there is no such session."""
    result = conn.execute(
        update(sessions_t)
        .where(sessions_t.c.id == session_id, sessions_t.c.active_query_id.is_(None))
        .values(active_query_id=query_id, updated_at=now)
    )
    if result.rowcount == 1:
        return True
    if conn.execute(select(sessions_t.c.id).where(sessions_t.c.id == session_id)).first() is None:
        raise SessionNotFound(f"no session {session_id}")
    return False


class SessionRecords(SqlStore):
    """The sessions of the server's turns."""

    replay_root: Path  # where `queries/<qry_id>/` replay logs live (`ServerDB`)
    storage: Storage | None  # many machines: replay logs are stored there too

    def create_session(
        self,
        scope: list[str],
        title: str,
        system_prompt: str | None = None,
        guardrails: str | None = None,
        models: list[str] | None = None,
        tools: list[str] | None = None,
        workflow: str = "search",
        created_by: str = LOCAL_PRINCIPAL,
    ) -> SessionRow:
        """A new session; scope, prompts, models, tools and workflow are pinned here (spec/runtime.md §9)."""
        session = self.new_session(
            scope, title, system_prompt, guardrails, models, tools, workflow, created_by
        )
        with self.writing() as conn:
            conn.execute(insert(sessions_t).values(**session_row(session)))
        return session

    @staticmethod
    def new_session(
        scope: list[str],
        title: str,
        system_prompt: str | None = None,
        guardrails: str | None = None,
        models: list[str] | None = None,
        tools: list[str] | None = None,
        workflow: str = "search",
        created_by: str = LOCAL_PRINCIPAL,
    ) -> SessionRow:
        """A session as `create_session` would store it, not stored yet (`admit_turn` stores it)."""
        now = time.time()
        return {
            "id": new_id("ses"),
            "scope": list(scope),
            "title": _title(title),
            "system_prompt": system_prompt,
            "guardrails": guardrails,
            "models": list(models or []),
            "tools": None if tools is None else list(tools),
            "workflow": workflow,
            "last_query_id": None,
            "active_query_id": None,
            "created_by": created_by,
            "created_at": now,
            "updated_at": now,
        }

    @durable
    def get_session(self, session_id: str) -> SessionRow | None:
        with self.reading() as conn:
            row = conn.execute(select(sessions_t).where(sessions_t.c.id == session_id)).first()
        return None if row is None else _session_dict(row)

    def list_sessions(
        self, limit: int = 50, *, created_by: str | None = None, offset: int = 0
    ) -> list[SessionRow]:
        """Newest first; with `created_by`, only the sessions that principal opened."""
        stmt = (
            select(sessions_t)
            .order_by(sessions_t.c.created_at.desc(), sessions_t.c.id.desc())
            .limit(max(0, int(limit)))
            .offset(max(0, int(offset)))
        )
        if created_by is not None:
            owner = sessions_t.c.created_by == created_by
            if created_by == LOCAL_PRINCIPAL:  # NULL: a session from before v2, read as "local"
                owner = or_(owner, sessions_t.c.created_by.is_(None))
            stmt = stmt.where(owner)
        with self.reading() as conn:
            return [_session_dict(row) for row in conn.execute(stmt)]

    def active_query_count(self) -> int:
        """Turns in flight (`queries_active` of `GET /sessions`)."""
        stmt = select(func.count()).select_from(sessions_t).where(sessions_t.c.active_query_id.is_not(None))
        with self.reading() as conn:
            return int(conn.execute(stmt).scalar_one())

    def delete_session(self, session_id: str) -> bool:
        """Delete the session with its queries, events and traces, then its turns' replay logs.

        False when there is no such session; `SessionBusy` while a turn runs. The rows go in one
        transaction; the replay directories are removed after it commits (a crash in between leaves
        orphan files, never rows pointing at missing files).
        """
        with self.writing() as conn:
            row = conn.execute(
                select(sessions_t.c.active_query_id).where(sessions_t.c.id == session_id)
            ).first()
            if row is None:
                return False
            if row.active_query_id is not None:
                raise SessionBusy(f"session {session_id} has a turn in flight ({row.active_query_id})")
            query_ids = list(
                conn.execute(select(queries_t.c.id).where(queries_t.c.session_id == session_id)).scalars()
            )
            # ON DELETE CASCADE takes the queries and, through them, their events and traces.
            conn.execute(delete(sessions_t).where(sessions_t.c.id == session_id))
        for query_id in query_ids:
            # An id we did not make, or a file we cannot remove: the rows are already gone, go on.
            with suppress(OSError, ValueError):
                delete_replay_log(self.replay_root, query_id, self.storage)
        return True

    @durable
    def claim_session(self, session_id: str, query_id: str) -> bool:
        """Mark `query_id` as the session's turn in flight; False when another turn holds it.

        One conditional UPDATE, so two racing callers can never both win. `SessionNotFound` when the
        session does not exist.
        """
        with self.writing() as conn:
            return claim(conn, session_id, query_id, time.time())

    @durable
    def release_session(self, session_id: str, query_id: str, *, ran: bool = True) -> bool:
        """End the turn: if `query_id` holds the claim, clear it and (when the turn `ran`, i.e. was
        stored) record it as the session's last turn.

        A caller that does not hold the claim (a claim that failed, a turn already recovered) changes
        nothing, so `try: claim … finally: release` is safe; returns whether the claim was released.
        """
        values: dict[str, Any] = {"active_query_id": None, "updated_at": time.time()}
        if ran:
            values["last_query_id"] = query_id
        with self.writing() as conn:
            result = conn.execute(
                update(sessions_t)
                .where(sessions_t.c.id == session_id, sessions_t.c.active_query_id == query_id)
                .values(**values)
            )
            return result.rowcount == 1
