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
import threading
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from types import FrameType
from typing import TYPE_CHECKING, Any

import uvicorn
from fastapi import FastAPI, Request, Response
from fastapi.responses import JSONResponse

from sleuth.api.app import create_app
from sleuth.server.build import ServeError, open_server, worker_options
from sleuth.server.sandbox_probe import sandbox_report
from sleuth.server.state import Server
from sleuth.server.turns import TurnExecutor
from sleuth.settings import Settings
from sleuth.store.contexts.home import Home

if TYPE_CHECKING:
    from sleuth.server.queue import WorkerThread

log = logging.getLogger("sleuth.server")
GRACEFUL_SHUTDOWN_S = 30  # then uvicorn cuts what is still open
#: uvicorn's loggers write through the process's own handlers (`sleuth serve`'s: a timestamp on every
#: line), not through the handlers and formats of uvicorn's default configuration.
UVICORN_LOGGING: dict[str, Any] = {
    "version": 1,
    "disable_existing_loggers": False,
    "loggers": {name: {"handlers": [], "propagate": True} for name in ("uvicorn", "uvicorn.access")},
}
REMOTE_WARNING_EVERY = 1000  # spec/api.md §3.3: no-auth on a public address warns every 1,000th request
LOOPBACK_NAMES = ("localhost",)


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


def _probe_in_background(state: Server) -> None:
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


def serve(home: Home, options: ServeOptions, settings: Settings, *, log_level: str = "info") -> None:
    """Run the server until interrupted; `ServeError` before anything starts if the options are unsafe."""
    auth = resolve_auth(options)
    flags = {
        "max_concurrent_turns": options.max_concurrent_turns,
        "max_queued_turns": options.max_queued_turns,
        "project_id": options.project_id,
        "project_name": options.project_name,
    }
    overrides = {name: value for name, value in flags.items() if value is not None}
    state = open_server(home, overrides, auth=auth, settings=settings)
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
            log_config=UVICORN_LOGGING,
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

    def __init__(self, config: uvicorn.Config, state: Server) -> None:
        super().__init__(config)
        self.state = state

    def handle_exit(self, sig: int, frame: FrameType | None) -> None:
        turns = self.state.turns
        if isinstance(turns, TurnExecutor):
            turns.hub.close_streams()
        super().handle_exit(sig, frame)


def _worker_thread(state: Server) -> WorkerThread:
    """`--with-worker`: this process also takes jobs from the queue."""
    from sleuth.server.queue import WorkerThread

    runner, options = worker_options(state)
    worker = WorkerThread(state.db.database, runner, **options)
    worker.start()
    return worker
