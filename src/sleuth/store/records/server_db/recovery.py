"""Ending the turns no runner will finish: their Query, the terminal event of their stream and their
session's claim, in one transaction (`end_turns`). A turn's lease running out ends it so
(`server_db.leases`), and so does crash recovery when a process starts (`TurnRecovery`).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from typing import Any

from sqlalchemy import select, update
from sqlalchemy.engine import Connection

from sleuth.store.database import SqlStore, dumps
from sleuth.store.records.server_db.events import end_stream
from sleuth.store.records.server_schema import queries_t, sessions_t

INTERRUPTED_ERROR = "interrupted: the process stopped during this turn"


def end_turns(conn: Connection, turns: list[tuple[str, str]], status: str, error: str, stamp: float) -> None:
    """End turns that no thread will finish (`(query_id, stored document)` each): the Query's status and
    error, the terminal event of its stream, and its session's claim released with it as the latest."""
    for query_id, stored in turns:
        document: dict[str, Any] = json.loads(stored)
        document["status"], document["error"] = status, error
        conn.execute(
            update(queries_t)
            .where(queries_t.c.id == query_id)
            .values(status=status, updated=stamp, document=dumps(document))
        )
        session_id = document.get("session_id")
        end_stream(conn, query_id, session_id, error, status)
        conn.execute(
            update(sessions_t)
            .where(sessions_t.c.id == session_id, sessions_t.c.active_query_id == query_id)
            .values(active_query_id=None, last_query_id=query_id, updated_at=stamp)
        )


def _release_stale_claims(conn: Connection, stamp: float) -> None:
    """Claims left over: a turn that ended without releasing its session, or a claim whose turn was
    never stored. A claim whose turn is still in progress stays."""
    claimed = conn.execute(
        select(sessions_t.c.id, sessions_t.c.active_query_id).where(sessions_t.c.active_query_id.is_not(None))
    ).all()
    for session in claimed:
        status = conn.execute(
            select(queries_t.c.status).where(queries_t.c.id == session.active_query_id)
        ).scalar()
        if status == "in_progress":
            continue
        values: dict[str, Any] = {"active_query_id": None, "updated_at": stamp}
        if status is not None:
            values["last_query_id"] = session.active_query_id
        conn.execute(update(sessions_t).where(sessions_t.c.id == session.id).values(**values))


class TurnRecovery(SqlStore):
    """Crash recovery of the server's turns."""

    def recover_orphans(self, alive: Callable[[str], bool], *, error: str = INTERRUPTED_ERROR) -> int:
        """Fail the turns no live process runs, and clear the claims of sessions whose turn ended;
        returns the turns failed. Unlike `recover_interrupted`, this is safe while other processes share
        the home: a turn is an orphan when nobody holds it (left by a process that held nothing), its
        lease ran out, or `alive(worker)` says its holder is gone (a process on this host that died,
        found at once rather than a lease later)."""
        with self.writing() as conn:
            stamp = self.database.clock(conn)
            rows = conn.execute(
                select(
                    queries_t.c.id, queries_t.c.document, queries_t.c.worker, queries_t.c.lease_until
                ).where(queries_t.c.status == "in_progress")
            ).all()
            orphans = [
                (row.id, row.document)
                for row in rows
                if row.worker is None or (row.lease_until or 0) < stamp or not alive(row.worker)
            ]
            end_turns(conn, orphans, "failed", error, stamp)
            _release_stale_claims(conn, stamp)
        return len(orphans)

    def recover_interrupted(self, now: float | None = None, *, error: str = INTERRUPTED_ERROR) -> int:
        """Fail every turn left `in_progress` and clear every session claim; returns the turns failed.

        Call once when a server or CLI process starts: a turn still in progress then belongs to a
        process that died, and must not stay pollable forever nor keep its session busy. The document's
        `status` and `error` are rewritten too. Caveat: every process sharing the home counts as "the"
        process, so do not call this while another one may be running turns on the same database.
        Each failed turn's stored stream is ended with `response.failed` (and begun with
        `response.created` if the turn had not started), so a replay ends as a live stream would.
        """
        stamp = time.time() if now is None else now
        with self.writing() as conn:
            rows = conn.execute(
                select(queries_t.c.id, queries_t.c.document).where(queries_t.c.status == "in_progress")
            ).all()
            end_turns(conn, [(row.id, row.document) for row in rows], "failed", error, stamp)
            _release_stale_claims(conn, stamp)
        return len(rows)
