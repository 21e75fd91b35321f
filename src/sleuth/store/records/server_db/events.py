"""A turn's stream of events and its trace (spec/api.md §8.6, §9.3), as the server database stores them.

Every event gets the next seq of its turn inside the write transaction, so concurrent appends never
collide; a turn that has ended takes no more events, and every stream ends with one terminal event.
On PostgreSQL each stored event is also a NOTIFY on `EVENTS_CHANNEL`, so the streams of that turn on
any server wake up; a stop asked for a turn is one on `CONTROL_CHANNEL`.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

from sqlalchemy import func, insert, select, text, update
from sqlalchemy.engine import Connection

from sleuth.store.database import Database, SqlStore, dumps
from sleuth.store.records.outage import durable
from sleuth.store.records.rows import TraceDocument
from sleuth.store.records.server_db.errors import QueryNotFound
from sleuth.store.records.server_schema import events_t, queries_t, traces_t

#: The statuses a turn ends in: it is never written again, and its stream takes no more events.
TERMINAL_STATUSES = frozenset({"completed", "failed", "cancelled"})
TRACE_CHUNK_CHARS = 256 * 1024  # what one trace download holds in memory at a time
TERMINAL_EVENT_TYPES = frozenset(f"response.{status}" for status in TERMINAL_STATUSES)
MAX_SEQ = 2**31 - 1  # events.seq is INTEGER: 32 bits on PostgreSQL
EVENTS_CHANNEL = "sleuth_events"  # PostgreSQL NOTIFY: a turn stored an event (payload: its query id)
CONTROL_CHANNEL = "sleuth_control"  # PostgreSQL NOTIFY: a stop was asked for a turn (payload: its id)


def notify(conn: Connection, database: Database, channel: str, payload: str) -> None:
    """PostgreSQL NOTIFY, delivered when the transaction commits; nothing on SQLite (one process)."""
    if database.is_postgres:
        conn.execute(text("SELECT pg_notify(:channel, :payload)"), {"channel": channel, "payload": payload})


def append(conn: Connection, database: Database, query_id: str, event: dict[str, Any]) -> int:
    """Store `event` as the turn's next one, in the caller's write transaction; returns its seq."""
    event_type = event.get("type")
    if not isinstance(event_type, str) or not event_type:
        raise ValueError("an event needs a non-empty string 'type'")
    last = conn.execute(
        select(func.coalesce(func.max(events_t.c.seq), 0)).where(events_t.c.query_id == query_id)
    ).scalar_one()
    seq = int(last) + 1
    conn.execute(insert(events_t).values(query_id=query_id, seq=seq, type=event_type, data=dumps(event)))
    notify(conn, database, EVENTS_CHANNEL, query_id)
    return seq


def end_stream(conn: Connection, query_id: str, session_id: Any, error: str, status: str = "failed") -> None:
    """Append the terminal event to an ended turn's events (spec/api.md §9.3: every stream ends with
    one terminal event), after `response.created` when it has none yet."""
    last = conn.execute(
        select(events_t.c.seq, events_t.c.type)
        .where(events_t.c.query_id == query_id)
        .order_by(events_t.c.seq.desc())
        .limit(1)
    ).first()
    if last is not None and last.type in TERMINAL_EVENT_TYPES:
        return
    seq = 0 if last is None else int(last.seq)
    ending: list[dict[str, Any]] = []
    if last is None:
        ending.append({"type": "response.created", "query_id": query_id, "session_id": session_id})
    ending.append({"type": f"response.{status}", "query_id": query_id, "error": error})
    for event in ending:
        seq += 1
        conn.execute(
            insert(events_t).values(query_id=query_id, seq=seq, type=event["type"], data=dumps(event))
        )


class EventRecords(SqlStore):
    """The events and traces of the server's turns."""

    @durable
    def append_event(self, query_id: str, event: dict[str, Any]) -> int:
        """Store one stream event of the turn (spec/api.md §9.3); returns its seq (1, 2, 3, … per query).

        The seq is max+1 read inside the same write transaction, so concurrent appends never collide.
        A turn that has ended takes no more events (0 is returned): its stream ended with its terminal
        event, whatever a runner that lost its hold still sends.
        """
        with self.writing() as conn:
            status = conn.execute(select(queries_t.c.status).where(queries_t.c.id == query_id)).scalar()
            if status is None:
                raise QueryNotFound(f"no query {query_id}")
            if status in TERMINAL_STATUSES:
                return 0
            return append(conn, self.database, query_id, event)

    def events(self, query_id: str, since_seq: int = 1) -> list[dict[str, Any]]:
        """Stored events with seq ≥ `since_seq` (inclusive, as `Last-Event-ID` resume wants), in order.

        Each is the dict given to `append_event` plus its `seq`. A `since_seq` past any seq a turn can
        have (the column is a 32-bit integer on PostgreSQL) finds nothing, on both backends.
        """
        if since_seq > MAX_SEQ:
            return []
        stmt = (
            select(events_t.c.seq, events_t.c.data)
            .where(events_t.c.query_id == query_id, events_t.c.seq >= since_seq)
            .order_by(events_t.c.seq)
        )
        with self.reading() as conn:
            return [{**json.loads(row.data), "seq": row.seq} for row in conn.execute(stmt)]

    @durable
    def save_trace(self, query_id: str, trace: TraceDocument) -> None:
        """Store or replace the turn's trace (spec/api.md §8.6)."""
        document = dumps(trace)
        with self.writing() as conn:
            if conn.execute(select(queries_t.c.id).where(queries_t.c.id == query_id)).first() is None:
                raise QueryNotFound(f"no query {query_id}")
            result = conn.execute(
                update(traces_t).where(traces_t.c.query_id == query_id).values(document=document)
            )
            if result.rowcount == 0:
                conn.execute(insert(traces_t).values(query_id=query_id, document=document))

    def get_trace(self, query_id: str) -> TraceDocument | None:
        text = self.trace_text(query_id)
        if text is None:
            return None
        trace: TraceDocument = json.loads(text)
        return trace

    def trace_text(self, query_id: str) -> str | None:
        """The stored trace as its JSON text: a download sends it as it is, never parsed again."""
        with self.reading() as conn:
            text = conn.execute(select(traces_t.c.document).where(traces_t.c.query_id == query_id)).scalar()
        return None if text is None else str(text)

    def trace_length(self, query_id: str) -> int | None:
        """Characters of the stored trace, or None when the turn has none."""
        with self.reading() as conn:
            found = conn.execute(
                select(func.length(traces_t.c.document)).where(traces_t.c.query_id == query_id)
            ).scalar()
        return None if found is None else int(found)

    def trace_chunks(self, query_id: str, length: int, size: int = TRACE_CHUNK_CHARS) -> Iterator[str]:
        """The stored trace in pieces of `size` characters, each read on its own: a download holds one
        piece at a time, whatever the trace's size and however many are sent at once."""
        for start in range(1, length + 1, size):
            with self.reading() as conn:
                piece = conn.execute(
                    select(func.substr(traces_t.c.document, start, size)).where(
                        traces_t.c.query_id == query_id
                    )
                ).scalar()
            if not piece:
                return
            yield str(piece)
