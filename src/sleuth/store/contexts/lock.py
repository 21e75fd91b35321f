"""`curate.lock`: one curate per context at a time, whether the CLI, a server or a worker runs it.

On one machine a `flock` on the context's `curate.lock` is the lock. With many machines sharing
PostgreSQL, a leased row comes first (`curate_locks`): taken with a random token, renewed by a thread of
the holder every third of its lease, and released at the end. Its life is a lease's, like a turn's or a
task's, not a database connection's:

- a PostgreSQL restart does not drop it (a session advisory lock vanished with its connection while the
  compile went on, and its unlock then failed the curate);
- a holder that is killed or frozen (SIGSTOP, a paused VM) stops renewing, and a successor waiting for
  the lock (`wait_s`) takes it over once the lease has run out, instead of failing at once;
- a frozen holder that wakes after its lock was taken over cannot publish over its successor: the
  move of a shared context's live version checks, in its own transaction, that this thread's token
  still holds the lock (`check_fence`, called by `replica.Replica`).
"""

from __future__ import annotations

import fcntl
import logging
import os
import secrets
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from sqlalchemy import Column, Float, MetaData, String, Table, delete, insert, select, text, update
from sqlalchemy.engine import Connection

from sleuth.errors import Conflict
from sleuth.store.database import Database, open_database

log = logging.getLogger("sleuth.store")


class CurateInFlight(Conflict, RuntimeError):
    """Another curate or restore holds the context's lock (`409 task_in_flight` over HTTP)."""


#: A curate lock's lease (PostgreSQL): renewed every third of it; a holder silent that long lost it.
LOCK_LEASE_S = 30.0
LOCK_TABLES = MetaData()
_locks_t = Table(
    "curate_locks",
    LOCK_TABLES,
    Column("name", String(200), primary_key=True),
    Column("token", String(64), nullable=False),
    Column("until", Float, nullable=False),  # the lease's end, by the database's clock
)
_prepared: set[str] = set()
_prepared_guard = threading.Lock()
_held = threading.local()  # this thread's leased locks: name -> token (`check_fence`)


class CurateLockLost(Conflict, RuntimeError):
    """This curate's lock was taken over while it ran (its holder was frozen past the lease): it must
    not publish."""


@contextmanager
def curate_lock(
    path: Path,
    key: str | None = None,
    database: Database | None = None,
    *,
    lease_s: float = LOCK_LEASE_S,
    wait_s: float = 0.0,
) -> Iterator[None]:
    """The context's lock: the database's (PostgreSQL, with the context's id as `key`), then the file's.
    `database` is the process's server database (its `database_url` setting), so the CLI, a server and
    a worker take the same lock; None on one machine. `wait_s`: how long to wait for a holder to end
    or to lose its lease (a curate task taking over one whose worker froze); 0 fails at once with
    `CurateInFlight`."""
    deadline = time.monotonic() + wait_s
    if database is not None and database.is_postgres and key is not None:
        with _leased_lock(database, f"curate:{key}", lease_s, deadline), _file_lock(path, deadline):
            yield
    else:
        with _file_lock(path, deadline):
            yield


@contextmanager
def _leased_lock(database: Database, name: str, lease_s: float, deadline: float) -> Iterator[None]:
    prepare_locks(database)
    token = secrets.token_hex(16)
    while not _take(database, name, token, lease_s):
        if time.monotonic() >= deadline:
            raise CurateInFlight(f"another compile of this context is running ({name})")
        time.sleep(min(1.0, lease_s / 3))
    stop = threading.Event()
    renewer = threading.Thread(
        target=_renew, args=(database, name, token, lease_s, stop), name="sleuth-lock-renew", daemon=True
    )
    renewer.start()
    held: dict[str, str] = _held.__dict__.setdefault("tokens", {})
    held[name] = token
    try:
        yield
    finally:
        held.pop(name, None)
        stop.set()
        renewer.join()
        try:
            with database.writing() as conn:
                conn.execute(delete(_locks_t).where(_locks_t.c.name == name, _locks_t.c.token == token))
        except Exception:  # the database is away: the lease runs out on its own
            log.warning(
                "the lock %s could not be released; it lapses in %.0f s", name, lease_s, exc_info=True
            )


def prepare_locks(database: Database) -> None:
    """The `curate_locks` table (PostgreSQL), made once per process; `sleuth db init` makes it ahead."""
    with _prepared_guard:
        if database.url not in _prepared:
            database.prepare(_locks_t.metadata)
            _prepared.add(database.url)


def _take(database: Database, name: str, token: str, lease_s: float) -> bool:
    """Take the lock when it is free or its holder's lease has run out."""
    with database.writing() as conn:
        now = database.clock(conn)
        row = conn.execute(select(_locks_t.c.until).where(_locks_t.c.name == name)).first()
        if row is None:
            conn.execute(insert(_locks_t).values(name=name, token=token, until=now + lease_s))
            return True
        if row.until >= now:
            return False
        log.warning("the lock %s lapsed (its holder stopped renewing it): taken over", name)
        conn.execute(update(_locks_t).where(_locks_t.c.name == name).values(token=token, until=now + lease_s))
        return True


def _renew(database: Database, name: str, token: str, lease_s: float, stop: threading.Event) -> None:
    """Extend the lease every third of it while the lock is held; a failed renewal (the database away)
    is tried again at the next one."""
    while not stop.wait(lease_s / 3):
        try:
            with database.writing() as conn:
                now = database.clock(conn)
                renewed = conn.execute(
                    update(_locks_t)
                    .where(_locks_t.c.name == name, _locks_t.c.token == token)
                    .values(until=now + lease_s)
                ).rowcount
            if not renewed:
                log.warning("the lock %s was taken over: this curate will not publish", name)
                return
        except Exception:
            log.warning("the lock %s could not be renewed; trying again", name, exc_info=True)


def check_fence(conn: Connection, name: str) -> None:
    """Inside the transaction that publishes for the context: `CurateLockLost` when this thread holds a
    leased lock on `name` whose token is no longer the lock's (another holder took it over)."""
    token = _held.__dict__.get("tokens", {}).get(name)
    if token is None:
        return
    current = conn.execute(select(_locks_t.c.token).where(_locks_t.c.name == name).with_for_update()).scalar()
    if current != token:
        raise CurateLockLost(
            f"this curate lost its lock ({name}) to another while it ran; nothing was published"
        )


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
def _file_lock(path: Path, deadline: float) -> Iterator[None]:
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    raise CurateInFlight(f"another compile of this context is running ({path})") from None
                time.sleep(0.5)
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
