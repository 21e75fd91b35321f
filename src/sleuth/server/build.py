"""The one builder of a server process's `Server` (`sleuth serve`, `sleuth worker`, `sleuth mcp`, the
tests): the settings read once (the environment, then the command line's flags), the server database,
the runtime, the operator's admin key seeded from `SLEUTH_API_KEY`, and the services that run turns and
tasks — this process's own on SQLite, on the job queue with PostgreSQL (spec/api.md §3, §9.2)."""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from sleuth.agent.turn import Runtime
from sleuth.errors import Invalid
from sleuth.sandbox.host import SandboxHost
from sleuth.sandbox.limits import HostBudget
from sleuth.server.state import Server
from sleuth.server.task_service import TaskService
from sleuth.server.turns import TurnExecutor
from sleuth.settings import Settings, current
from sleuth.store.contexts.home import Home
from sleuth.store.contexts.replica import Replica
from sleuth.store.records.keys import KeyStore
from sleuth.store.records.server_db import ServerDB, worker_alive, worker_name
from sleuth.store.records.tasks import TaskStore

if TYPE_CHECKING:
    from sleuth.server.queue import JobsHere

log = logging.getLogger("sleuth.server")
RESTART_ERROR = "server restarted"  # spec/api.md §9.2
API_KEY_ENV = "SLEUTH_API_KEY"


class ServeError(Invalid, ValueError):
    """The options cannot be served safely (no-auth on a public address without --allow-remote)."""


def open_server(
    home: Home,
    overrides: dict[str, Any] | None = None,
    *,
    auth: bool = False,
    environ: Mapping[str, str] | None = None,
    role: str = "server",
    settings: Settings | None = None,
) -> Server:
    """The process's state over `home`, built once: the settings (`settings`, those the process read at
    its start, else the environment read here, once; then `overrides`), the server database, the
    runtime and its sandbox host, the env's admin key seeded, and the services that run turns and tasks.
    Everything below gets the settings from here (`Server.settings`), never from the environment.

    On SQLite (one machine) turns and tasks a previous process left running are failed here: this
    process owns them all. On PostgreSQL nothing is failed at start: another server or worker may be
    running them; the turns and tasks of a process that died are found by their leases instead
    (`TurnExecutor.beat`, `TaskService.beat`), and turns and curates go through the job queue.
    """
    env: Mapping[str, str] = os.environ if environ is None else environ
    settings = (settings or current()).model_copy(update=dict(overrides or {}))
    db = ServerDB.for_home(home, settings.database_url)
    shared = db.database.is_postgres
    try:
        if not shared:
            # Only the turns no live process holds: another server or `sleuth ask` may share the home.
            failed = db.recover_orphans(worker_alive, error=RESTART_ERROR)
            if failed:
                log.warning("%d turn(s) were left in flight by a process that stopped; marked failed", failed)
        secret = env.get(API_KEY_ENV, "").strip()
        if secret and KeyStore.for_db(db).seed(secret) is None:
            log.warning("%s holds a revoked key; it was not restored", API_KEY_ENV)
        if auth and not KeyStore.for_db(db).list_keys(include_revoked=False):
            log.warning("API keys are required but none exist: create one with `sleuth keys create`")
        host = SandboxHost(embed_threads=settings.embed_threads)  # starts its zygote on first use
        budget = HostBudget.from_settings(settings)
        runtime = Runtime(home, db=db, sandbox_host=host, budget=budget)  # recovery is done above
    except BaseException:
        db.close()
        raise
    state = Server(
        home=home,
        db=db,
        runtime=runtime,
        overrides=dict(overrides or {}),
        auth=auth,
        frozen=settings,
        sandbox_host=host,
    )
    if shared:
        _shared_services(state, settings, role)
    else:
        turns = state.turns = TurnExecutor(
            runtime, settings.max_concurrent_turns, settings.max_queued_turns, settings.max_turns_per_key
        )
        turns.start_heartbeat()  # each beat also fails the turns of a process on the home that died
    return state


def _shared_services(state: Server, settings: Settings, role: str) -> None:
    """PostgreSQL: the job queue, this process's executor and task service on it, and its listener."""
    from sleuth.server.jobs import job_kinds
    from sleuth.server.notices import Listener
    from sleuth.server.queue import JobQueue

    name = worker_name(role)
    queue = JobQueue(state.db.database)
    state.queue = queue
    turns = state.turns = TurnExecutor(
        state.runtime,
        settings.max_concurrent_turns,
        settings.max_queued_turns,
        settings.max_turns_per_key,
        queue=queue,
        worker=name,
        heartbeat_s=settings.worker_heartbeat_s,
        max_wait_s=settings.max_queue_wait_s,
        database_wait_s=settings.database_wait_s,
    )
    kinds, part_kinds = job_kinds(state)
    state.tasks = TaskService(
        TaskStore(state.db.database),
        state.home.root / "tasks",
        workers=settings.task_workers,
        stop_timeout_s=settings.task_stop_timeout_s,
        queue=queue,
        worker=name,
        heartbeat_s=settings.worker_heartbeat_s,
        kinds=kinds,
        part_kinds=part_kinds,
        max_wait_s=settings.max_queue_wait_s,
        shared=state.home.shared if isinstance(state.home.shared, Replica) else None,
        database_wait_s=settings.database_wait_s,
    )
    listener = state.listener = Listener(
        state.db.database.url,
        on_event=turns.hub.notify,
        on_control=state.runtime.cancel,
        on_reconnect=turns.hub.notify_all,
    )
    listener.start()
    turns.start_heartbeat()


def worker_options(state: Server) -> tuple[JobsHere, dict[str, Any]]:
    """What a worker in this process runs jobs with (`sleuth worker`, `--with-worker`): this process's
    executor and task service, and the queue worker's options from the settings. `ServeError` without
    PostgreSQL, where there is no queue to take jobs from."""
    from sleuth.server.queue import JobsHere

    turns, tasks = state.turns, state.tasks
    if not isinstance(turns, TurnExecutor) or not isinstance(tasks, TaskService) or state.queue is None:
        raise ServeError("a worker needs SLEUTH_DATABASE_URL=postgresql://… (the job queue)")
    settings = state.settings
    return JobsHere(turns, tasks), {
        "concurrency": settings.worker_concurrency,
        "heartbeat_s": settings.worker_heartbeat_s,
        "name": turns.worker,
        "shutdown_grace_s": settings.task_stop_timeout_s,
    }
