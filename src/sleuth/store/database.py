"""The server's system of record: one SQLAlchemy engine over SQLite (the default, `server.sqlite` under
`$SLEUTH_HOME`) or PostgreSQL (`SLEUTH_DATABASE_URL=postgresql://…`, for many API servers and workers).

Every store of the server (`server_db`, `tasks`, `keys`) runs its statements through a `Database`:
`reading()` for plain reads, `writing()` for transactions that read then write. Both backends give
`writing()` the same guarantee, so the stores' read-then-write methods (an event's seq, a session's
claim, the admission counts) are atomic without retry loops:

- SQLite: `BEGIN IMMEDIATE` takes the file's write lock up front (WAL mode, so readers never wait), and
  writers of this process queue on a lock first instead of polling SQLite's busy handler.
- PostgreSQL: each write transaction first takes one transaction-scoped advisory lock, the same single
  writer SQLite has. A team-sized server commits tens of rows per turn; `benchmarks/many_machines.py`
  measures what this costs. Readers never take it.

`prepare(tables, upgrade)` creates missing tables and runs the schema upgrades in one transaction under
a schema lock, so two servers starting at once on one PostgreSQL cannot both migrate it.

`open_database(target)` keeps one `Database` per URL in a process, so the stores opened on it share
one engine, one pool and one write lock.
"""

from __future__ import annotations

import importlib.util
import json
import os
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path
from typing import Any, Literal, Self

from sqlalchemy import Engine, MetaData, create_engine, inspect, text
from sqlalchemy import event as sa_event
from sqlalchemy.engine import Connection, make_url
from sqlalchemy.exc import ArgumentError

from sleuth.errors import Invalid
from sleuth.store.text import clean_text

BUSY_TIMEOUT_MS = 10_000
# Transaction-scoped advisory lock keys (PostgreSQL): any two 64-bit constants Sleuth owns.
WRITE_LOCK_KEY = 0x5_1E07_0001
SCHEMA_LOCK_KEY = 0x5_1E07_0002
PG_POOL_SIZE = 10
# A process that stops inside a write transaction (paused VM, partition, SIGSTOP) must not hold the one
# write lock for long: the server ends a transaction idle that long, and keepalives find a dead peer.
PG_CONNECT_ARGS: dict[str, Any] = {
    "connect_timeout": 10,  # a server that does not answer (a black-holed address) fails, not hangs
    "options": "-c idle_in_transaction_session_timeout=30000",
    "keepalives": 1,
    "keepalives_idle": 10,
    "keepalives_interval": 5,
    "keepalives_count": 3,
}
Dialect = Literal["sqlite", "postgresql"]
_id_lock = threading.Lock()
_id_last_ms = 0
_id_counter = 0


def new_id(prefix: str) -> str:
    """`<prefix>_` + a UUIDv7-shaped id: 48-bit Unix milliseconds, then a 12-bit counter, then random.

    Time comes first and the counter keeps ids made in the same millisecond (or after the clock stepped
    back) increasing, so within a process `ORDER BY id` is creation order; across processes it is
    creation order to the millisecond.
    """
    global _id_last_ms, _id_counter
    with _id_lock:
        ms = time.time_ns() // 1_000_000
        if ms > _id_last_ms:
            _id_last_ms, _id_counter = ms, int.from_bytes(os.urandom(2), "big") & 0x1FF
        else:
            _id_counter += 1
            if _id_counter > 0xFFF:
                _id_last_ms, _id_counter = _id_last_ms + 1, 0
        ms, counter = _id_last_ms, _id_counter
    rand = int.from_bytes(os.urandom(8), "big") & ((1 << 62) - 1)
    value = (ms & ((1 << 48) - 1)) << 80 | 0x7 << 76 | counter << 64 | 0b10 << 62 | rand
    h = f"{value:032x}"
    return f"{prefix}_{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"


def dumps(value: Any) -> str:
    """A JSON column's text: compact, UTF-8 as is, and no NaN (which other databases refuse)."""
    return clean_text(json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=False))


def loads(text: str | None) -> Any:
    """A JSON column's value; NULL stays None."""
    return None if text is None else json.loads(text)


class DatabaseUrlError(Invalid, ValueError):
    """`SLEUTH_DATABASE_URL` names something other than a SQLite file or a PostgreSQL database."""


