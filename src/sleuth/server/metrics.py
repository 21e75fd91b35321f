"""What operating a deployment reads of a server process: its readiness (the database, the home, the
shared storage and the notification connection) and its Prometheus registry (the deployment's gauges,
read from the database at each scrape, and this process's turn durations). The routes that serve them
are `api/operations.py`; a worker serves the same registry on its own port."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator
from typing import Any, Protocol, runtime_checkable

from prometheus_client import CollectorRegistry
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from sleuth.server.state import Server
from sleuth.server.turns import TURN_SECONDS
from sleuth.store.replica import shared_storage
from sleuth.store.tasks import TaskStore


@runtime_checkable
class QueueGauges(Protocol):
    """What a scrape reads of the job queue (`queue.JobQueue`, which this module does not import: the
    queue needs the postgres extra, and `/metrics` is served by every install)."""

    def depth(self) -> dict[str, int]: ...

    def worker_heartbeats(self) -> dict[str, float]: ...


def readiness(state: Server) -> dict[str, str]:
    """Each check's outcome, `ok` or what failed."""
    checks: dict[str, str] = {}
    try:
        state.db.database.ping()
        checks["database"] = "ok"
    except Exception as exc:
        checks["database"] = f"unreachable: {type(exc).__name__}"
    try:
        root = state.home.root
        root.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=root, prefix=".ready-", delete=True) as probe:
            probe.write(b"ok")
            probe.flush()
            os.fsync(probe.fileno())
        checks["home"] = "ok"
    except OSError as exc:
        checks["home"] = f"not writable: {exc.strerror or type(exc).__name__}"
    storage = shared_storage(state.home)
    if storage is not None:
        try:
            storage.ping()
            checks["storage"] = "ok"
        except Exception as exc:
            checks["storage"] = f"unreachable: {type(exc).__name__}"
    listener: Any = state.listener
    if listener is not None:
        checks["notifications"] = "ok" if listener.connected.is_set() else "reconnecting"
    return checks


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
            yield GaugeMetricFamily("sleuth_workers", "Workers registered with the queue.", value=len(beats))
            age = GaugeMetricFamily(
                "sleuth_worker_heartbeat_age_seconds",
                "Seconds since each worker's last heartbeat.",
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
