"""Running work outlives a database blip (a PostgreSQL restart, a failover, a dropped connection).

A turn or a task writes as it goes: its events, its progress, its ending. When PostgreSQL restarts under
it, each of those writes would raise, and the work would be dropped although its worker lives. So the
threads that run work are *patient* (`patient(seconds)`): on them, a store method marked `durable` is run
again, with backoff, while the database cannot be reached, for up to those seconds. A request's thread is
not patient: its call fails at once and the API answers `503 database_unavailable` (`api/errors.py`).

A transaction that failed this way was rolled back, so running it again is safe; the one case left is a
commit whose acknowledgement was lost, which PostgreSQL cannot tell the client about.

Leases expire by the database's clock, which moved on during the outage: `Reachability` keeps a process
from failing other processes' work as lost until the database has answered it for two leases, so the
holders that lived through the outage renew first.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import threading
import time
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Concatenate, ParamSpec, TypeVar

from sqlalchemy.exc import DBAPIError, InterfaceError, OperationalError

if TYPE_CHECKING:
    from sleuth.store.database import SqlStore

log = logging.getLogger("sleuth.store")
P = ParamSpec("P")
T = TypeVar("T")
S = TypeVar("S", bound="SqlStore")
FIRST_DELAY_S = 0.2
MAX_DELAY_S = 2.0
_local = threading.local()


def connection_lost(exc: BaseException) -> bool:
    """The database could not be reached, dropped the connection or rolled the transaction back for a
    reason of its own (a restart, a deadlock, a lock or idle timeout): asking again may pass. A
    statement's own error (a constraint, bad SQL) is not one."""
    if isinstance(exc, DBAPIError) and exc.connection_invalidated:
        return True
    return isinstance(exc, OperationalError | InterfaceError)


@contextlib.contextmanager
def patient(seconds: float) -> Iterator[None]:
    """On this thread, `durable` store calls wait up to `seconds` for the database to come back."""
    before = getattr(_local, "seconds", 0.0)
    _local.seconds = seconds
    try:
        yield
    finally:
        _local.seconds = before


def durable(method: Callable[Concatenate[S, P], T]) -> Callable[Concatenate[S, P], T]:
    """A store method run again while the database is away, on a patient thread (PostgreSQL only: a
    SQLite file does not go away)."""

    @functools.wraps(method)
    def run(store: S, /, *args: P.args, **kwargs: P.kwargs) -> T:
        wait_s = getattr(_local, "seconds", 0.0)
        if wait_s <= 0 or not store.database.is_postgres:
            return method(store, *args, **kwargs)
        deadline = time.monotonic() + wait_s
        delay = FIRST_DELAY_S
        while True:
            try:
                return method(store, *args, **kwargs)
            except Exception as exc:
                if not connection_lost(exc) or time.monotonic() + delay > deadline:
                    raise
                log.warning("%s: the database is away (%s); again in %.1f s", method.__name__, exc, delay)
            time.sleep(delay)
            delay = min(MAX_DELAY_S, delay * 2)

    return run


class Reachability:
    """Whether this process may judge other processes' leases: only once the database has answered it
    for two leases in a row (`reached`), so that after an outage every live holder had a whole lease to
    renew, and one more for its own retry's backoff (up to 2 s) and a loaded machine, before anyone fails
    its work as lost. A process starts untrusted, as if back from an outage (the whole deployment may be
    restarting); `trusted=True` skips that wait."""

    def __init__(self, lease_s: float, *, trusted: bool = False) -> None:
        self.lease_s = lease_s
        self._since: float | None = time.monotonic() - 2 * lease_s if trusted else None

    def reached(self) -> None:
        if self._since is None:
            self._since = time.monotonic()

    def lost(self) -> None:
        self._since = None

    @property
    def trusted(self) -> bool:
        return self._since is not None and time.monotonic() - self._since >= 2 * self.lease_s
