"""`server.sqlite`: the durable store of sessions, queries, their events and traces (spec/context.md §7).

The CLI (`sleuth ask`, `trace`, `replay`) and the HTTP server share it. It is written with SQLAlchemy
Core, not the ORM, so the same statements can later run on PostgreSQL; only the engine set-up is
SQLite-specific (`store/sqlite.py`: WAL, foreign keys, busy timeout, `BEGIN IMMEDIATE` for writes).
The tables and their upgrades are in `store/server_schema.py`.

Every method is one short transaction on one shared Engine, so a `ServerDB` may be used from several
threads at once. Writes take SQLite's write lock when they begin (`BEGIN IMMEDIATE`), which makes the
read-then-write methods (`append_event`'s seq, `delete_session`'s busy check, `save_trace`'s upsert)
atomic without retry loops; readers are never blocked in WAL mode.

Values go in and out as plain JSON-serialisable dicts. The Query object (spec/api.md §8.2) is stored whole
as the caller gives it; the store reads only its `id`, `session_id`, `status` and `created`, and keeps
`feedback` in its own column, overlaid on the document when read, so a late `update_query` with an
older copy of the document cannot lose feedback.
"""

from __future__ import annotations

import json
import os
import socket
import time
from collections.abc import Callable, Iterator
from contextlib import suppress
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sqlalchemy import (
    and_,
    case,
    delete,
    func,
    insert,
    or_,
    select,
    text,
    update,
)
from sqlalchemy.engine import Connection, Row

from sleuth.errors import Conflict, Error, NotFound
from sleuth.settings import current
from sleuth.store.database import (
    Database,
    SqlStore,
    add_missing_columns,
    dumps,
    loads,
    new_id,
)
from sleuth.store.replay_log import delete_replay_log
from sleuth.store.replica import shared_storage
from sleuth.store.server_schema import (
    MIGRATIONS,
    SCHEMA_VERSION,
    TITLE_CHARS,
    events_t,
    meta_t,
    metadata,
    queries_t,
    sessions_t,
    traces_t,
)
from sleuth.store.storage import Storage

if TYPE_CHECKING:
    from sleuth.store.home import Home

LOCAL_PRINCIPAL = "local"  # who opens sessions when no API key is involved (the CLI, --no-auth)
COMPARISON_GROUP_SIZE = 3
INTERRUPTED_ERROR = "interrupted: the process stopped during this turn"
TERMINAL_STATUSES = frozenset({"completed", "failed", "cancelled"})
TRACE_CHUNK_CHARS = 256 * 1024  # what one trace download holds in memory at a time
TERMINAL_EVENT_TYPES = frozenset(f"response.{status}" for status in TERMINAL_STATUSES)
MAX_SEQ = 2**31 - 1  # events.seq is INTEGER: 32 bits on PostgreSQL
EVENTS_CHANNEL = "sleuth_events"  # PostgreSQL NOTIFY: a turn stored an event (payload: its query id)
CONTROL_CHANNEL = "sleuth_control"  # PostgreSQL NOTIFY: a stop was asked for a turn (payload: its id)
WORKER_LOST_ERROR = "worker lost: the process running this turn stopped answering"
NEVER_STARTED_ERROR = "not started: no worker took this turn in time"


class ServerDBError(Error):
    """Base of the store's own errors."""


class SessionNotFound(ServerDBError, NotFound, LookupError):
    """No such session (`404 session_not_found` over HTTP)."""


class SessionBusy(ServerDBError, Conflict):
    """A turn is in flight on the session (`409 session_busy` over HTTP)."""


class QueryNotFound(ServerDBError, NotFound, LookupError):
    """No such query (`404` over HTTP)."""


class ComparisonGroupFull(ServerDBError, Conflict):
    """A comparison group already holds its 3 turns (`409 comparison_group_full` over HTTP)."""


class TurnPlacesFull(ServerDBError, Conflict):
    """Running and queued turns fill the deployment's places (`429 too_many_queries`), or the key's
    share of them (`429 key_turn_limit`, `code`)."""

    def __init__(self, code: str, message: str, held: int, limit: int) -> None:
        super().__init__(message)
        self.code, self.held, self.limit = code, held, limit


@dataclass(frozen=True)
class TurnPlaces:
    """The admission limits the admitting transaction checks (spec/api.md §8.1 "Capacity"): running plus
    queued turns across every server stay within `capacity`, and a query key's within `key_share`."""

    capacity: int
    key: str | None = None  # the query key the turn counts against; None: admins and no-auth
    key_share: int = 0


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


