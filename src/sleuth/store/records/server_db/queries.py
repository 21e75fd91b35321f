"""Queries, the turns of a session (spec/api.md §8.2), as the server database stores them.

The Query object is stored whole as the caller gives it; the store reads only its `id`, `session_id`,
`status` and `created`, and keeps `feedback` in its own column, overlaid on the document when read, so
a late `update_query` with an older copy of the document cannot lose feedback. A turn that has ended
is never written again. Turns may be compared in groups of at most `COMPARISON_GROUP_SIZE`.
"""

from __future__ import annotations

import json
import time
from typing import Any

from sqlalchemy import and_, func, insert, or_, select, update
from sqlalchemy.engine import Connection, Row

from sleuth.store.database import SqlStore, dumps, loads
from sleuth.store.records.outage import durable
from sleuth.store.records.rows import ComparedTurn, Feedback, QueryDocument
from sleuth.store.records.server_db.errors import ComparisonGroupFull, QueryNotFound, SessionNotFound
from sleuth.store.records.server_db.events import TERMINAL_STATUSES, append
from sleuth.store.records.server_schema import queries_t, sessions_t

COMPARISON_GROUP_SIZE = 3


def query_fields(query: QueryDocument) -> tuple[str, str, str]:
    try:
        query_id, session_id, status = query["id"], query["session_id"], query["status"]
    except KeyError as exc:
        raise ValueError(
            f"a query needs 'id', 'session_id' and 'status'; {exc.args[0]!r} is missing"
        ) from None
    if not all(isinstance(v, str) and v for v in (query_id, session_id, status)):
        raise ValueError("query 'id', 'session_id' and 'status' must be non-empty strings")
    return query_id, session_id, status


def insert_query_row(conn: Connection, query: QueryDocument, now: float, **columns: Any) -> None:
    """The row of a new turn: its fields, its document and feedback as JSON, and `columns`."""
    query_id, session_id, status = query_fields(query)
    feedback = query.get("feedback")
    conn.execute(
        insert(queries_t).values(
            id=query_id,
            session_id=session_id,
            status=status,
            created=int(query.get("created") or now),
            updated=now,
            document=dumps(query),
            feedback=None if feedback is None else dumps(feedback),
            **columns,
        )
    )


def _query_document(row: Row[Any]) -> QueryDocument:
    document: QueryDocument = json.loads(row.document)
    document["feedback"] = loads(row.feedback)
    return document


def _group_size(conn: Connection, group: str) -> int:
    stmt = select(func.count()).select_from(queries_t).where(queries_t.c.comparison_group == group)
    return int(conn.execute(stmt).scalar_one())


def check_group(conn: Connection, group: str | None) -> None:
    if group is not None and _group_size(conn, group) >= COMPARISON_GROUP_SIZE:
        raise ComparisonGroupFull(f"comparison group {group!r} already has {COMPARISON_GROUP_SIZE} turns")


