"""Leases: which worker holds a turn, until when (on the database's clock), and stops asked from any
server. A live worker renews its leases well before they end (`renew_holds`, its heartbeat), so a turn
whose lease ran out belongs to a process that died, and any server or worker may fail it.
"""

from __future__ import annotations

import os
import socket
import time
from dataclasses import dataclass
from typing import Literal

from sqlalchemy import and_, or_, select, update

from sleuth.store.database import SqlStore, new_id
from sleuth.store.records.outage import durable
from sleuth.store.records.server_db.errors import QueryNotFound
from sleuth.store.records.server_db.events import CONTROL_CHANNEL, EVENTS_CHANNEL, notify
from sleuth.store.records.server_db.recovery import end_turns
from sleuth.store.records.server_schema import queries_t

WORKER_LOST_ERROR = "worker lost: the process running this turn stopped answering"
NEVER_STARTED_ERROR = "not started: no worker took this turn in time"
#: Where a turn is when a stop is asked for it (`request_cancel`).
CancelOutcome = Literal["waiting", "asked", "done"]


def worker_name(kind: str = "server") -> str:
    """A name no other process will ever have: host, pid and a random tail (a restarted process with
    the same pid is another worker, and must not inherit the holds of the one that died)."""
    return f"{kind}:{socket.gethostname()}:{os.getpid()}:{new_id('w')[-8:]}"


def worker_alive(name: str) -> bool:
    """Whether the process a `worker_name` names may still run: False only for a process on this host
    that no longer exists (its turns are orphans now, not a lease later). Another host's, or a name of
    another form, counts as alive: its lease decides."""
    parts = name.split(":")
    if len(parts) < 4 or parts[1] != socket.gethostname() or not parts[2].isdigit():
        return True
    try:
        os.kill(int(parts[2]), 0)
    except ProcessLookupError:
        return False
    except OSError:  # exists, owned by another user
        return True
    return True


@dataclass(frozen=True)
class Holder:
    """Who runs a turn admitted in process, held from the admitting transaction on, so that no other
    process sharing the home can mistake it for one a dead process left behind."""

    worker: str
    lease_s: float


@dataclass(frozen=True)
class Held:
    """A turn a worker holds (its lease) and whether a stop was asked for it from any server."""

    query_id: str
    cancel_requested: bool


class TurnLeases(SqlStore):
    """The leases of the server's turns."""

    @durable
    def hold_turn(self, query_id: str, worker: str, lease_s: float) -> bool:
        """Take a waiting turn (or one admitted already held by `worker`) for `worker` until now +
        `lease_s`; False when it is no longer waiting (finished, cancelled while queued, or held by
        another worker)."""
        with self.writing() as conn:
            now = self.database.clock(conn)
            result = conn.execute(
                update(queries_t)
                .where(
                    queries_t.c.id == query_id,
                    queries_t.c.status == "in_progress",
                    or_(queries_t.c.worker.is_(None), queries_t.c.worker == worker),
                )
                .values(worker=worker, lease_until=now + lease_s)
            )
            return result.rowcount == 1

    def renew_holds(self, worker: str, lease_s: float, query_ids: list[str]) -> list[Held]:
        """The worker's heartbeat: extend its lease on `query_ids` (the turns it is running); returns
        those it still holds, each with whether a stop was asked (so a cancel reaches the worker even
        when a notification is lost). A running turn missing from the answer was lost: its lease ran
        out and another process failed it, so its runner must stop without writing."""
        if not query_ids:
            return []
        mine = and_(
            queries_t.c.worker == worker,
            queries_t.c.status == "in_progress",
            queries_t.c.id.in_(query_ids),
        )
        with self.writing() as conn:
            now = self.database.clock(conn)
            conn.execute(update(queries_t).where(mine).values(lease_until=now + lease_s))
            rows = conn.execute(select(queries_t.c.id, queries_t.c.cancel_requested).where(mine)).all()
        return [Held(row.id, row.cancel_requested is not None) for row in rows]

    def holder(self, query_id: str) -> tuple[str | None, float | None]:
        """The worker holding the turn and its lease's end (None, None while it waits)."""
        with self.reading() as conn:
            row = conn.execute(
                select(queries_t.c.worker, queries_t.c.lease_until).where(queries_t.c.id == query_id)
            ).first()
        return (None, None) if row is None else (row.worker, row.lease_until)

    def request_cancel(self, query_id: str) -> CancelOutcome:
        """Record that a stop was asked for the turn, from any server. Returns where the turn is:

        - `"waiting"`: no worker holds it yet; the caller may end it at once (`TurnExecutor.cancel`
          holds and runs it with the stop already asked, which records `cancelled` without a sandbox);
        - `"asked"`: a worker holds it and stops it within a step (NOTIFY, or its next heartbeat);
        - `"done"`: it had already ended.
        """
        now = time.time()
        with self.writing() as conn:
            row = conn.execute(
                select(queries_t.c.status, queries_t.c.worker).where(queries_t.c.id == query_id)
            ).first()
            if row is None:
                raise QueryNotFound(f"no query {query_id}")
            if row.status != "in_progress":
                return "done"
            conn.execute(update(queries_t).where(queries_t.c.id == query_id).values(cancel_requested=now))
            if row.worker is None:
                return "waiting"
            notify(conn, self.database, CONTROL_CHANNEL, query_id)
            return "asked"

    @durable
    def end_turn(self, query_id: str, status: str, error: str) -> bool:
        """End a turn no runner will finish: its Query, its stream's terminal event and its session's
        claim, in one transaction. False when it had already ended."""
        with self.writing() as conn:
            row = conn.execute(
                select(queries_t.c.status, queries_t.c.document).where(queries_t.c.id == query_id)
            ).first()
            if row is None or row.status != "in_progress":
                return False
            end_turns(conn, [(query_id, row.document)], status, error, time.time())
            notify(conn, self.database, EVENTS_CHANNEL, query_id)
            return True

    @durable
    def cancel_asked(self, query_id: str) -> bool:
        with self.reading() as conn:
            found = conn.execute(
                select(queries_t.c.cancel_requested).where(queries_t.c.id == query_id)
            ).scalar()
        return found is not None

    def fail_lost_turns(self, now: float | None = None, *, max_wait_s: float | None = None) -> list[str]:
        """Fail the turns whose worker's lease ran out (the worker died or lost the database) and,
        with `max_wait_s`, those no worker took within that many seconds; returns their ids.

        Any server or worker may run this at any time: a live worker renews its leases well before they
        end, so only the turns of dead processes match.
        """
        with self.writing() as conn:
            stamp = self.database.clock(conn) if now is None else now
            lost = and_(queries_t.c.worker.is_not(None), queries_t.c.lease_until < stamp)
            conditions = [lost]
            if max_wait_s is not None:
                waited = and_(queries_t.c.worker.is_(None), queries_t.c.updated < stamp - max_wait_s)
                conditions.append(waited)
            rows = conn.execute(
                select(queries_t.c.id, queries_t.c.worker, queries_t.c.document).where(
                    queries_t.c.status == "in_progress", or_(*conditions)
                )
            ).all()
            for row in rows:
                error = WORKER_LOST_ERROR if row.worker is not None else NEVER_STARTED_ERROR
                end_turns(conn, [(row.id, row.document)], "failed", error, stamp)
                notify(conn, self.database, EVENTS_CHANNEL, row.id)
        return [row.id for row in rows]
