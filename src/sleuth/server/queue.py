"""The durable job queue on PostgreSQL: question turns and curates wait here for a `sleuth worker`.

Built on procrastinate (chosen over pgqueuer: a decade-old, well-documented project with sync and async
APIs, worker heartbeats and stalled-job detection, LISTEN/NOTIFY wake-ups with polling as a fallback,
and a plain SQL schema we can install in our own migration transaction; pgqueuer is async-only and
younger). Sleuth keeps its own records of what a job is about (the Query, the task row) and of who
holds it (`ServerDB.hold_turn`, `TaskStore.hold`): a job carries only an id, so a job run twice, or
after its turn was cancelled, finds the record ended and does nothing.

Two queues: `turns` (short, interactive) and `tasks` (curates: long). A worker serves both, with its
`worker_concurrency` places; a deployment may run workers for one queue only (`--queue`).

procrastinate numbers its workers; `sleuth_queue_workers` maps each number to the worker's name, the one
Sleuth's records carry (`queries.worker`, `tasks.worker`), so `/metrics` can say which worker is late.

A worker's drain is bounded: on SIGTERM it takes no new job and lets the running ones go on for the
grace period (`task_stop_timeout_s`); then it stops them (a turn ends `cancelled` with
`WORKER_STOPPING`, a curate goes back to the queue) and gives them `DRAIN_MARGIN_S` to record it. Past
that, `sleuth worker` records the end of what still runs itself (`JobRunner.abandon`) and exits
(`worker._Drain`, which `run_worker`'s `on_signal` starts).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
import threading
from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING, Any, Protocol

from sqlalchemy import text
from sqlalchemy.engine import Connection, make_url

from sleuth.errors import require_extra
from sleuth.server.task_service import TaskService
from sleuth.server.turns import TurnExecutor
from sleuth.store.database import Database
from sleuth.store.records.server_schema import queries_t
from sleuth.store.records.task_schema import tasks_t

if TYPE_CHECKING:  # the postgres extra: imported where a queue is opened, so the core install starts
    import procrastinate
    from procrastinate.worker import Worker

log = logging.getLogger("sleuth.queue")
TURNS = "turns"
TASKS = "tasks"
QUEUES = (TURNS, TASKS)
TURN_JOB = "sleuth.turn"
TASK_JOB = "sleuth.task"
PART_JOB = "sleuth.part"  # help with a split task's parts (a curate's sources)
NAMES = "sleuth_queue_workers"  # procrastinate's worker id → the worker's name
#: The error of a turn a worker's drain stopped (a client's cancel says `cancelled by client`).
WORKER_STOPPING = "cancelled: the worker is stopping"
#: After the grace period, how long a drain waits for the jobs it stopped to record it.
DRAIN_MARGIN_S = 10.0


Abort = Callable[[], bool]  # procrastinate's `should_abort`: the worker is stopping past its grace


class JobRunner(Protocol):
    """What a worker's jobs call (`JobsHere`; tests may pass their own)."""

    def run_turn(self, query_id: str, abort: Abort) -> None: ...

    def run_task(self, task_id: str, abort: Abort) -> None: ...

    def run_parts(self, task_id: str, abort: Abort) -> None: ...

    def abandon(self) -> None: ...


