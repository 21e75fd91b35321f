"""The SQLite plumbing every store of `server.sqlite` shares: one engine per file (WAL, foreign keys,
busy timeout, `BEGIN IMMEDIATE` for writers), one write lock per file in this process, the JSON
column helpers and the ids.

Only this module is SQLite-specific; the stores above it use SQLAlchemy Core, so their statements can
later run on PostgreSQL.
"""

from __future__ import annotations

import json
import os
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Self

from sqlalchemy import (
    Engine,
    MetaData,
    create_engine,
)
from sqlalchemy import event as sa_event
from sqlalchemy.engine import Connection

from sleuth.store.text import clean_text

BUSY_TIMEOUT_MS = 10_000
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


_write_locks: dict[Path, threading.RLock] = {}
_write_locks_guard = threading.Lock()


def _write_lock(path: Path) -> threading.RLock:
    """One lock per database file in this process, shared by every store opened on it."""
    with _write_locks_guard:
        return _write_locks.setdefault(path.resolve(), threading.RLock())


class SqliteStore:
    """One engine over a SQLite file and the transactions every store of `server.sqlite` uses:
    `reading()` for plain reads, `writing()` for writes that take the write lock up front (a store whose
    tables live in another's database, like the API keys, uses that one's). The tables of `tables` are
    created on open, under that lock, since two processes may open the file at once."""

    def __init__(self, path: Path, tables: MetaData) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._engine = _sqlite_engine(self.path)
        self._write_lock = _write_lock(self.path)
        # Same pool and dialect; the option tells the "begin" hook to take the write lock up front.
        self._writer = self._engine.execution_options(sleuth_write=True)
        try:
            tables.create_all(self._writer)
        except BaseException:
            self._engine.dispose()
            raise

    def close(self) -> None:
        self._engine.dispose()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @contextmanager
    def reading(self) -> Iterator[Connection]:
        with self._engine.connect() as conn:
            yield conn

    @contextmanager
    def writing(self) -> Iterator[Connection]:
        # Writers of this process queue on a lock first: SQLite's busy handler would otherwise make
        # them poll for its write lock with sleeps of up to 100 ms. Other processes still meet the
        # busy timeout.
        with self._write_lock, self._writer.begin() as conn:
            yield conn


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
