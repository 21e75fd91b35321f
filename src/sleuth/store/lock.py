"""`curate.lock`: one curate per context at a time, whether the CLI, a server or a worker runs it.

On one machine a `flock` on the context's `curate.lock` is the lock. With many machines sharing
PostgreSQL, a session-level advisory lock on the context's id comes first: it is held by one database
connection for the whole curate, so it is released when that connection ends, even when the worker
holding it is killed (a file lock on a network volume may not be shared between hosts at all).
"""

from __future__ import annotations

import fcntl
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from sqlalchemy import text

from sleuth.errors import Conflict
from sleuth.store.database import Database, open_database


class CurateInFlight(Conflict, RuntimeError):
    """Another curate or restore holds the context's lock (`409 task_in_flight` over HTTP)."""


@contextmanager
def curate_lock(path: Path, key: str | None = None, database: Database | None = None) -> Iterator[None]:
    """The context's lock: the database's (PostgreSQL, with the context's id as `key`), then the file's.
    `database` is the process's server database (its `database_url` setting), so the CLI, a server and
    a worker take the same lock; None on one machine."""
    if database is not None and database.is_postgres and key is not None:
        with _advisory_lock(database, f"curate:{key}"), _file_lock(path):
            yield
    else:
        with _file_lock(path):
            yield


def lock_database(database_url: str | None) -> Database | None:
    """The database a curate lock takes its advisory lock in, for the `database_url` setting (None
    without one: one machine, the file lock alone)."""
    return open_database(database_url) if database_url else None


@contextmanager
def _advisory_lock(database: Database, name: str, *, wait: bool = False) -> Iterator[None]:
    """A PostgreSQL session advisory lock on `name`, held by one connection of its own until the block
    ends (or that connection dies with its process). Without `wait`, `CurateInFlight` when taken."""
    with database.engine.connect() as conn:
        params = {"name": name}
        if wait:
            conn.execute(text("SELECT pg_advisory_lock(hashtextextended(:name, 0))"), params)
        elif not conn.execute(
            text("SELECT pg_try_advisory_lock(hashtextextended(:name, 0))"), params
        ).scalar():
            conn.commit()
            raise CurateInFlight(f"another compile of this context is running ({name})")
        conn.commit()
        try:
            yield
        finally:
            conn.execute(text("SELECT pg_advisory_unlock(hashtextextended(:name, 0))"), params)
            conn.commit()


@contextmanager
def _file_lock(path: Path) -> Iterator[None]:
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise CurateInFlight(f"another compile of this context is running ({path})") from None
        try:
            yield
        finally:
            fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)


CLAIM_LOCK = "sleuth:task-claims"


@contextmanager
def claims_lock(database: Database) -> Iterator[None]:
    """Held while a request checks for a conflicting task and records its own (`TaskService.claiming`):
    on PostgreSQL a session advisory lock, so requests on different servers take turns too; on SQLite
    nothing more than the caller's own lock is needed (one server)."""
    if not database.is_postgres:
        yield
        return
    with _advisory_lock(database, CLAIM_LOCK, wait=True):
        yield