class JobsHere:
    """The jobs run by this process's executor and task service (`sleuth worker`, `--with-worker`)."""

    def __init__(self, turns: TurnExecutor, tasks: TaskService) -> None:
        self.turns = turns
        self.tasks = tasks
        self._lock = threading.Lock()
        self._turns_here: set[str] = set()
        self._tasks_here: set[str] = set()

    def run_turn(self, query_id: str, abort: Abort) -> None:
        with (
            self._running(self._turns_here, query_id),
            _watching(abort, lambda: self.turns.runtime.cancel(query_id, WORKER_STOPPING)),
        ):
            self.turns.run_queued(query_id)

    def run_task(self, task_id: str, abort: Abort) -> None:
        with (
            self._running(self._tasks_here, task_id),
            _watching(abort, lambda: self.tasks.release_now(task_id)),
        ):
            self.tasks.run_queued(task_id)

    def run_parts(self, task_id: str, abort: Abort) -> None:
        self.tasks.run_parts(task_id, abort)

    @contextlib.contextmanager
    def _running(self, here: set[str], job_id: str) -> Iterator[None]:
        with self._lock:
            here.add(job_id)
        try:
            yield
        finally:
            with self._lock:
                here.discard(job_id)

    def abandon(self) -> None:
        """The drain is over and these jobs did not stop in time (a turn waiting on a model call, a
        curate deep in one step): record their end for them before the process exits. A turn ends
        `cancelled` with `WORKER_STOPPING` (its thread's later writes are refused: the turn has ended);
        a curate goes back to the queue, as a drained one does."""
        with self._lock:
            turns, tasks = sorted(self._turns_here), sorted(self._tasks_here)
        for query_id in turns:
            if self.turns.db.end_turn(query_id, "cancelled", WORKER_STOPPING):
                log.warning("turn %s ended: it did not stop within the drain", query_id)
                self.turns.hub.notify(query_id)
        worker = self.tasks.worker
        for task_id in tasks:
            if worker is not None and self.tasks.store.release(task_id, worker):
                log.warning("task %s handed back to the queue: it did not stop within the drain", task_id)
                if self.tasks.queue is not None:
                    self.tasks.queue.defer_task(task_id)


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
        conn.execute(
            text(
                f"CREATE TABLE IF NOT EXISTS {NAMES} (worker_id bigint PRIMARY KEY "
                "REFERENCES procrastinate_workers(id) ON DELETE CASCADE, name text NOT NULL)"
            )
        )

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
        # A defer waits at most 10 s for a connection (the pool's default is 30 s): right after a database
        # restart the pool may still be backing off its reconnections, and a curate asking for helpers
        # then goes on alone sooner; a turn's admission answers 503 sooner.
        connector = procrastinate.SyncPsycopgConnector(conninfo=conninfo(database.url), timeout=10.0)
        self.app = procrastinate.App(connector=connector)
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
        """Jobs waiting per queue (`/metrics`): those whose record still waits for them. A turn cancelled
        while queued, or a task stopped or taken over meanwhile, leaves its job behind; a worker that
        takes it finds the record ended and does nothing, and it is not counted."""
        with self.database.reading() as conn:
            rows = conn.execute(text(_WAITING), {"turn": TURN_JOB, "task": TASK_JOB, "part": PART_JOB}).all()
        found = {str(row[0]): int(row[1]) for row in rows}
        return {name: found.get(name, 0) for name in QUEUES}

    def worker_heartbeats(self) -> dict[str, float]:
        """Seconds since each registered worker's last heartbeat, by the worker's name (procrastinate's
        number, `procrastinate:<id>`, for a worker not named yet). A name registered twice (a worker
        that took jobs again after an outage) counts its latest beat."""
        with self.database.reading() as conn:
            rows = conn.execute(
                text(
                    "SELECT coalesce(n.name, 'procrastinate:' || w.id), "
                    "min(EXTRACT(EPOCH FROM (now() - w.last_heartbeat))) FROM procrastinate_workers w "
                    f"LEFT JOIN {NAMES} n ON n.worker_id = w.id GROUP BY 1"
                )
            ).all()
        return {str(row[0]): max(0.0, float(row[1])) for row in rows}

    def close(self) -> None:
        self.app.close()


_WAITING = f"""
SELECT j.queue_name, count(*) FROM procrastinate_jobs j
WHERE j.status = 'todo' AND CASE j.task_name
    WHEN :turn THEN EXISTS (SELECT 1 FROM {queries_t.name} q
        WHERE q.id = j.args->>'query_id' AND q.status = 'in_progress' AND q.worker IS NULL)
    WHEN :task THEN EXISTS (SELECT 1 FROM {tasks_t.name} t
        WHERE t.id = j.args->>'task_id' AND t.state = 'scheduled')
    WHEN :part THEN EXISTS (SELECT 1 FROM {tasks_t.name} t
        WHERE t.id = j.args->>'task_id' AND t.state = 'running')
    ELSE true END
GROUP BY j.queue_name
"""


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
) -> dict[str, Any]:
    return {
        "queues": list(queues),
        "concurrency": concurrency,
        "name": name,
        "additional_context": {"sleuth": runner},
        "update_heartbeat_interval": heartbeat_s,
        "stalled_worker_timeout": 3 * heartbeat_s,
        "shutdown_graceful_timeout": shutdown_grace_s,
        "install_signal_handlers": False,  # `run_worker` handles them: it knows when a drain begins
        "fetch_job_polling_interval": 1.0,
        "delete_jobs": "successful",
    }


