"""The durable job queue on PostgreSQL: question turns and curates wait here for a `sleuth worker`.

Built on procrastinate (chosen over pgqueuer: a decade-old, well-documented project with sync and async
APIs, worker heartbeats and stalled-job detection, LISTEN/NOTIFY wake-ups with polling as a fallback,
and a plain SQL schema we can install in our own migration transaction; pgqueuer is async-only and
younger). Sleuth keeps its own records of what a job is about (the Query, the task row) and of who
holds it (`ServerDB.hold_turn`, `TaskStore.hold`): a job carries only an id, so a job run twice, or
after its turn was cancelled, finds the record ended and does nothing.

Two queues: `turns` (short, interactive) and `tasks` (curates: long). A worker serves both, with its
`worker_concurrency` places; a deployment may run workers for one queue only (`--queue`).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from sqlalchemy import text
from sqlalchemy.engine import Connection, make_url

from sleuth.errors import require_extra
from sleuth.server.task_service import TaskService
from sleuth.server.turns import TurnExecutor
from sleuth.store.database import Database

if TYPE_CHECKING:  # the postgres extra: imported where a queue is opened, so the core install starts
    import procrastinate

log = logging.getLogger("sleuth.queue")
TURNS = "turns"
TASKS = "tasks"
QUEUES = (TURNS, TASKS)
TURN_JOB = "sleuth.turn"
TASK_JOB = "sleuth.task"
PART_JOB = "sleuth.part"  # help with a split task's parts (a curate's sources)


Abort = Callable[[], bool]  # procrastinate's `should_abort`: the worker is stopping past its grace


class JobRunner(Protocol):
    """What a worker's jobs call (`JobsHere`; tests may pass their own)."""

    def run_turn(self, query_id: str, abort: Abort) -> None: ...

    def run_task(self, task_id: str, abort: Abort) -> None: ...

    def run_parts(self, task_id: str, abort: Abort) -> None: ...


@dataclass(frozen=True)
class JobsHere:
    """The jobs run by this process's executor and task service (`sleuth worker`, `--with-worker`)."""

    turns: TurnExecutor
    tasks: TaskService

    def run_turn(self, query_id: str, abort: Abort) -> None:
        with _watching(abort, lambda: self.turns.runtime.cancel(query_id)):
            self.turns.run_queued(query_id)

    def run_task(self, task_id: str, abort: Abort) -> None:
        with _watching(abort, lambda: self.tasks.release_now(task_id)):
            self.tasks.run_queued(task_id)

    def run_parts(self, task_id: str, abort: Abort) -> None:
        self.tasks.run_parts(task_id, abort)


def conninfo(url: str) -> str:
    """A libpq connection string from a `postgresql://` (or `postgresql+psycopg://`) URL."""
    parsed = make_url(url.replace("postgres://", "postgresql://", 1))
    return parsed.set(drivername="postgresql").render_as_string(hide_password=False)


def install_schema(database: Database) -> None:
    """procrastinate's tables, installed once, under the schema lock with Sleuth's own (`prepare`)."""

    from procrastinate.schema import SchemaManager

    def install(conn: Connection) -> None:
        if conn.execute(text("SELECT to_regclass('procrastinate_jobs')")).scalar() is None:
            # Run through the driver with parameters, so `%` is escaped as procrastinate's own installer does.
            conn.exec_driver_sql(SchemaManager.get_schema().replace("%", "%%"))

    database.prepare_with(install)


@contextlib.contextmanager
def _watching(abort: Abort, on_abort: Callable[[], object]) -> Iterator[None]:
    """While the block runs, call `on_abort()` once if procrastinate asks the job to abort: a sync job
    runs on a thread it cannot cancel, so a worker stopping past its grace period asks this way."""
    done = threading.Event()

    def watch() -> None:
        while not done.wait(0.5):
            if abort():
                on_abort()
                return

    watcher = threading.Thread(target=watch, name="sleuth-abort-watch", daemon=True)
    watcher.start()
    try:
        yield
    finally:
        done.set()


def _register(app: procrastinate.App) -> None:
    @app.task(name=TURN_JOB, queue=TURNS, pass_context=True)
    def turn(context: procrastinate.JobContext, query_id: str) -> None:
        runner: JobRunner = context.additional_context["sleuth"]
        runner.run_turn(query_id, context.should_abort)

    @app.task(name=TASK_JOB, queue=TASKS, pass_context=True)
    def task(context: procrastinate.JobContext, task_id: str) -> None:
        runner: JobRunner = context.additional_context["sleuth"]
        runner.run_task(task_id, context.should_abort)

    @app.task(name=PART_JOB, queue=TASKS, pass_context=True)
    def part(context: procrastinate.JobContext, task_id: str) -> None:
        runner: JobRunner = context.additional_context["sleuth"]
        runner.run_parts(task_id, context.should_abort)