def _title(text: str) -> str:
    """The opening ask on one line, cut to 80 characters (spec/api.md §10.1)."""
    return " ".join(text.split())[:TITLE_CHARS]


def _session_dict(row: Row[Any]) -> dict[str, Any]:
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


def _session_row(session: dict[str, Any]) -> dict[str, Any]:
    tools = session.get("tools")
    return {
        **session,
        "scope": dumps(session["scope"]),
        "models": dumps(session["models"]),
        "tools": None if tools is None else dumps(tools),
    }


def _in_flight(conn: Connection, key: str | None = None) -> int:
    stmt = select(func.count()).select_from(queries_t).where(queries_t.c.status == "in_progress")
    if key is not None:
        stmt = stmt.where(queries_t.c.share_key == key)
    return int(conn.execute(stmt).scalar_one())


def _claim(conn: Connection, session_id: str, query_id: str, now: float) -> bool:
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


def _check_group(conn: Connection, group: str | None) -> None:
    if group is not None and _group_size(conn, group) >= COMPARISON_GROUP_SIZE:
        raise ComparisonGroupFull(f"comparison group {group!r} already has {COMPARISON_GROUP_SIZE} turns")


def _insert_query(conn: Connection, query: dict[str, Any], now: float, **columns: Any) -> None:
    """The row of a new turn: its fields, its document and feedback as JSON, and `columns`."""
    query_id, session_id, status = _query_fields(query)
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


def _check_places(conn: Connection, places: TurnPlaces) -> None:
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


def _query_document(row: Row[Any]) -> dict[str, Any]:
    document: dict[str, Any] = json.loads(row.document)
    document["feedback"] = loads(row.feedback)
    return document


def _group_size(conn: Connection, group: str) -> int:
    stmt = select(func.count()).select_from(queries_t).where(queries_t.c.comparison_group == group)
    return int(conn.execute(stmt).scalar_one())


def _query_fields(query: dict[str, Any]) -> tuple[str, str, str]:
    try:
        query_id, session_id, status = query["id"], query["session_id"], query["status"]
    except KeyError as exc:
        raise ValueError(
            f"a query needs 'id', 'session_id' and 'status'; {exc.args[0]!r} is missing"
        ) from None
    if not all(isinstance(v, str) and v for v in (query_id, session_id, status)):
        raise ValueError("query 'id', 'session_id' and 'status' must be non-empty strings")
    return query_id, session_id, status