async def _work(
    app: procrastinate.App,
    options: dict[str, Any],
    *,
    pulse: Callable[[], None] | None = None,
    on_signal: Callable[[], None] | None = None,
) -> None:
    """Run a procrastinate worker on this event loop until it stops. While the loop runs, `pulse()` is
    called every second or heartbeat (the worker's liveness: a loop that hangs stops calling it). With
    `on_signal` (the main thread), SIGTERM or SIGINT begins the drain and calls it; a second signal
    then acts as it would without Sleuth (it ends the process)."""
    from procrastinate.worker import Worker

    loop = asyncio.get_running_loop()
    beats = [asyncio.create_task(_pulse(pulse, options["update_heartbeat_interval"]))] if pulse else []
    signals = (signal.SIGTERM, signal.SIGINT) if on_signal is not None else ()
    try:
        async with app.open_async():
            worker: Any = Worker(app=app, **options)  # procrastinate's methods are not annotated

            def stop() -> None:
                for sig in signals:
                    loop.remove_signal_handler(sig)
                assert on_signal is not None
                on_signal()
                worker.stop()

            for sig in signals:
                loop.add_signal_handler(sig, stop)
            beats.append(asyncio.create_task(_name(app, worker, options["name"])))
            await worker.run()
    finally:
        for sig in signals:
            loop.remove_signal_handler(sig)
        for task in beats:
            task.cancel()


async def _pulse(pulse: Callable[[], None], heartbeat_s: float) -> None:
    while True:
        pulse()
        await asyncio.sleep(min(1.0, heartbeat_s))


async def _name(app: procrastinate.App, worker: Worker, name: str) -> None:
    """Record the worker's name beside the number procrastinate gives it at start."""
    while worker.worker_id is None:
        await asyncio.sleep(0.05)
    try:
        await app.connector.execute_query_async(
            f"INSERT INTO {NAMES} (worker_id, name) VALUES (%(worker_id)s, %(name)s) "
            "ON CONFLICT (worker_id) DO UPDATE SET name = EXCLUDED.name",
            worker_id=worker.worker_id,
            name=name,
        )
    except Exception as exc:  # the metrics show its number instead; the worker works on
        log.warning("worker %s: its name could not be recorded (%s)", name, type(exc).__name__)


def run_worker(
    database: Database,
    runner: JobRunner,
    *,
    concurrency: int,
    queues: Sequence[str] = QUEUES,
    heartbeat_s: float,
    name: str,
    shutdown_grace_s: float,
    pulse: Callable[[], None] | None = None,
    on_signal: Callable[[], None] | None = None,
) -> None:
    """Run a procrastinate worker on this (main) thread until SIGTERM/SIGINT, which drains it: no new
    jobs, and `shutdown_grace_s` for those running; then they are stopped (`JobsHere`) and this returns
    once they have recorded it. `on_signal` is called when the drain begins (`sleuth worker` bounds it
    there: see `DRAIN_MARGIN_S`); `pulse`, see `_work`."""
    app = _worker_app(database)
    options = _options(runner, concurrency, queues, heartbeat_s, name, shutdown_grace_s)
    asyncio.run(_work(app, options, pulse=pulse, on_signal=on_signal or (lambda: None)))


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
        self._options = _options(runner, concurrency, QUEUES, heartbeat_s, name, shutdown_grace_s)
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
            self._task = asyncio.current_task()
            self._ready.set()
            with contextlib.suppress(asyncio.CancelledError):
                await _work(self._app, self._options)

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