class JobQueue:
    """The enqueueing side, used by API servers (synchronous: admission runs on threads)."""

    def __init__(self, database: Database) -> None:
        if not database.is_postgres:
            raise ValueError("the job queue needs PostgreSQL")
        _require()
        import procrastinate

        install_schema(database)
        self.database = database
        self.app = procrastinate.App(
            connector=procrastinate.SyncPsycopgConnector(conninfo=conninfo(database.url))
        )
        _register(self.app)
        self.app.open()

    def defer_turn(self, query_id: str) -> None:
        self.app.configure_task(TURN_JOB).defer(query_id=query_id)

    def defer_task(self, task_id: str) -> None:
        self.app.configure_task(TASK_JOB).defer(task_id=task_id)

    def defer_parts(self, task_id: str, helpers: int) -> None:
        """Ask up to `helpers` workers to help with the task's parts."""
        for _ in range(helpers):
            self.app.configure_task(PART_JOB).defer(task_id=task_id)

    def depth(self) -> dict[str, int]:
        """Jobs waiting per queue (`/metrics`)."""
        with self.database.reading() as conn:
            rows = conn.execute(
                text(
                    "SELECT queue_name, count(*) FROM procrastinate_jobs "
                    "WHERE status = 'todo' GROUP BY queue_name"
                )
            ).all()
        found = {str(row[0]): int(row[1]) for row in rows}
        return {name: found.get(name, 0) for name in QUEUES}

    def worker_heartbeats(self) -> dict[str, float]:
        """Seconds since each registered worker's last heartbeat, by procrastinate's worker id."""
        with self.database.reading() as conn:
            rows = conn.execute(
                text("SELECT id, EXTRACT(EPOCH FROM (now() - last_heartbeat)) FROM procrastinate_workers")
            ).all()
        return {str(row[0]): float(row[1]) for row in rows}

    def close(self) -> None:
        self.app.close()


def _require() -> None:
    require_extra("the job queue (many machines on PostgreSQL)", "postgres", "procrastinate", "psycopg")


def _worker_app(database: Database) -> procrastinate.App:
    _require()
    import procrastinate

    install_schema(database)
    app = procrastinate.App(connector=procrastinate.PsycopgConnector(conninfo=conninfo(database.url)))
    _register(app)
    return app


def _options(
    runner: JobRunner,
    concurrency: int,
    queues: Sequence[str],
    heartbeat_s: float,
    name: str,
    shutdown_grace_s: float,
    signals: bool,
) -> dict[str, Any]:
    return {
        "queues": list(queues),
        "concurrency": concurrency,
        "name": name,
        "additional_context": {"sleuth": runner},
        "update_heartbeat_interval": heartbeat_s,
        "stalled_worker_timeout": 3 * heartbeat_s,
        "shutdown_graceful_timeout": shutdown_grace_s,
        "install_signal_handlers": signals,
        "fetch_job_polling_interval": 1.0,
        "delete_jobs": "successful",
    }


def run_worker(
    database: Database,
    runner: JobRunner,
    *,
    concurrency: int,
    queues: Sequence[str] = QUEUES,
    heartbeat_s: float,
    name: str,
    shutdown_grace_s: float,
) -> None:
    """Run a procrastinate worker on this (main) thread until SIGTERM/SIGINT. procrastinate drains on a
    signal: it stops taking jobs and waits `shutdown_grace_s` for those running, then returns."""
    app = _worker_app(database)
    with app.open():
        app.run_worker(**_options(runner, concurrency, queues, heartbeat_s, name, shutdown_grace_s, True))


class WorkerThread:
    """A worker inside another process (`sleuth serve --with-worker`, one-host deployments, tests): the
    same procrastinate worker on a thread of its own, with its own event loop and no signal handlers."""

    def __init__(
        self,
        database: Database,
        runner: JobRunner,
        *,
        concurrency: int,
        heartbeat_s: float,
        name: str,
        shutdown_grace_s: float,
    ) -> None:
        self._app = _worker_app(database)
        self._options = _options(runner, concurrency, QUEUES, heartbeat_s, name, shutdown_grace_s, False)
        self._loop: asyncio.AbstractEventLoop | None = None
        self._task: asyncio.Task[None] | None = None
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._run, name="sleuth-worker", daemon=True)

    def start(self) -> None:
        self._thread.start()
        self._ready.wait(timeout=30)

    def _run(self) -> None:
        async def main() -> None:
            self._loop = asyncio.get_running_loop()
            async with self._app.open_async():
                self._task = asyncio.current_task()
                self._ready.set()
                with contextlib.suppress(asyncio.CancelledError):
                    await self._app.run_worker_async(**self._options)

        try:
            asyncio.run(main())
        except Exception:
            log.exception("the in-process worker stopped")
        finally:
            self._ready.set()

    def close(self) -> None:
        loop, task = self._loop, self._task
        if loop is not None and task is not None:
            with contextlib.suppress(RuntimeError):
                loop.call_soon_threadsafe(task.cancel)
        self._thread.join(timeout=30)