class QueryRecords(SqlStore):
    """The turns of the server's sessions."""

    def insert_query(
        self, query: QueryDocument, *, workflow: str | None = None, comparison_group: str | None = None
    ) -> None:
        """Store a new turn. `SessionNotFound` if its session does not exist; `ComparisonGroupFull` if
        `comparison_group` already holds 3 turns (checked in the same transaction, so never exceeded)."""
        _query_id, session_id, _status = query_fields(query)
        with self.writing() as conn:
            if conn.execute(select(sessions_t.c.id).where(sessions_t.c.id == session_id)).first() is None:
                raise SessionNotFound(f"no session {session_id}")
            check_group(conn, comparison_group)
            insert_query_row(conn, query, time.time(), workflow=workflow, comparison_group=comparison_group)

    def comparison_group_size(self, group: str) -> int:
        """Turns stored in `group` (spec/api.md §8.1: at most 3)."""
        with self.reading() as conn:
            return _group_size(conn, group)

    def comparison_of(self, query_id: str) -> list[ComparedTurn] | None:
        """The other turns of `query_id`'s comparison group as `[{workflow, query_id, model}]`, oldest
        first; None when the turn is in no group."""
        mine = queries_t.alias("mine")
        stmt = (
            select(queries_t.c.id, queries_t.c.workflow, queries_t.c.document)
            .join(mine, mine.c.comparison_group == queries_t.c.comparison_group)
            .where(mine.c.id == query_id)
            .order_by(queries_t.c.created, queries_t.c.id)
        )
        with self.reading() as conn:
            rows = conn.execute(stmt).all()
        if not rows:
            return None
        return [
            ComparedTurn(workflow=row.workflow, query_id=row.id, model=json.loads(row.document).get("model"))
            for row in rows
            if row.id != query_id
        ]

    @durable
    def update_query(self, query: QueryDocument, *, event: dict[str, Any] | None = None) -> bool:
        """Replace the stored document and status of a turn still `in_progress` (feedback is kept: see
        `set_feedback`). With `event`, that event is appended in the same transaction: a turn's terminal
        event and its terminal status become visible together, so a stream on any server that sees the
        status has the event too.

        A turn that has ended is never written again: False, and nothing changes. That fences off a
        runner that lost its hold (another process failed the turn) from overwriting the ending.
        """
        query_id, _session_id, status = query_fields(query)
        with self.writing() as conn:
            result = conn.execute(
                update(queries_t)
                .where(queries_t.c.id == query_id, queries_t.c.status == "in_progress")
                .values(status=status, updated=time.time(), document=dumps(query))
            )
            if result.rowcount != 1:
                if conn.execute(select(queries_t.c.id).where(queries_t.c.id == query_id)).first() is None:
                    raise QueryNotFound(f"no query {query_id}")
                return False
            if event is not None:
                append(conn, self.database, query_id, event)
            return True

    @durable
    def fail_query(self, query_id: str, error: str) -> None:
        """Mark a turn `failed` when its own ending could not be written: the last resort that keeps a
        query from staying `in_progress` until a restart."""
        with self.writing() as conn:
            row = conn.execute(select(queries_t.c.document).where(queries_t.c.id == query_id)).first()
            if row is None:
                return
            document: dict[str, Any] = json.loads(row.document)
            document["status"], document["error"] = "failed", error
            conn.execute(
                update(queries_t)
                .where(queries_t.c.id == query_id)
                .values(status="failed", updated=time.time(), document=dumps(document))
            )

    def turn_ended(self, query_id: str) -> bool:
        """The turn is terminal, or does not exist: its stream will not grow."""
        with self.reading() as conn:
            status = conn.execute(select(queries_t.c.status).where(queries_t.c.id == query_id)).scalar()
        return status is None or status in TERMINAL_STATUSES

    @durable
    def get_query(self, query_id: str) -> QueryDocument | None:
        with self.reading() as conn:
            row = conn.execute(select(queries_t).where(queries_t.c.id == query_id)).first()
        return None if row is None else _query_document(row)

    def queries_for_session(self, session_id: str) -> list[QueryDocument]:
        """The session's turns, oldest first."""
        stmt = (
            select(queries_t)
            .where(queries_t.c.session_id == session_id)
            .order_by(queries_t.c.created, queries_t.c.id)
        )
        with self.reading() as conn:
            return [_query_document(row) for row in conn.execute(stmt)]

    @durable
    def previous_completed_queries(
        self, session_id: str, before_query_id: str | None = None
    ) -> list[QueryDocument]:
        """The conversation history of spec/runtime.md §9: completed turns, oldest first.

        With `before_query_id`, only turns created before that one (an unknown id sets no bound, so a
        caller may ask before inserting the new turn). Failed and cancelled turns are left out.
        """
        conditions = [queries_t.c.session_id == session_id, queries_t.c.status == "completed"]
        with self.reading() as conn:
            if before_query_id is not None:
                bound = conn.execute(
                    select(queries_t.c.created, queries_t.c.id).where(queries_t.c.id == before_query_id)
                ).first()
                if bound is not None:
                    conditions.append(
                        or_(
                            queries_t.c.created < bound.created,
                            and_(queries_t.c.created == bound.created, queries_t.c.id < bound.id),
                        )
                    )
            stmt = select(queries_t).where(*conditions).order_by(queries_t.c.created, queries_t.c.id)
            return [_query_document(row) for row in conn.execute(stmt)]

    def set_feedback(self, query_id: str, feedback: Feedback | None) -> None:
        """Store (or replace, or with None clear) the turn's feedback (spec/api.md §10.3).

        Validation of rating and comment length is the caller's (the API answers 400 for it).
        """
        with self.writing() as conn:
            result = conn.execute(
                update(queries_t)
                .where(queries_t.c.id == query_id)
                .values(feedback=None if feedback is None else dumps(feedback), updated=time.time())
            )
            if result.rowcount != 1:
                raise QueryNotFound(f"no query {query_id}")
