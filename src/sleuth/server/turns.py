"""Running admitted turns (spec/api.md §8.1 "Capacity"), on one machine or many.

Admission (`admission.py`, then `Runtime.admit`) stores a turn `in_progress` in one transaction that
checks the turn places across every server: at most `max_concurrent_turns + max_queued_turns` turns run
or wait, and one query key at most its share (`max_turns_per_key`). `TurnExecutor` then gets the turn
run:

- **in process** (SQLite, the default; or `sleuth serve --with-worker`): on this process's thread pool
  of `max_concurrent_turns` threads;
- **on a worker** (PostgreSQL): the turn is put on the durable queue (`queue.py`), and whichever
  `sleuth worker` takes it runs it through `TurnExecutor.run_queued`.

Either way the runner first *holds* the turn in the database (`ServerDB.hold_turn`: which worker, until
when), and a heartbeat renews the hold while it runs. A cancel is a row (`ServerDB.request_cancel`):
a turn still waiting ends at once, a held one is stopped by its holder within a step (a NOTIFY, or the
next heartbeat). A worker that dies stops renewing; `ServerDB.fail_lost_turns` then fails its turns.

Turns run on their own threads, never on the event loop and never tied to a request: a client that
disconnects leaves its turn running, pollable and streamable. Every stored event also wakes the streams
that follow the turn on this process (`EventHub`); across processes PostgreSQL's NOTIFY does
(`notices.py`). The database stays the single source of truth for the order and the `id`s.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any, Protocol, TypeVar

from prometheus_client import Histogram

from sleuth.agent.records import Query
from sleuth.agent.turn import PreparedTurn, Runtime
from sleuth.errors import ToldTooMany
from sleuth.store.records.outage import Reachability, patient
from sleuth.store.records.server_db import (
    TERMINAL_STATUSES,
    Holder,
    ServerDB,
    TurnPlaces,
    TurnPlacesFull,
    worker_name,
)

log = logging.getLogger("sleuth.api")
TURN_SECONDS = Histogram(
    "sleuth_turn_duration_seconds",
    "Seconds of the turns this process ran, from being held to their terminal state.",
    buckets=(0.5, 1, 2, 5, 10, 20, 30, 60, 120, 300, 900),
    registry=None,  # `operations.registry_of` registers it with each state's registry
)
T = TypeVar("T")
RETRY_AFTER_S = 5  # what a refused client is told to wait before any turn has finished here
MAX_RETRY_AFTER_S = 60


class EventHub:
    """Wakes asyncio waiters when a turn stores an event; called from turn threads and the listener."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._waiters: dict[str, set[tuple[asyncio.AbstractEventLoop, asyncio.Event]]] = {}
        self.closing = threading.Event()  # the server is stopping: streams end, clients resume elsewhere

    def close_streams(self) -> None:
        """A server's drain: every stream ends at its next wake-up (now), cleanly, without a terminal
        event, so its client reconnects with `Last-Event-ID`, to another server."""
        self.closing.set()
        self.notify_all()

    def subscribe(self, query_id: str) -> asyncio.Event:
        """An event set whenever `query_id` stores an event; clear it before each read."""
        waiter = asyncio.Event()
        with self._lock:
            self._waiters.setdefault(query_id, set()).add((asyncio.get_running_loop(), waiter))
        return waiter

    def unsubscribe(self, query_id: str, waiter: asyncio.Event) -> None:
        with self._lock:
            entries = self._waiters.get(query_id)
            if entries is None:
                return
            for entry in [e for e in entries if e[1] is waiter]:
                entries.discard(entry)
            if not entries:
                del self._waiters[query_id]

    def notify(self, query_id: str) -> None:
        with self._lock:
            entries = list(self._waiters.get(query_id, ()))
        for loop, waiter in entries:
            with contextlib.suppress(RuntimeError):  # that loop is closed: its stream is gone
                loop.call_soon_threadsafe(waiter.set)

    def notify_all(self) -> None:
        """Wake every stream (the listener reconnected: a notification may have been missed)."""
        with self._lock:
            ids = list(self._waiters)
        for query_id in ids:
            self.notify(query_id)


