"""`sleuth worker`: runs the turns and curates that API servers put on the PostgreSQL job queue.

A worker is the same engine as a server without the HTTP side: `server.build.open_server` gives it the
database, the runtime, the executor and the task service; `queue.run_worker` feeds it jobs, at most
`worker_concurrency` at once. While a job runs, the worker's heartbeat renews its hold in the database
(`ServerDB.renew_holds`, `TaskStore.renew`) and picks up stops asked on any server; a worker that dies
stops renewing, and any other process fails its turns and begins its curates again.

A worker that loses the database does not exit: it tries again with backoff (1 s, doubling to 30 s) and
takes jobs again once the database answers.

On SIGTERM (or Ctrl-C) the worker drains, within `task_stop_timeout_s` + `DRAIN_MARGIN_S` (10 s) in
all: it takes no new jobs and lets those running go on for `task_stop_timeout_s`; then it stops them
(a curate is handed back to the queue for another worker, a turn ends `cancelled` with `cancelled: the
worker is stopping`) and gives them the margin to record it. A job that has not stopped by then (a
turn waiting on a model call, a curate deep in one step) is recorded the same way by the drain itself,
and the process exits without waiting for its thread (`_Drain`). A second signal ends it at once.

With `--metrics-port`, the worker also serves `/healthz` there: its liveness (`server/liveness.py`).
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Sequence
from typing import Any

from sqlalchemy.exc import SQLAlchemyError

from sleuth.errors import require_extra
from sleuth.models.embedder import get_embedder
from sleuth.server.build import open_server, worker_options
from sleuth.server.liveness import Beating, Liveness, serve
from sleuth.server.metrics import registry_of
from sleuth.server.queue import DRAIN_MARGIN_S, QUEUES, JobRunner, run_worker
from sleuth.server.task_service import TaskService
from sleuth.settings import Settings
from sleuth.store.contexts.home import Home

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
    the worker serves `/metrics` (Prometheus, no key: bind it privately) and `/healthz` there."""
    require_extra("sleuth worker", "postgres", "procrastinate", "psycopg")
    import psycopg
    from procrastinate.exceptions import ConnectorException

    state = open_server(home, overrides, role="worker", settings=settings)
    try:
        liveness = Liveness(state.settings.worker_heartbeat_s)
        for part, service in (("turn heartbeat", state.turns), ("task heartbeat", state.tasks)):
            if isinstance(service, Beating):
                liveness.watch(part, service)
        if metrics_port is not None:
            serve(metrics_port, metrics_addr, registry_of(state), liveness)
        runner, options = worker_options(state)
        drain = _Drain(runner, options["shutdown_grace_s"])
        # Load the default embedder now, beside the start-up: every turn's search and every curate's
        # parts need it, and loading it inside the first job delays that job by a second or two.
        threads = state.settings.embed_threads
        threading.Thread(target=_load_embedder, args=(threads,), name="sleuth-embedder", daemon=True).start()
        log.info("worker %s: %d job(s) at once from %s", options["name"], options["concurrency"], queues)
        backoff = 1.0
        while True:
            began = time.monotonic()
            try:
                run_worker(
                    state.db.database,
                    runner,
                    queues=queues,
                    pulse=liveness.beat,
                    on_signal=drain.begin,
                    **options,
                )
                return  # stopped by a signal, drained
            except (ConnectorException, psycopg.Error, SQLAlchemyError, OSError) as exc:
                if drain.begun.is_set():
                    return  # asked to stop: not a time to take jobs again
                # The database went away: the jobs running here go on (their holds lapse if it stays
                # away past 3 beats); take jobs again once it answers.
                if time.monotonic() - began > MAX_BACKOFF_S:
                    backoff = 1.0  # it ran a while: a new outage, not the same one
                log.warning("worker lost the database (%s); again in %.0f s", type(exc).__name__, backoff)
                _wait(backoff, liveness)
                backoff = min(MAX_BACKOFF_S, backoff * 2)
    finally:
        if isinstance(state.tasks, TaskService):
            state.tasks.release_held()
        state.close()


def _wait(seconds: float, liveness: Liveness) -> None:
    """Sleep, beating: a worker waiting for the database is alive."""
    end = time.monotonic() + seconds
    while (left := end - time.monotonic()) > 0:
        liveness.beat()
        time.sleep(min(1.0, left))


class _Drain:
    """A worker's drain, bounded: the running jobs get `grace_s`, then `DRAIN_MARGIN_S` to record that
    they were stopped. Past that, whatever still runs here is recorded as ended by the drain
    (`JobRunner.abandon`) and the process exits, leaving the threads that did not stop: a thread blocked
    in a model call cannot be interrupted, and Python would wait for it at exit."""

    def __init__(self, runner: JobRunner, grace_s: float) -> None:
        self.runner = runner
        self.grace_s = grace_s
        self.limit_s = grace_s + DRAIN_MARGIN_S
        self.begun = threading.Event()

    def begin(self) -> None:
        """The signal came (on the worker's event loop): start the clock."""
        log.info(
            "worker draining: no new jobs; those running get %g s, then are stopped (%g s in all at most)",
            self.grace_s,
            self.limit_s,
        )
        self.begun.set()
        timer = threading.Timer(self.limit_s, self.overdue)
        timer.daemon = True
        timer.start()

    def overdue(self) -> None:
        log.warning("the drain passed %g s: ending the jobs still running here, and exiting", self.limit_s)
        try:
            self.runner.abandon()
        except Exception:  # the database is away: the others fail its turns after a lease
            log.exception("the jobs still running could not be ended")
        logging.shutdown()
        os._exit(0)
