"""Operating a deployment: liveness (`/healthz`), readiness (`/readyz`) and Prometheus metrics (`/metrics`).

- `/healthz` answers while the process serves HTTP: a load balancer restarts a process that fails it.
- `/readyz` answers 200 only when the database answers, the home (contexts, and the node's cache)
  can be read and written, the shared storage (`SLEUTH_STORAGE_URL`) answers, and, with PostgreSQL,
  this process's notification connection is up; else 503 with what is wrong. A server that loses the
  database is not ready until it is back (SQLAlchemy's pool reconnects on the next use); it is never
  stopped for it.
- `/metrics` (admin keys when keys are required) is the Prometheus text format, through the field's
  client library: turns waiting and running across every server, tasks per state, queue depth per
  job kind, worker heartbeats, and this process's turn durations. The counts are read from the
  database at each scrape, so any server gives the deployment's view.
"""

from __future__ import annotations

import logging
import os
import tempfile
import time
from collections.abc import Iterator
from typing import Any, Protocol, runtime_checkable

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse, Response
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector
from starlette.concurrency import run_in_threadpool

from sleuth.api.auth import AdminKey
from sleuth.api.state import ApiState, api_state
from sleuth.api.turns import TURN_SECONDS
from sleuth.store.replica import shared_storage
from sleuth.store.tasks import TaskStore

log = logging.getLogger("sleuth.api")
router = APIRouter()


@runtime_checkable
class QueueGauges(Protocol):
    """What a scrape reads of the job queue (`queue.JobQueue`, which this module does not import: the
    queue needs the postgres extra, and `/metrics` is served by every install)."""

    def depth(self) -> dict[str, int]: ...

    def worker_heartbeats(self) -> dict[str, float]: ...


def readiness(state: ApiState) -> dict[str, str]:
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


@router.get("/readyz", include_in_schema=False)
async def readyz(request: Request) -> JSONResponse:
    checks = await run_in_threadpool(readiness, api_state(request))
    ready = all(value == "ok" for value in checks.values())
    return JSONResponse(
        {"status": "ready" if ready else "not_ready", **checks}, status_code=200 if ready else 503
    )


class _Deployment(Collector):
    """The deployment's counts, read from the database at each scrape."""

    def __init__(self, state: ApiState) -> None:
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


def registry_of(state: ApiState) -> CollectorRegistry:
    """One registry per state (a process may hold several in tests): the deployment's gauges and this
    process's turn durations."""
    if state.registry is None:
        registry = CollectorRegistry()
        registry.register(_Deployment(state))
        registry.register(TURN_SECONDS)
        state.registry = registry
    return state.registry


@router.get("/metrics", include_in_schema=False)
async def metrics(request: Request, _who: AdminKey) -> Response:
    state = api_state(request)
    began = time.monotonic()
    try:
        body = await run_in_threadpool(generate_latest, registry_of(state))
    except Exception as exc:  # the database is away: say so in the exposition's own terms
        log.warning("metrics: %s", exc)
        return Response(f"# sleuth: metrics unavailable: {type(exc).__name__}\n", status_code=503)
    log.debug("metrics in %.3f s", time.monotonic() - began)
    return Response(body, media_type="text/plain; version=0.0.4; charset=utf-8")