class TurnQueue(Protocol):
    """Where a turn waits for a worker when this process does not run it (`queue.JobQueue`)."""

    def defer_turn(self, query_id: str) -> None: ...


class TurnExecutor:
    """Runs admitted turns here or hands them to the queue, and holds them while they run."""

    def __init__(
        self,
        runtime: Runtime,
        max_concurrent: int,
        max_queued: int,
        per_key: int = 0,
        *,
        queue: TurnQueue | None = None,
        worker: str | None = None,
        heartbeat_s: float = 10.0,
        max_wait_s: float | None = None,
        database_wait_s: float = 0.0,
    ) -> None:
        self.runtime = runtime
        self.database_wait_s = database_wait_s  # a running turn's writes wait this long for PostgreSQL
        self.max_wait_s = max_wait_s
        self.db: ServerDB = runtime.db
        self.hub = EventHub()
        self.capacity = max(1, max_concurrent) + max(0, max_queued)
        self.key_share = min(self.capacity, per_key or max(1, self.capacity // 4))
        self.workers = max(1, max_concurrent)
        self.queue = queue
        self.worker = worker or worker_name()
        self.heartbeat_s = heartbeat_s
        self.lease_s = 3 * heartbeat_s
        self._pool = ThreadPoolExecutor(max_workers=self.workers, thread_name_prefix="sleuth-turn")
        # Admission (file reads, database writes, the sandbox probe) runs on threads of its own, off the
        # event loop, and runs to its end even when the request that started it goes away.
        self._admission = ThreadPoolExecutor(max_workers=4, thread_name_prefix="sleuth-admit")
        self._lock = threading.Lock()
        self._running: set[str] = set()
        self._held: set[str] = set()  # admitted here, held from admission, running or waiting for a thread
        # taken from the queue and held in the database: a runner is in `_running` before its hold
        # commits, and a heartbeat that read the holds in between must not take it for lost
        self._holding: set[str] = set()
        self._mean_turn_s: float | None = None  # a moving average of finished turns' durations
        self._stop = threading.Event()
        self._beat: threading.Thread | None = None
        self._reach = Reachability(self.lease_s)  # sweeps wait two leases after an outage
        self.last_beat: float | None = None  # when the heartbeat thread last ended a beat

    # ------------------------------------------------------------------------------ admission
    def retry_after(self) -> int:
        """Seconds until a place is likely free: a running turn ends about every mean-duration / workers
        seconds. A fixed guess until a turn has finished here."""
        if self._mean_turn_s is None:
            return RETRY_AFTER_S
        return max(1, min(MAX_RETRY_AFTER_S, math.ceil(self._mean_turn_s / self.workers)))

    def places(self, key: str | None) -> TurnPlaces:
        """The limits the admitting transaction checks for a turn of `key` (None: admins, no-auth)."""
        return TurnPlaces(self.capacity, key, self.key_share)

    def check_places(self, key: str | None) -> None:
        """The capacity check in spec/api.md §8.1's order (a read; the admitting transaction re-checks)."""
        try:
            self.db.check_places(self.places(key))
        except TurnPlacesFull as exc:
            raise self.refusal(exc) from None

    def refusal(self, full: TurnPlacesFull) -> ToldTooMany:
        extra: dict[str, Any] = {"limit": full.limit} if full.code == "key_turn_limit" else {}
        return ToldTooMany(full.code, str(full), retry_after_s=self.retry_after(), **extra)

    async def admit(self, fn: Callable[[], T]) -> T:
        """Run an admission step on an admission thread. It runs to its end even if the request is
        cancelled meanwhile, so a turn it stores is always submitted."""
        return await asyncio.shield(asyncio.wrap_future(self._admission.submit(fn)))

    # ------------------------------------------------------------------------------ running
    def submit(self, turn: PreparedTurn) -> Future[Query] | None:
        """Get an admitted turn run: on this process's pool (the future resolves to its final Query),
        or on the queue for a worker (None: follow it through the database). A turn the queue refuses
        is failed at once, never left waiting."""
        query_id = turn.query.id
        if self.queue is not None:
            self.runtime.forget(query_id)  # a worker restores it from the database
            try:
                self.queue.defer_turn(query_id)
            except Exception as exc:
                log.exception("turn %s could not be queued", query_id)
                self.db.end_turn(query_id, "failed", f"could not be queued: {type(exc).__name__}")
                self.hub.notify(query_id)
            return None
        future: Future[Query] = Future()
        with self._lock:
            self._held.add(query_id)
        self.start_heartbeat()  # its hold, taken at admission, is renewed while it waits and runs
        self._pool.submit(self._run, turn, future)
        return future

    def holder(self) -> Holder | None:
        """Who holds a turn admitted here from its admission on: this process when it runs it (no
        queue); None when it goes on the queue for a worker."""
        return Holder(self.worker, self.lease_s) if self.queue is None else None

    def run_queued(self, query_id: str) -> None:
        """A worker's job: restore the turn from the database and run it here, on the caller's thread.
        A turn no longer waiting (ended meanwhile, cancelled while queued, or taken) is left alone."""
        turn = self._restore(query_id)
        if turn is None:
            return
        future: Future[Query] = Future()
        self._run(turn, future)

    def _restore(self, query_id: str) -> PreparedTurn | None:
        """The admitted turn from the database, or None; a turn this process cannot rebuild (its context
        deleted meanwhile, its model missing from this worker's catalog) is failed with the reason,
        never left waiting."""
        try:
            return self.runtime.restore(query_id)
        except Exception as exc:
            log.warning("turn %s cannot run here: %s", query_id, exc)
            self.db.end_turn(query_id, "failed", f"could not start: {type(exc).__name__}: {str(exc)[:300]}")
            self.hub.notify(query_id)
            return None

    def _run(self, turn: PreparedTurn, future: Future[Query]) -> None:
        with patient(self.database_wait_s):  # a database restart pauses the turn; it does not lose it
            self._run_held(turn, future)

    def _run_held(self, turn: PreparedTurn, future: Future[Query]) -> None:
        query_id = turn.query.id
        began = time.monotonic()
        with self._lock:  # one runner per turn here: a cancel that ends a waiting turn races its thread
            taken = query_id in self._running
            self._running.add(query_id)
        try:
            if taken or not self.db.hold_turn(query_id, self.worker, self.lease_s):
                if not taken:
                    self.runtime.forget(query_id)  # cancelled while it waited, or another worker has it
                stored = self.db.get_query(query_id)
                future.set_result(Query.model_validate(stored) if stored else turn.query)
                return
            with self._lock:
                self._holding.add(query_id)
            self.start_heartbeat()
            if self.db.cancel_asked(query_id):
                turn.cancel_event.set()
            future.set_result(self.runtime.run(turn, lambda event: self.hub.notify(query_id)))
            TURN_SECONDS.observe(time.monotonic() - began)
        except BaseException as exc:  # `run` fails the turn itself; this is a last resort for waiters
            log.exception("turn %s crashed outside the runtime", query_id)
            future.set_exception(exc)
        finally:
            took = time.monotonic() - began
            with self._lock:
                if not taken:
                    self._running.discard(query_id)
                    self._held.discard(query_id)
                    self._holding.discard(query_id)
                    mean = self._mean_turn_s
                    self._mean_turn_s = took if mean is None else 0.8 * mean + 0.2 * took
            self.hub.notify(query_id)  # no longer active: followers may finish

    def running(self) -> list[str]:
        with self._lock:
            return sorted(self._running)

    # ------------------------------------------------------------------------------ heartbeat
    def start_heartbeat(self) -> None:
        """Beat from now on (idempotent). A turn run here starts it; with a queue, `open_server` starts
        it at once, since each beat also fails the turns of dead workers (any process may, and an API
        server without workers still should)."""
        with self._lock:
            if self._beat is not None or self._stop.is_set():
                return
            self._beat = threading.Thread(target=self._heartbeat, name="sleuth-heartbeat", daemon=True)
            self._beat.start()

    def _heartbeat(self) -> None:
        """Renew the holds of the turns running here, and stop those a stop was asked for elsewhere."""
        while not self._stop.wait(self.heartbeat_s):
            try:
                self.beat()
            finally:
                self.last_beat = time.monotonic()  # alive, database or not (`server.liveness`)

    def beat(self) -> None:
        """One heartbeat (the thread calls it). It renews the holds of the turns running here, stops
        those a stop was asked for on any server, stops those this process lost (its lease ran out while
        it could not reach the database, and another process failed them: the database fences off its
        writes), and with a queue fails the turns of dead workers, but only once this process has
        itself been connected for two leases (after an outage, the others renew first)."""
        with self._lock:
            running = sorted(self._holding | self._held)
        try:
            held = self.db.renew_holds(self.worker, self.lease_s, running)
            if not running:  # nothing renewed: one round trip, so an outage is seen here too
                self.db.database.ping()
        except Exception:  # the database is away: the next beat tries again, the holds last 3 beats
            log.warning("heartbeat of %s failed", self.worker, exc_info=True)
            self._reach.lost()
            return
        self._reach.reached()
        still = {h.query_id for h in held}
        for h in held:
            if h.cancel_requested:
                self.runtime.cancel(h.query_id)
        for query_id in running:
            if query_id not in still and query_id in (self._holding | self._held):
                log.warning("turn %s: this process lost its hold; stopping it", query_id)
                self.runtime.cancel(query_id)
        if not self._reach.trusted:
            return
        try:
            for query_id in self.db.fail_lost_turns(max_wait_s=self.max_wait_s):
                log.warning("turn %s failed: its worker stopped answering (or none took it)", query_id)
                self.hub.notify(query_id)
        except Exception:
            log.warning("reaping by %s failed", self.worker, exc_info=True)
            self._reach.lost()

    # ------------------------------------------------------------------------------ control
    def cancel(self, query_id: str) -> bool:
        """Stop a turn (spec/api.md §9.4) from any server. A waiting turn ends at once; a running one
        stops between steps with its sandbox killed, on whichever process holds it. False when the
        turn had already ended."""
        outcome = self.db.request_cancel(query_id)
        if outcome == "done":
            return False
        with self._lock:  # held here from its admission, still waiting for a thread
            waiting_here = query_id in self._held and query_id not in self._running
        if outcome == "asked" and not waiting_here:
            self.runtime.cancel(query_id)  # held here: stop it now (elsewhere: NOTIFY or its heartbeat)
        else:
            # Waiting (on the queue, or for a thread here): end it now, run here with the stop asked, so
            # it is recorded like any cancel; its own thread, should it start meanwhile, stops too.
            self.runtime.cancel(query_id)
            turn = self._restore(query_id)
            if turn is not None:
                turn.cancel_event.set()
                self._run(turn, Future())
            else:
                self.db.end_turn(query_id, "cancelled", "cancelled")
        self.hub.notify(query_id)
        return True

    def close(self) -> None:
        self.shutdown()

    def shutdown(self) -> None:
        """Stop taking turns and cancel the ones running here; they record it on their threads."""
        self._stop.set()
        for query_id in self.running():
            self.runtime.cancel(query_id, "cancelled: the server is stopping")
        self._pool.shutdown(wait=False, cancel_futures=True)
        self._admission.shutdown(wait=False)


def settled(db: ServerDB, query_id: str) -> bool:
    """The turn ended and let go of its session (a next turn of the session may be asked now)."""
    document = db.get_query(query_id)
    if document is None:
        return True
    if document.get("status") not in TERMINAL_STATUSES:
        return False
    session = db.get_session(str(document.get("session_id")))
    return session is None or session.get("active_query_id") != query_id


async def wait_until(predicate: Callable[[], bool], hub: EventHub, query_id: str, timeout_s: float) -> bool:
    """Wait, woken by the turn's events (or every 0.25 s), until `predicate()` holds or `timeout_s`
    passes. `predicate` reads the database: run it off the event loop."""
    waiter = hub.subscribe(query_id)
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout_s
    try:
        while True:
            waiter.clear()
            if await asyncio.to_thread(predicate):
                return True
            remaining = deadline - loop.time()
            if remaining <= 0:
                return False
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(waiter.wait(), timeout=min(remaining, 0.25))
    finally:
        hub.unsubscribe(query_id, waiter)
