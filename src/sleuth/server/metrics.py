"""What operating a deployment reads of a server process: its readiness (the database, the home, the
shared storage and the notification connection) and its Prometheus registry (the deployment's gauges,
read from the database at each scrape, and this process's turn durations). The routes that serve them
are `api/operations.py`; a worker serves the same registry on its own port."""

from __future__ import annotations

import os
import tempfile
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Protocol, runtime_checkable

from prometheus_client import CollectorRegistry
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from sleuth.server.state import Server
from sleuth.server.turns import TURN_SECONDS
from sleuth.store.contexts.replica import shared_storage
from sleuth.store.records.tasks import TaskStore


@runtime_checkable
class QueueGauges(Protocol):
    """What a scrape reads of the job queue (`queue.JobQueue`, which this module does not import: the
    queue needs the postgres extra, and `/metrics` is served by every install)."""

    def depth(self) -> dict[str, int]: ...

    def worker_heartbeats(self) -> dict[str, float]:
        """Seconds since each registered worker's last heartbeat, by the name its records carry."""
        ...


#: How long `/readyz` waits for each check: a hung dependency makes it fail fast, not hang the probe.
READY_DEADLINE_S = 5.0
_probes = ThreadPoolExecutor(max_workers=8, thread_name_prefix="sleuth-ready")


def readiness(state: Server) -> dict[str, str]:
    """Each check's outcome, `ok` or what failed, each within `READY_DEADLINE_S` (a check still running
    then is left to end on its own thread, and reported as not answering)."""
    checks = {"database": _database_check, "home": _home_check}
    if shared_storage(state.home) is not None:
        checks["storage"] = _storage_check
    running = {name: _probes.submit(check, state) for name, check in checks.items()}
    deadline = time.monotonic() + READY_DEADLINE_S
    outcome: dict[str, str] = {}
    for name, future in running.items():
        try:
            outcome[name] = future.result(timeout=max(0.0, deadline - time.monotonic()))
        except TimeoutError:
            outcome[name] = f"no answer within {READY_DEADLINE_S:.0f} s"
    listener: Any = state.listener
    if listener is not None:
        outcome["notifications"] = "ok" if listener.connected.is_set() else "reconnecting"
    return outcome


def _database_check(state: Server) -> str:
    try:
        state.db.database.ping()
    except Exception as exc:
        return f"unreachable: {type(exc).__name__}"
    return "ok"


def _home_check(state: Server) -> str:
    try:
        root = state.home.root
        root.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=root, prefix=".ready-", delete=True) as probe:
            probe.write(b"ok")
            probe.flush()
            os.fsync(probe.fileno())
    except OSError as exc:
        return f"not writable: {exc.strerror or type(exc).__name__}"
    return "ok"


def _storage_check(state: Server) -> str:
    storage = shared_storage(state.home)
    try:
        if storage is not None:
            storage.ping()
    except Exception as exc:
        return f"unreachable: {type(exc).__name__}"
    return "ok"


class _Deployment(Collector):
    """The deployment's counts, read from the database at each scrape."""

    def __init__(self, state: Server) -> None:
        self.state = state
        store = getattr(state.tasks, "store", None)
        self.tasks = store if isinstance(store, TaskStore) else TaskStore(state.db.database)

    def collect(self) -> Iterator[Metric]:
        state = self.state
        turns = GaugeMetricFamily(
            "sleuth_turns", "Turns in flight on every server, by phase.", labels=["phase"]
        )
        for phase, count in state.db.turn_counts().items():
            turns.add_metric([phase], count)
        yield turns
        tasks = GaugeMetricFamily("sleuth_tasks", "Live tasks on every server, by state.", labels=["state"])
        for task_state, count in self.tasks.state_counts().items():
            tasks.add_metric([task_state], count)
        yield tasks
        queue = state.queue
        if isinstance(queue, QueueGauges):
            depth = GaugeMetricFamily(
                "sleuth_queue_depth", "Jobs waiting for a worker, by queue.", labels=["queue"]
            )
            for name, count in queue.depth().items():
                depth.add_metric([name], count)
            yield depth
            beats = queue.worker_heartbeats()
            fresh = 3 * state.settings.worker_heartbeat_s  # as a hold: silent for 3 beats is gone
            yield GaugeMetricFamily(
                "sleuth_workers",
                "Workers whose heartbeat is at most three heartbeats old.",
                value=sum(1 for seconds in beats.values() if seconds <= fresh),
            )
            age = GaugeMetricFamily(
                "sleuth_worker_heartbeat_age_seconds",
                "Seconds since each registered worker's last heartbeat, by the worker's name.",
                labels=["worker"],
            )
            for worker, seconds in beats.items():
                age.add_metric([worker], seconds)
            yield age


def registry_of(state: Server) -> CollectorRegistry:
    """One registry per state (a process may hold several in tests): the deployment's gauges and this
    process's turn durations."""
    if state.registry is None:
        registry = CollectorRegistry()
        registry.register(_Deployment(state))
        registry.register(TURN_SECONDS)
        state.registry = registry
    return state.registry
