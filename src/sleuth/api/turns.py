"""The bounded turn executor (spec/api.md §8.1 "Capacity"): at most `max_concurrent_turns` turns run at
once on worker threads, at most `max_queued_turns` more wait (stored `in_progress`), and a request
beyond that is refused with `429 too_many_queries` before anything is stored. One query key may hold at
most its share of those places (`max_turns_per_key`), so another key is still admitted: past it, `429
key_turn_limit`. Admins and no-auth mode (one implicit user) pass no key and are held only to the total.

Turns run on their own threads, never on the event loop and never tied to a request: a client that
disconnects (sync, stream or background) leaves its turn running, pollable and streamable.

Every stored event also wakes the streams that follow the turn (`EventHub`): a stream then reads the
new events from the database, which stays the single source of truth for the order and the `id`s.
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
from typing import Any, TypeVar

from fastapi import Request

from sleuth.agent.records import Query
from sleuth.agent.turn import PreparedTurn, Runtime
from sleuth.api.errors import ApiError
from sleuth.api.state import api_state

log = logging.getLogger("sleuth.api")
T = TypeVar("T")
RETRY_AFTER_S = 5  # what a refused client is told to wait before any turn has finished here
MAX_RETRY_AFTER_S = 60


class EventHub:
    """Wakes asyncio waiters when a turn stores an event; called from turn threads."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._waiters: dict[str, set[tuple[asyncio.AbstractEventLoop, asyncio.Event]]] = {}

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


class _Entry:
    """One admitted turn: whoever claims it first (a worker, or a cancel while it waits) runs it."""

    def __init__(self, turn: PreparedTurn, key: str | None) -> None:
        self.turn = turn
        self.key = key  # the query key whose share the turn's place counts against
        self.claimed = False
        self.future: Future[Query] = Future()


