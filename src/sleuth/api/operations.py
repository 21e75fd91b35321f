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
import time

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse, Response
from prometheus_client import generate_latest
from starlette.concurrency import run_in_threadpool

from sleuth.api.auth import AdminKey
from sleuth.api.state import api_state
from sleuth.server.metrics import readiness, registry_of

log = logging.getLogger("sleuth.api")
router = APIRouter()


@router.get("/readyz", include_in_schema=False)
async def readyz(request: Request) -> JSONResponse:
    checks = await run_in_threadpool(readiness, api_state(request))
    ready = all(value == "ok" for value in checks.values())
    return JSONResponse(
        {"status": "ready" if ready else "not_ready", **checks}, status_code=200 if ready else 503
    )


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
