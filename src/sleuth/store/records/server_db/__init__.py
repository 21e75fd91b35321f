"""`server.sqlite`: the durable store of sessions, queries, their events and traces (spec/context.md §7).

The CLI (`sleuth ask`, `trace`, `replay`) and the HTTP server share it. It is written with SQLAlchemy
Core, not the ORM, so the same statements run on PostgreSQL; only the engine set-up is backend-specific
(`store/database.py`: WAL, foreign keys, busy timeout, `BEGIN IMMEDIATE` for writes on SQLite, one
advisory write lock on PostgreSQL). The tables and their upgrades are in `store/records/server_schema.py`.

Every method is one short transaction on one shared Engine, so a `ServerDB` may be used from several
threads at once. Writes take the write lock when they begin, which makes the read-then-write methods
(`append_event`'s seq, `delete_session`'s busy check, `save_trace`'s upsert) atomic without retry
loops; readers are never blocked.

`ServerDB` is one object made of one part per concern, each in its own module: `sessions`, `queries`
(the turns), `events` (their streams and traces), `admission`, `leases` (which worker holds a turn)
and `recovery` (ending the turns no runner will finish). Values go in and out as plain
JSON-serialisable dicts, typed as the rows of `store.records.rows`.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from sqlalchemy import insert, select, text, update
from sqlalchemy.engine import Connection

from sleuth.store.contexts.replica import shared_storage
from sleuth.store.database import Database, add_missing_columns
from sleuth.store.records.rows import LOCAL_PRINCIPAL, ComparedTurn
from sleuth.store.records.server_db.admission import TurnAdmission, TurnPlaces
from sleuth.store.records.server_db.errors import (
    ComparisonGroupFull,
    QueryNotFound,
    ServerDBError,
    SessionBusy,
    SessionNotFound,
    TurnPlacesFull,
)
from sleuth.store.records.server_db.events import (
    CONTROL_CHANNEL,
    EVENTS_CHANNEL,
    MAX_SEQ,
    TERMINAL_EVENT_TYPES,
    TERMINAL_STATUSES,
    TRACE_CHUNK_CHARS,
    EventRecords,
)
from sleuth.store.records.server_db.leases import (
    NEVER_STARTED_ERROR,
    WORKER_LOST_ERROR,
    Held,
    Holder,
    TurnLeases,
    worker_alive,
    worker_name,
)
from sleuth.store.records.server_db.queries import COMPARISON_GROUP_SIZE, QueryRecords
from sleuth.store.records.server_db.recovery import INTERRUPTED_ERROR, TurnRecovery
from sleuth.store.records.server_db.sessions import SessionRecords
from sleuth.store.records.server_schema import MIGRATIONS, SCHEMA_VERSION, meta_t, metadata
from sleuth.store.storage import Storage

if TYPE_CHECKING:
    from sleuth.store.contexts.home import Home

__all__ = [
    "COMPARISON_GROUP_SIZE",
    "CONTROL_CHANNEL",
    "EVENTS_CHANNEL",
    "INTERRUPTED_ERROR",
    "LOCAL_PRINCIPAL",
    "MAX_SEQ",
    "NEVER_STARTED_ERROR",
    "TERMINAL_EVENT_TYPES",
    "TERMINAL_STATUSES",
    "TRACE_CHUNK_CHARS",
    "WORKER_LOST_ERROR",
    "ComparedTurn",
    "ComparisonGroupFull",
    "Held",
    "Holder",
    "QueryNotFound",
    "ServerDB",
    "ServerDBError",
    "SessionBusy",
    "SessionNotFound",
    "TurnPlaces",
    "TurnPlacesFull",
    "worker_alive",
    "worker_name",
]


class ServerDB(SessionRecords, QueryRecords, EventRecords, TurnAdmission, TurnLeases, TurnRecovery):
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
        """The home's server database: `database_url` (the process's `database_url` setting), else the
        home's own `server.sqlite`."""
        target = database_url or home.root / "server.sqlite"
        return cls(target, replay_root=home.root, storage=shared_storage(home))

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