class TurnExecutor:
    """A thread pool with a bounded backlog. `reserve()` takes a place (or refuses with 429) during
    admission, before the turn is stored; `submit()` runs the prepared turn in that place."""

    def __init__(self, runtime: Runtime, max_concurrent: int, max_queued: int, per_key: int = 0) -> None:
        self.runtime = runtime
        self.hub = EventHub()
        self.capacity = max(1, max_concurrent) + max(0, max_queued)
        self.key_share = min(self.capacity, per_key or max(1, self.capacity // 4))
        self.workers = max(1, max_concurrent)
        self._pool = ThreadPoolExecutor(max_workers=self.workers, thread_name_prefix="sleuth-turn")
        # Admission (file reads, database writes, the sandbox probe) runs on threads of its own, off the
        # event loop, and runs to its end even when the request that started it goes away.
        self._admission = ThreadPoolExecutor(max_workers=4, thread_name_prefix="sleuth-admit")
        self._lock = threading.Lock()
        self._taken = 0
        self._held: dict[str, int] = {}  # places held per query key
        self._entries: dict[str, _Entry] = {}
        self._mean_turn_s: float | None = None  # a moving average of finished turns' durations

    def retry_after(self) -> int:
        """Seconds until a place is likely free: a running turn ends about every mean-duration / workers
        seconds. A fixed guess until a turn has finished here."""
        if self._mean_turn_s is None:
            return RETRY_AFTER_S
        return max(1, min(MAX_RETRY_AFTER_S, math.ceil(self._mean_turn_s / self.workers)))

    def reserve(self, key: str | None = None) -> None:
        """Take a place for one turn; `429 too_many_queries` when running + queued turns fill the pool,
        `429 key_turn_limit` when `key` (a query key; None for admins and no-auth) holds its share."""
        with self._lock:
            held = self._held.get(key, 0) if key is not None else 0
            if key is not None and held >= self.key_share:
                raise ApiError(
                    429,
                    "key_turn_limit",
                    f"this key is running or queueing {held} turns, its share of the server's "
                    f"{self.capacity} places; retry later",
                    headers={"Retry-After": str(self.retry_after())},
                    limit=self.key_share,
                )
            if self._taken >= self.capacity:
                raise ApiError(
                    429,
                    "too_many_queries",
                    f"the server is running or queueing {self._taken} turns, its limit; retry later",
                    headers={"Retry-After": str(self.retry_after())},
                )
            self._taken += 1
            if key is not None:
                self._held[key] = held + 1

    def unreserve(self, key: str | None = None) -> None:
        """Give back a place whose turn was never submitted (admission failed after `reserve`)."""
        with self._lock:
            self._release(key)

    def _release(self, key: str | None) -> None:
        """One place free again, and one fewer held by `key`; under the lock."""
        self._taken = max(0, self._taken - 1)
        if key is not None:
            left = self._held.get(key, 0) - 1
            if left > 0:
                self._held[key] = left
            else:
                self._held.pop(key, None)

    async def admit(self, fn: Callable[[], T]) -> T:
        """Run an admission step on an admission thread. It runs to its end even if the request is
        cancelled meanwhile, so a turn it stores is always submitted."""
        return await asyncio.shield(asyncio.wrap_future(self._admission.submit(fn)))

    def submit(self, turn: PreparedTurn, key: str | None = None) -> Future[Query]:
        """Queue a prepared turn in a place taken by `reserve(key)`; the future resolves to its final
        Query."""
        entry = _Entry(turn, key)
        with self._lock:
            self._entries[turn.query.id] = entry
        self._pool.submit(self._work, entry)
        return entry.future

    def _claim(self, entry: _Entry) -> bool:
        with self._lock:
            if entry.claimed:
                return False
            entry.claimed = True
            return True

    def _work(self, entry: _Entry) -> None:
        if self._claim(entry):
            self._run(entry)

    def _run(self, entry: _Entry) -> None:
        query_id = entry.turn.query.id
        began = time.monotonic()
        try:
            entry.future.set_result(self.runtime.run(entry.turn, lambda event: self.hub.notify(query_id)))
        except BaseException as exc:  # `run` fails the turn itself; this is a last resort for waiters
            log.exception("turn %s crashed outside the runtime", query_id)
            entry.future.set_exception(exc)
        finally:
            took = time.monotonic() - began
            with self._lock:
                self._release(entry.key)
                self._entries.pop(query_id, None)
                mean = self._mean_turn_s
                self._mean_turn_s = took if mean is None else 0.8 * mean + 0.2 * took
            self.hub.notify(query_id)  # no longer active: followers may finish

    def holds(self, query_id: str) -> bool:
        """The turn is queued or running here (its place in the pool is still taken)."""
        with self._lock:
            return query_id in self._entries

    def cancel(self, query_id: str) -> bool:
        """Stop a turn of this server (spec/api.md §9.4). A running turn stops between steps with its sandbox
        killed; a queued one is ended at once, here, instead of waiting for a worker. False when the
        turn is not running here (unknown, finished, or owned by another process)."""
        if not self.runtime.cancel(query_id):
            return False
        with self._lock:
            entry = self._entries.get(query_id)
        if entry is not None and self._claim(entry):
            self._run(entry)  # the cancel flag is set: the turn records `cancelled` and returns
        return True

    def shutdown(self) -> None:
        """Stop taking turns and cancel the ones admitted; running ones finish on their threads."""
        with self._lock:
            ids = list(self._entries)
        for query_id in ids:
            self.cancel(query_id)
        self._pool.shutdown(wait=False)
        self._admission.shutdown(wait=False)


_executor_lock = threading.Lock()


def executor(request: Request) -> TurnExecutor:
    """The app's executor, made on first use from the server's settings."""
    app_state: Any = request.app.state
    found: TurnExecutor | None = getattr(app_state, "sleuth_turns", None)
    if found is not None:
        return found
    with _executor_lock:
        found = getattr(app_state, "sleuth_turns", None)
        if found is None:
            state = api_state(request)
            settings = state.settings
            found = TurnExecutor(
                state.runtime,
                settings.max_concurrent_turns,
                settings.max_queued_turns,
                settings.max_turns_per_key,
            )
            app_state.sleuth_turns = found
        return found


async def wait_for(future: Future[Query]) -> Query:
    """Await a turn without tying it to the request: a cancelled await leaves the turn running."""
    return await asyncio.shield(asyncio.wrap_future(future))


async def wait_until(predicate: Callable[[], bool], hub: EventHub, query_id: str, timeout_s: float) -> bool:
    """Wait, woken by the turn's events, until `predicate()` holds or `timeout_s` passes."""
    waiter = hub.subscribe(query_id)
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout_s
    try:
        while True:
            waiter.clear()
            if predicate():
                return True
            remaining = deadline - loop.time()
            if remaining <= 0:
                return False
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(waiter.wait(), timeout=min(remaining, 0.25))
    finally:
        hub.unsubscribe(query_id, waiter)