class Database:
    """One engine and its transactions. Build with `open_database`; `close()` disposes the pool."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.dialect: Dialect = _dialect(url)
        self.path: Path | None = None  # the file, for SQLite
        self._lock = threading.RLock()
        if self.dialect == "sqlite":
            database = make_url(url).database
            if not database or database == ":memory:":
                raise DatabaseUrlError("a SQLite database URL needs a file path")
            self.path = Path(database)
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self.engine = _sqlite_engine(self.path)
        else:
            if importlib.util.find_spec("psycopg") is None:
                raise DatabaseUrlError(
                    "a PostgreSQL database needs its driver: pip install 'sleuth[postgres]'"
                )
            self.engine = create_engine(
                _psycopg_url(url),
                pool_size=PG_POOL_SIZE,
                max_overflow=PG_POOL_SIZE,
                pool_pre_ping=True,
                connect_args=PG_CONNECT_ARGS,
            )
        self._writer = self.engine.execution_options(sleuth_write=True)
        if self.dialect == "postgresql":
            listen: Callable[..., None] = sa_event.listen
            listen(self.engine, "begin", _pg_begin)

    @property
    def is_postgres(self) -> bool:
        return self.dialect == "postgresql"

    def close(self) -> None:
        self.engine.dispose()

    @contextmanager
    def reading(self) -> Iterator[Connection]:
        with self.engine.connect() as conn:
            yield conn

    @contextmanager
    def writing(self) -> Iterator[Connection]:
        """A transaction that holds the single writer's lock from its first statement to its commit."""
        if self.dialect == "sqlite":
            # Writers of this process queue here first: SQLite's busy handler would otherwise make them
            # poll for its write lock with sleeps of up to 100 ms. Other processes meet the busy timeout.
            with self._lock, self._writer.begin() as conn:
                yield conn
        else:
            with self._writer.begin() as conn:
                yield conn

    def prepare(self, tables: MetaData, upgrade: Callable[[Connection], None] | None = None) -> None:
        """Create `tables` where missing, then `upgrade(conn)`, in one transaction under the schema lock."""

        def steps(conn: Connection) -> None:
            tables.create_all(conn)
            if upgrade is not None:
                upgrade(conn)

        self.prepare_with(steps)

    def prepare_with(self, steps: Callable[[Connection], None]) -> None:
        """Run schema `steps` in one write transaction under the schema lock (PostgreSQL: an advisory
        lock, so servers starting together take turns; SQLite: the file's write lock already is one)."""
        with self.writing() as conn:
            if self.is_postgres:
                conn.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": SCHEMA_LOCK_KEY})
            steps(conn)

    def clock(self, conn: Connection) -> float:
        """Now, in seconds since the epoch, by the database's clock on PostgreSQL: leases written and
        compared by different machines then share one clock, whatever the skew between hosts."""
        if self.is_postgres:
            return float(conn.execute(text("SELECT extract(epoch FROM clock_timestamp())")).scalar_one())
        return time.time()

    def ping(self) -> None:
        """One round trip; raises when the database cannot be reached (readiness)."""
        with self.reading() as conn:
            conn.execute(text("SELECT 1"))


def add_missing_columns(conn: Connection, tables: MetaData) -> list[str]:
    """Add every column of `tables` that an existing table lacks (nullable columns of a newer schema):
    the one upgrade step both backends share, idempotent. Returns `table.column` for each added."""
    inspector = inspect(conn)
    present = set(inspector.get_table_names())
    added: list[str] = []
    for table in tables.sorted_tables:
        if table.name not in present:
            continue
        have = {column["name"] for column in inspector.get_columns(table.name)}
        for column in table.columns:
            if column.name in have:
                continue
            kind = column.type.compile(dialect=conn.dialect)
            conn.execute(text(f'ALTER TABLE "{table.name}" ADD COLUMN "{column.name}" {kind}'))
            added.append(f"{table.name}.{column.name}")
    return added


def _pg_begin(conn: Connection) -> None:
    if conn.get_execution_options().get("sleuth_write"):
        conn.exec_driver_sql(f"SELECT pg_advisory_xact_lock({WRITE_LOCK_KEY})")


