"""`sleuth serve`: the API over one `$SLEUTH_HOME`, with the start-up duties of spec/api.md §3 and §9.2.

At start the server (1) fails every turn left `in_progress` by a process that died (`server restarted`):
such a turn has no thread left to finish it, and polling clients must see it end; a turn another live
process holds (a second server on the home, `sleuth ask`) is left to it; (2) seeds the
operator's admin key from `SLEUTH_API_KEY`; (3) probes the sandbox in the background, so `GET
/version` answers at once and a host below the isolation floor is logged at start-up.
"""

from __future__ import annotations

import ipaddress
import logging
import os
import threading
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from functools import partial
from types import FrameType
from typing import TYPE_CHECKING, Any

import uvicorn
from fastapi import FastAPI, Request, Response
from fastapi.responses import JSONResponse

from sleuth.agent.turn import Runtime
from sleuth.api.app import create_app
from sleuth.api.state import ApiState
from sleuth.api.system import sandbox_report
from sleuth.api.task_service import TaskService
from sleuth.api.turns import TurnExecutor
from sleuth.errors import Invalid
from sleuth.settings import Settings, current
from sleuth.store.home import Home
from sleuth.store.keys import KeyStore
from sleuth.store.replica import Replica
from sleuth.store.server_db import ServerDB, worker_alive, worker_name
from sleuth.store.tasks import TaskStore

if TYPE_CHECKING:
    from sleuth.api.queue import JobsHere, WorkerThread

log = logging.getLogger("sleuth.server")
RESTART_ERROR = "server restarted"  # spec/api.md §9.2
GRACEFUL_SHUTDOWN_S = 30  # then uvicorn cuts what is still open
API_KEY_ENV = "SLEUTH_API_KEY"
REMOTE_WARNING_EVERY = 1000  # spec/api.md §3.3: no-auth on a public address warns every 1,000th request
LOOPBACK_NAMES = ("localhost",)


class ServeError(Invalid, ValueError):
    """The options cannot be served safely (no-auth on a public address without --allow-remote)."""


@dataclass(frozen=True)
class ServeOptions:
    host: str = "127.0.0.1"
    port: int = 8088
    auth: bool | None = None  # None: keys off on loopback, on elsewhere (spec/api.md §3.3)
    allow_remote: bool = False
    # None: the setting's own value (`sleuth.settings`, `$SLEUTH_<NAME>`)
    max_concurrent_turns: int | None = None
    max_queued_turns: int | None = None
    project_id: str | None = None
    project_name: str | None = None
    with_worker: bool = False  # PostgreSQL: run a worker in this process too


def is_loopback(host: str) -> bool:
    """127.0.0.0/8, ::1 and `localhost`; anything else (0.0.0.0, ::, a public name) is remote."""
    name = host.strip().strip("[]").lower()
    if name in LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False


def resolve_auth(options: ServeOptions) -> bool:
    """Whether keys are required; `ServeError` for no-auth on a remote address without `allow_remote`."""
    loopback = is_loopback(options.host)
    auth = (not loopback) if options.auth is None else options.auth
    if not auth and not loopback and not options.allow_remote:
        raise ServeError(
            f"refusing to serve without API keys on {options.host}, which is not a loopback address; "
            "use --auth (and `sleuth keys create`), or --allow-remote to accept the risk"
        )
    return auth


def build_state(
    home: Home,
    overrides: dict[str, Any] | None = None,
    *,
    auth: bool = False,
    environ: Mapping[str, str] | None = None,
    role: str = "server",
) -> ApiState:
    """The process's state over `home`, built once: the settings (environment, then `overrides`), the
    server database, the runtime, the env's admin key seeded, and the services that run turns and tasks.

    On SQLite (one machine) turns and tasks a previous process left running are failed here: this
    process owns them all. On PostgreSQL nothing is failed at start: another server or worker may be
    running them; the turns and tasks of a process that died are found by their leases instead
    (`TurnExecutor.beat`, `TaskService.beat`), and turns and curates go through the job queue.
    """
    env: Mapping[str, str] = os.environ if environ is None else environ
    settings = current().model_copy(update=dict(overrides or {}))
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
        runtime = Runtime(home, db=db)  # recovery is done above, with the restart reason
    except BaseException:
        db.close()
        raise
    state = ApiState(
        home=home, db=db, runtime=runtime, overrides=dict(overrides or {}), auth=auth, frozen=settings
    )
    if shared:
        _shared_services(state, settings, role)
    else:
        turns = state.turns = TurnExecutor(
            runtime, settings.max_concurrent_turns, settings.max_queued_turns, settings.max_turns_per_key
        )
        turns.start_heartbeat()  # each beat also fails the turns of a process on the home that died
    return state


def _shared_services(state: ApiState, settings: Settings, role: str) -> None:
    """PostgreSQL: the job queue, this process's executor and task service on it, and its listener."""
    from sleuth.api.curation import curate_job, curate_part
    from sleuth.api.notices import Listener
    from sleuth.api.queue import JobQueue

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
    )
    state.tasks = TaskService(
        TaskStore(state.db.database),
        state.home.root / "tasks",
        workers=settings.task_workers,
        stop_timeout_s=settings.task_stop_timeout_s,
        queue=queue,
        worker=name,
        heartbeat_s=settings.worker_heartbeat_s,
        kinds={"curate": partial(curate_job, state)},
        part_kinds={"curate": partial(curate_part, state)},
        max_wait_s=settings.max_queue_wait_s,
        shared=state.home.shared if isinstance(state.home.shared, Replica) else None,
    )
    listener = state.listener = Listener(
        state.db.database.url,
        on_event=turns.hub.notify,
        on_control=state.runtime.cancel,
        on_reconnect=turns.hub.notify_all,
    )
    listener.start()
    turns.start_heartbeat()


