"""Admission (spec/api.md §8.1): a turn is let in by one transaction that creates its session when it is
new, claims it, checks the comparison group and the turn places, and stores the Query `in_progress`.
Each check is made again inside the single writer's transaction, so racing requests on any number of
servers can never both pass one.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass

from sqlalchemy import case, func, insert, select
from sqlalchemy.engine import Connection

from sleuth.store.database import SqlStore, dumps
from sleuth.store.records.rows import QueryDocument, SessionRow, TurnRecord
from sleuth.store.records.server_db.errors import SessionBusy, TurnPlacesFull
from sleuth.store.records.server_db.leases import Holder
from sleuth.store.records.server_db.queries import check_group, insert_query_row, query_fields
from sleuth.store.records.server_db.sessions import claim, session_row
from sleuth.store.records.server_schema import queries_t, sessions_t


@dataclass(frozen=True)
class TurnPlaces:
    """The admission limits the admitting transaction checks (spec/api.md §8.1 "Capacity"): running plus
    queued turns across every server stay within `capacity`, and a query key's within `key_share`."""

    capacity: int
    key: str | None = None  # the query key the turn counts against; None: admins and no-auth
    key_share: int = 0


def _in_flight(conn: Connection, key: str | None = None) -> int:
    stmt = select(func.count()).select_from(queries_t).where(queries_t.c.status == "in_progress")
    if key is not None:
        stmt = stmt.where(queries_t.c.share_key == key)
    return int(conn.execute(stmt).scalar_one())


def _require_places(conn: Connection, places: TurnPlaces) -> None:
    if places.key is not None and places.key_share > 0:
        held = _in_flight(conn, places.key)
        if held >= places.key_share:
            raise TurnPlacesFull(
                "key_turn_limit",
                f"this key is running or queueing {held} turns, its share of the server's "
                f"{places.capacity} places; retry later",
                held,
                places.key_share,
            )
    taken = _in_flight(conn)
    if taken >= places.capacity:
        raise TurnPlacesFull(
            "too_many_queries",
            f"the server is running or queueing {taken} turns, its limit; retry later",
            taken,
            places.capacity,
        )


class TurnAdmission(SqlStore):
    """The admission of the server's turns."""

    def admit_turn(
        self,
        query: QueryDocument,
        *,
        session: SessionRow,
        new_session: bool,
        workflow: str | None = None,
        comparison_group: str | None = None,
        places: TurnPlaces | None = None,
        request: TurnRecord | None = None,
        holder: Holder | None = None,
    ) -> None:
        """Admit one turn in one transaction: create the session (when `new_session`), claim it, check
        the comparison group and the turn places, and store the Query `in_progress` (held by `holder`
        when the admitting process runs it; a queued turn waits unheld for a worker).

        Each check is re-done here, inside the single writer's transaction, so racing requests on any
        number of servers can never both pass one: `SessionBusy`, `ComparisonGroupFull`,
        `TurnPlacesFull`, `SessionNotFound`. `request` is what a worker needs to run the turn.
        """
        query_id, session_id, _status = query_fields(query)
        if session_id != session["id"]:
            raise ValueError("the query belongs to another session")
        now = time.time()
        with self.writing() as conn:
            if new_session:
                conn.execute(insert(sessions_t).values(**session_row(session)))
            if not claim(conn, session_id, query_id, now):
                raise SessionBusy(f"session {session_id} has a turn in flight")
            check_group(conn, comparison_group)
            if places is not None:
                _require_places(conn, places)
            insert_query_row(
                conn,
                query,
                now,
                workflow=workflow,
                comparison_group=comparison_group,
                request=None if request is None else dumps(request),
                share_key=None if places is None else places.key,
                **(
                    {}
                    if holder is None
                    else {"worker": holder.worker, "lease_until": self.database.clock(conn) + holder.lease_s}
                ),
            )

    def check_places(self, places: TurnPlaces) -> None:
        """`TurnPlacesFull` when a turn of `places.key` would not fit now: the read-only check of the
        order spec/api.md §8.1 gives; `admit_turn` makes the same check again, inside its transaction."""
        with self.reading() as conn:
            _require_places(conn, places)

    def turn_counts(self) -> dict[str, int]:
        """Turns in flight on every server: `waiting` for a worker and `running` on one (`/metrics`)."""
        held = case((queries_t.c.worker.is_(None), "waiting"), else_="running")
        stmt = (
            select(held, func.count())
            .select_from(queries_t)
            .where(queries_t.c.status == "in_progress")
            .group_by(held)
        )
        with self.reading() as conn:
            found = {str(row[0]): int(row[1]) for row in conn.execute(stmt)}
        return {"waiting": found.get("waiting", 0), "running": found.get("running", 0)}

    def turn_request(self, query_id: str) -> TurnRecord | None:
        """What `admit_turn` stored for a worker to run the turn; None for a turn stored without one."""
        with self.reading() as conn:
            found = conn.execute(select(queries_t.c.request).where(queries_t.c.id == query_id)).scalar()
        if found is None:
            return None
        record: TurnRecord = json.loads(found)
        return record