def _dialect(url: str) -> Dialect:
    try:
        name = make_url(url).get_backend_name()
    except ArgumentError:
        raise DatabaseUrlError(f"not a database URL: {_redacted(url)!r}") from None
    if name == "sqlite":
        return "sqlite"
    if name in ("postgresql", "postgres"):
        return "postgresql"
    raise DatabaseUrlError(
        f"unsupported database {name!r}: use sqlite:///path or postgresql://user@host/db ({_redacted(url)})"
    )


def _psycopg_url(url: str) -> str:
    """`postgresql://…` through psycopg 3 (SQLAlchemy's default driver would be psycopg2)."""
    parsed = make_url(url.replace("postgres://", "postgresql://", 1))
    return parsed.set(drivername="postgresql+psycopg").render_as_string(hide_password=False)


def _redacted(url: str) -> str:
    try:
        return make_url(url).render_as_string(hide_password=True)
    except ArgumentError:
        return "<unparsable>"


def redacted(url: str) -> str:
    """The URL with its password hidden, for logs and `/version`."""
    return _redacted(url)


def _sqlite_engine(path: Path) -> Engine:
    """One Engine for the file: WAL, foreign keys, busy timeout, and `BEGIN IMMEDIATE` for writers.

    pysqlite's own implicit transactions are switched off (isolation_level=None) so SQLAlchemy's
    "begin" hook decides how each transaction starts: deferred for reads, immediate for writes, so a
    read-then-write transaction can never fail on lock upgrade.
    """
    engine = create_engine(
        f"sqlite:///{path}",
        connect_args={"check_same_thread": False, "timeout": BUSY_TIMEOUT_MS / 1000},
    )

    def on_connect(dbapi_conn: Any, _record: Any) -> None:
        dbapi_conn.isolation_level = None
        cursor = dbapi_conn.cursor()
        try:
            cursor.execute("PRAGMA journal_mode=WAL")
            # In WAL mode NORMAL still survives a killed process (kill -9) with every committed
            # transaction; only an OS crash or power loss can undo the last few. It saves an fsync per
            # commit, and a turn commits once per event.
            cursor.execute("PRAGMA synchronous=NORMAL")
            cursor.execute("PRAGMA foreign_keys=ON")
            cursor.execute(f"PRAGMA busy_timeout={BUSY_TIMEOUT_MS}")
        finally:
            cursor.close()

    def on_begin(conn: Connection) -> None:
        conn.exec_driver_sql(
            "BEGIN IMMEDIATE" if conn.get_execution_options().get("sleuth_write") else "BEGIN"
        )

    listen: Callable[..., None] = sa_event.listen
    listen(engine, "connect", on_connect)
    listen(engine, "begin", on_begin)
    return engine


_open: dict[str, Database] = {}
_open_guard = threading.Lock()


def database_url(target: Path | str) -> str:
    """A URL for `target`: a path is a SQLite file; a string with `://` is used as it is."""
    if isinstance(target, str) and "://" in target:
        return target
    return f"sqlite:///{Path(target).resolve()}"


def open_database(target: Path | str) -> Database:
    """The process's `Database` for `target` (a SQLite path or a URL), made on first use.

    Shared: stores opened on the same target share its engine and its write lock. A closed one (its
    pool disposed) is still usable: SQLAlchemy opens new connections on demand."""
    url = database_url(target)
    with _open_guard:
        found = _open.get(url)
        if found is None:
            found = _open[url] = Database(url)
        return found


class SqlStore:
    """A store of the server's tables on a shared `Database`: `reading()` and `writing()` are the
    database's. `target` is a SQLite path, a database URL or an open `Database`."""

    def __init__(self, target: Path | str | Database, tables: MetaData | None = None) -> None:
        self.database = target if isinstance(target, Database) else open_database(target)
        if tables is not None:
            self.database.prepare(tables)

    @property
    def path(self) -> Path | None:
        """The SQLite file, or None on PostgreSQL."""
        return self.database.path

    def close(self) -> None:
        self.database.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def reading(self) -> AbstractContextManager[Connection]:
        return self.database.reading()

    def writing(self) -> AbstractContextManager[Connection]:
        return self.database.writing()


def forget_database(target: Path | str) -> None:
    """Close and drop the process's `Database` for `target` (a test dropping its database)."""
    with _open_guard:
        found = _open.pop(database_url(target), None)
    if found is not None:
        found.close()
