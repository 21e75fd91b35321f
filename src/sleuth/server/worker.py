"""`sleuth worker`: runs the turns and curates that API servers put on the PostgreSQL job queue.

A worker is the same engine as a server without the HTTP side: `server.build.open_server` gives it the
database, the runtime, the executor and the task service; `queue.run_worker` feeds it jobs, at most
`worker_concurrency` at once. While a job runs, the worker's heartbeat renews its hold in the database
(`ServerDB.renew_holds`, `TaskStore.renew`) and picks up stops asked on any server; a worker that dies
stops renewing, and any other process fails its turns and begins its curates again.

A worker that loses the database does not exit: it tries again with backoff (1 s, doubling to 30 s) and
takes jobs again once the database answers.

On SIGTERM (or Ctrl-C) the worker drains: procrastinate stops taking jobs and waits up to
`task_stop_timeout_s` for those running; a curate still running then is handed back to the queue for
another worker, a turn still running ends `cancelled` with the reason.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Sequence
from typing import Any

from prometheus_client import start_http_server
from sqlalchemy.exc import SQLAlchemyError

from sleuth.errors import require_extra
from sleuth.models.embedder import get_embedder
from sleuth.server.build import open_server, worker_options
from sleuth.server.metrics import registry_of
from sleuth.server.queue import QUEUES, run_worker
from sleuth.server.task_service import TaskService
from sleuth.settings import Settings
from sleuth.store.home import Home

log = logging.getLogger("sleuth.worker")
MAX_BACKOFF_S = 30.0


def _load_embedder(threads: int | None) -> None:
    try:
        get_embedder("default", threads=threads).embed(["warm up"])
    except Exception:  # the first job that needs it reports the failure
        log.warning("could not load the embedder at start", exc_info=True)


def work(
    home: Home,
    settings: Settings,
    overrides: dict[str, Any] | None = None,
    *,
    queues: Sequence[str] = QUEUES,
    metrics_port: int | None = None,
    metrics_addr: str = "127.0.0.1",
) -> None:
    """Run a worker until SIGTERM/SIGINT, on the `settings` `sleuth worker` read at its start (with
    `overrides` on top); `ServeError` before anything starts without PostgreSQL. With `metrics_port`,
    the worker serves `/metrics` there (Prometheus, no key: bind it privately)."""
    require_extra("sleuth worker", "postgres", "procrastinate", "psycopg")
    import psycopg
    from procrastinate.exceptions import ConnectorException

    state = open_server(home, overrides, role="worker", settings=settings)
    try:
        if metrics_port is not None:
            start_http_server(metrics_port, addr=metrics_addr, registry=registry_of(state))
        runner, options = worker_options(state)
        # Load the default embedder now, beside the start-up: every turn's search and every curate's
        # parts need it, and loading it inside the first job delays that job by a second or two.
        threads = state.settings.embed_threads
        threading.Thread(target=_load_embedder, args=(threads,), name="sleuth-embedder", daemon=True).start()
        log.info("worker %s: %d job(s) at once from %s", options["name"], options["concurrency"], queues)
        backoff = 1.0
        while True:
            began = time.monotonic()
            try:
                run_worker(state.db.database, runner, queues=queues, **options)
                return  # stopped by a signal, drained
            except (ConnectorException, psycopg.Error, SQLAlchemyError, OSError) as exc:
                # The database went away: the jobs running here go on (their holds lapse if it stays
                # away past 3 beats); take jobs again once it answers.
                if time.monotonic() - began > MAX_BACKOFF_S:
                    backoff = 1.0  # it ran a while: a new outage, not the same one
                log.warning("worker lost the database (%s); again in %.0f s", type(exc).__name__, backoff)
                time.sleep(backoff)
                backoff = min(MAX_BACKOFF_S, backoff * 2)
    finally:
        if isinstance(state.tasks, TaskService):
            state.tasks.release_held()
        state.close()