class ServerDB(SqlStore):
    """The server's state: a `server.sqlite` or a PostgreSQL database. Create with
    `ServerDB.for_home(home)`; close with `close()` (or `with`).

    `replay_root` is the home root under which `queries/<qry_id>/` directories live; `delete_session`
    removes those of the deleted turns after the rows are gone. It defaults to the SQLite file's own
    directory, since `server.sqlite` sits at the home root; pass it for any other layout (PostgreSQL).
    """

    def __init__(
        self,
        target: Path | str | Database,
        *,
        replay_root: Path | None = None,
        storage: Storage | None = None,
    ) -> None:
        super().__init__(target)
        self.storage = storage  # many machines: replay logs are stored there too
        if replay_root is None:
            if self.path is None:
                raise ValueError("a ServerDB on PostgreSQL needs its replay_root")
            replay_root = self.path.parent
        self.replay_root = Path(replay_root)
        self.database.prepare(metadata, self._upgrade)

    @classmethod
    def for_home(cls, home: Home, database_url: str | None = None) -> ServerDB:
        """The home's server database: `database_url`, else the `SLEUTH_DATABASE_URL` setting, else the
        home's `server.sqlite`."""
        url = database_url or current().database_url
        return cls(url or home.root / "server.sqlite", replay_root=home.root, storage=shared_storage(home))

    def _upgrade(self, conn: Connection) -> None:
        """Stamp a new database; upgrade an older one in place (in `prepare`'s one transaction, under
        its schema lock); refuse a newer one."""
        found = conn.execute(select(meta_t.c.value).where(meta_t.c.key == "schema_version")).scalar()
        if found is None:
            conn.execute(insert(meta_t).values(key="schema_version", value=str(SCHEMA_VERSION)))
            return
        version = int(found)
        if version > SCHEMA_VERSION:
            where = self.path or "the server database"
            raise ServerDBError(
                f"{where} has schema version {found}, newer than this Sleuth understands "
                f"({SCHEMA_VERSION}); upgrade Sleuth"
            )
        if version == SCHEMA_VERSION:
            return
        for reached, statements in MIGRATIONS:
            if version < reached:
                for statement in statements:
                    conn.execute(text(statement))
                version = reached
        add_missing_columns(conn, metadata)
        conn.execute(update(meta_t).where(meta_t.c.key == "schema_version").values(value=str(version)))

    @property
    def schema_version(self) -> int:
        with self.reading() as conn:
            return int(
                conn.execute(select(meta_t.c.value).where(meta_t.c.key == "schema_version")).scalar_one()
            )

    # --- sessions ---------------------------------------------------------------------------------

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
    ) -> dict[str, Any]:
        """A new session; scope, prompts, models, tools and workflow are pinned here (spec/runtime.md §9)."""
        session = self.new_session(
            scope, title, system_prompt, guardrails, models, tools, workflow, created_by
        )
        with self.writing() as conn:
            conn.execute(insert(sessions_t).values(**_session_row(session)))
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
    ) -> dict[str, Any]:
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

    def get_session(self, session_id: str) -> dict[str, Any] | None:
        with self.reading() as conn:
            row = conn.execute(select(sessions_t).where(sessions_t.c.id == session_id)).first()
        return None if row is None else _session_dict(row)

    def list_sessions(
        self, limit: int = 50, *, created_by: str | None = None, offset: int = 0
    ) -> list[dict[str, Any]]:
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

    def claim_session(self, session_id: str, query_id: str) -> bool:
        """Mark `query_id` as the session's turn in flight; False when another turn holds it.

        One conditional UPDATE, so two racing callers can never both win. `SessionNotFound` when the
        session does not exist.
        """
        with self.writing() as conn:
            return _claim(conn, session_id, query_id, time.time())

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

    def admit_turn(
        self,
        query: dict[str, Any],
        *,
        session: dict[str, Any],
        new_session: bool,
        workflow: str | None = None,
        comparison_group: str | None = None,
        places: TurnPlaces | None = None,
        request: dict[str, Any] | None = None,
        holder: Holder | None = None,
    ) -> None:
        """Admit one turn in one transaction: create the session (when `new_session`), claim it, check
        the comparison group and the turn places, and store the Query `in_progress` (held by `holder`
        when the admitting process runs it; a queued turn waits unheld for a worker).

        Each check is re-done here, inside the single writer's transaction, so racing requests on any
        number of servers can never both pass one: `SessionBusy`, `ComparisonGroupFull`,
        `TurnPlacesFull`, `SessionNotFound`. `request` is what a worker needs to run the turn.
        """
        query_id, session_id, _status = _query_fields(query)
        if session_id != session["id"]:
            raise ValueError("the query belongs to another session")
        now = time.time()
        with self.writing() as conn:
            if new_session:
                conn.execute(insert(sessions_t).values(**_session_row(session)))
            if not _claim(conn, session_id, query_id, now):
                raise SessionBusy(f"session {session_id} has a turn in flight")
            _check_group(conn, comparison_group)
            if places is not None:
                _check_places(conn, places)
            _insert_query(
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
            _check_places(conn, places)

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

    def turn_request(self, query_id: str) -> dict[str, Any] | None:
        """What `admit_turn` stored for a worker to run the turn; None for a turn stored without one."""
        with self.reading() as conn:
            found = conn.execute(select(queries_t.c.request).where(queries_t.c.id == query_id)).scalar()
        return None if found is None else dict(json.loads(found))

    # --- leases: which worker holds a turn, until when ------------------------------------------------

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

    def request_cancel(self, query_id: str) -> str:
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
            self._notify(conn, CONTROL_CHANNEL, query_id)
            return "asked"

    def end_turn(self, query_id: str, status: str, error: str) -> bool:
        """End a turn no runner will finish: its Query, its stream's terminal event and its session's
        claim, in one transaction. False when it had already ended."""
        with self.writing() as conn:
            row = conn.execute(
                select(queries_t.c.status, queries_t.c.document).where(queries_t.c.id == query_id)
            ).first()
            if row is None or row.status != "in_progress":
                return False
            _end_turns(conn, [(query_id, row.document)], status, error, time.time())
            self._notify(conn, EVENTS_CHANNEL, query_id)
            return True

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
                _end_turns(conn, [(row.id, row.document)], "failed", error, stamp)
                self._notify(conn, EVENTS_CHANNEL, row.id)
        return [row.id for row in rows]

    def _notify(self, conn: Connection, channel: str, payload: str) -> None:
        """PostgreSQL NOTIFY, delivered when the transaction commits; nothing on SQLite (one process)."""
        if self.database.is_postgres:
            conn.execute(
                text("SELECT pg_notify(:channel, :payload)"), {"channel": channel, "payload": payload}
            )

    # --- queries ----------------------------------------------------------------------------------

    def insert_query(
        self, query: dict[str, Any], *, workflow: str | None = None, comparison_group: str | None = None
    ) -> None:
        """Store a new turn. `SessionNotFound` if its session does not exist; `ComparisonGroupFull` if
        `comparison_group` already holds 3 turns (checked in the same transaction, so never exceeded)."""
        _query_id, session_id, _status = _query_fields(query)
        with self.writing() as conn:
            if conn.execute(select(sessions_t.c.id).where(sessions_t.c.id == session_id)).first() is None:
                raise SessionNotFound(f"no session {session_id}")
            _check_group(conn, comparison_group)
            _insert_query(conn, query, time.time(), workflow=workflow, comparison_group=comparison_group)

    def comparison_group_size(self, group: str) -> int:
        """Turns stored in `group` (spec/api.md §8.1: at most 3)."""
        with self.reading() as conn:
            return _group_size(conn, group)

    def comparison_of(self, query_id: str) -> list[dict[str, Any]] | None:
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
            {"workflow": row.workflow, "query_id": row.id, "model": json.loads(row.document).get("model")}
            for row in rows
            if row.id != query_id
        ]

    def update_query(self, query: dict[str, Any], *, event: dict[str, Any] | None = None) -> bool:
        """Replace the stored document and status of a turn still `in_progress` (feedback is kept: see
        `set_feedback`). With `event`, that event is appended in the same transaction: a turn's terminal
        event and its terminal status become visible together, so a stream on any server that sees the
        status has the event too.

        A turn that has ended is never written again: False, and nothing changes. That fences off a
        runner that lost its hold (another process failed the turn) from overwriting the ending.
        """
        query_id, _session_id, status = _query_fields(query)
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
                self._append(conn, query_id, event)
            return True

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

    def get_query(self, query_id: str) -> dict[str, Any] | None:
        with self.reading() as conn:
            row = conn.execute(select(queries_t).where(queries_t.c.id == query_id)).first()
        return None if row is None else _query_document(row)

    def queries_for_session(self, session_id: str) -> list[dict[str, Any]]:
        """The session's turns, oldest first."""
        stmt = (
            select(queries_t)
            .where(queries_t.c.session_id == session_id)
            .order_by(queries_t.c.created, queries_t.c.id)
        )
        with self.reading() as conn:
            return [_query_document(row) for row in conn.execute(stmt)]

    def previous_completed_queries(
        self, session_id: str, before_query_id: str | None = None
    ) -> list[dict[str, Any]]:
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

    def set_feedback(self, query_id: str, feedback: dict[str, Any] | None) -> None:
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

    # --- events and traces ------------------------------------------------------------------------

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
            return self._append(conn, query_id, event)

    def _append(self, conn: Connection, query_id: str, event: dict[str, Any]) -> int:
        event_type = event.get("type")
        if not isinstance(event_type, str) or not event_type:
            raise ValueError("an event needs a non-empty string 'type'")
        last = conn.execute(
            select(func.coalesce(func.max(events_t.c.seq), 0)).where(events_t.c.query_id == query_id)
        ).scalar_one()
        seq = int(last) + 1
        conn.execute(insert(events_t).values(query_id=query_id, seq=seq, type=event_type, data=dumps(event)))
        self._notify(conn, EVENTS_CHANNEL, query_id)
        return seq

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

    def save_trace(self, query_id: str, trace: dict[str, Any]) -> None:
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

    def get_trace(self, query_id: str) -> dict[str, Any] | None:
        text = self.trace_text(query_id)
        return None if text is None else dict(json.loads(text))

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

    # --- crash recovery ---------------------------------------------------------------------------

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
            _end_turns(conn, orphans, "failed", error, stamp)
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
            _end_turns(conn, [(row.id, row.document) for row in rows], "failed", error, stamp)
            _release_stale_claims(conn, stamp)
        return len(rows)


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


def _end_turns(conn: Connection, turns: list[tuple[str, str]], status: str, error: str, stamp: float) -> None:
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
        _end_stream(conn, query_id, session_id, error, status)
        conn.execute(
            update(sessions_t)
            .where(sessions_t.c.id == session_id, sessions_t.c.active_query_id == query_id)
            .values(active_query_id=None, last_query_id=query_id, updated_at=stamp)
        )


def _end_stream(conn: Connection, query_id: str, session_id: Any, error: str, status: str = "failed") -> None:
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