def _probe_in_background(state: ApiState) -> None:
    def probe() -> None:
        report = sandbox_report(state)
        if report.get("ok"):
            log.info("sandbox: %s mode, layers %s", report.get("mode"), ", ".join(report.get("layers") or []))
        elif not report.get("missing"):  # nothing to probe with yet: not a fault
            log.info("sandbox: %s", report.get("detail"))
        else:
            log.warning(
                "sandbox below its %r floor (missing: %s)%s; turns will fail with sandbox_unavailable",
                state.runtime.sandbox_host.limits.floor,
                ", ".join(report["missing"]),
                f": {report['detail']}" if report.get("detail") else "",
            )

    threading.Thread(target=probe, name="sandbox-probe", daemon=True).start()


def host_name(header: str) -> str:
    """The name of a `Host` header, without its port: `[::1]:8088` → `::1`, `localhost:8088` → `localhost`."""
    header = header.strip().lower()
    if header.startswith("["):
        return header[1 : header.find("]")] if "]" in header else header
    return header.rsplit(":", 1)[0] if header.count(":") == 1 else header


def own_names_only(app: FastAPI, host: str) -> None:
    """Without keys on loopback, answer only requests addressed to this machine's own names. A web page
    elsewhere can point a name it controls at 127.0.0.1 (DNS rebinding) and then drive the admin API from
    the person's browser; its requests carry that name in `Host`, so they are refused here."""
    names = {"localhost", "127.0.0.1", "::1", host_name(host)}

    @app.middleware("http")
    async def check_host(request: Request, call_next: Callable[[Request], Awaitable[Response]]) -> Response:
        name = host_name(request.headers.get("host", ""))
        if name in names or name.endswith(".localhost") or _is_loopback_address(name):
            return await call_next(request)
        return JSONResponse(
            {
                "message": f"this server answers to its own names only, not {name[:100]!r}: without API keys "
                "it trusts no other name (a page elsewhere could point one at this machine)",
                "code": "invalid_host",
            },
            status_code=400,
        )


def _is_loopback_address(name: str) -> bool:
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False


def _warn_remote_every(app: FastAPI, host: str) -> None:
    count = 0
    lock = threading.Lock()

    @app.middleware("http")
    async def remote_warning(
        request: Request, call_next: Callable[[Request], Awaitable[Response]]
    ) -> Response:
        nonlocal count
        with lock:
            count += 1
            warn = count % REMOTE_WARNING_EVERY == 0
        if warn:
            log.warning("serving %s without API keys (--allow-remote): %d requests so far", host, count)
        return await call_next(request)


def serve(home: Home, options: ServeOptions, *, log_level: str = "info") -> None:
    """Run the server until interrupted; `ServeError` before anything starts if the options are unsafe."""
    auth = resolve_auth(options)
    flags = {
        "max_concurrent_turns": options.max_concurrent_turns,
        "max_queued_turns": options.max_queued_turns,
        "project_id": options.project_id,
        "project_name": options.project_name,
    }
    overrides = {name: value for name, value in flags.items() if value is not None}
    current()  # a bad `SLEUTH_*` value stops the server here, before anything starts
    state = build_state(home, overrides, auth=auth)
    try:
        app = create_app(state)
        if not auth and is_loopback(options.host):
            own_names_only(app, options.host)
        if not auth and not is_loopback(options.host):
            log.warning(
                "serving %s without API keys (--allow-remote): anyone who can reach it is admin", options.host
            )
            _warn_remote_every(app, options.host)
        _probe_in_background(state)
        worker = _worker_thread(state) if options.with_worker else None
        config = uvicorn.Config(
            app,
            host=options.host,
            port=options.port,
            log_level=log_level,
            timeout_graceful_shutdown=GRACEFUL_SHUTDOWN_S,
        )
        try:
            _DrainingServer(config, state).run()
        finally:
            if worker is not None:
                worker.close()
    finally:
        state.close()


class _DrainingServer(uvicorn.Server):
    """uvicorn that, on SIGTERM/SIGINT, first ends its event streams cleanly (clients resume on another
    server with `Last-Event-ID`), then stops as uvicorn does: no new connections, requests finished."""

    def __init__(self, config: uvicorn.Config, state: ApiState) -> None:
        super().__init__(config)
        self.state = state

    def handle_exit(self, sig: int, frame: FrameType | None) -> None:
        turns = self.state.turns
        if isinstance(turns, TurnExecutor):
            turns.hub.close_streams()
        super().handle_exit(sig, frame)


def worker_options(state: ApiState) -> tuple[JobsHere, dict[str, Any]]:
    """What a worker in this process runs jobs with (`sleuth worker`, `--with-worker`): this process's
    executor and task service, and the queue worker's options from the settings. `ServeError` without
    PostgreSQL, where there is no queue to take jobs from."""
    from sleuth.api.queue import JobsHere

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


def _worker_thread(state: ApiState) -> WorkerThread:
    """`--with-worker`: this process also takes jobs from the queue."""
    from sleuth.api.queue import WorkerThread

    runner, options = worker_options(state)
    worker = WorkerThread(state.db.database, runner, **options)
    worker.start()
    return worker
