"""A worker's liveness, for a probe that restarts a worker that hangs (docs/deploy.md, Operating).

A worker serves no API, so `sleuth worker --metrics-port N` serves `/healthz` beside `/metrics`: `ok`
while every part of the worker that beats has beaten within three heartbeats, else 503 naming the
parts that are late. The parts:

- `loop`: the queue worker's event loop, pulsed every second (`queue._work`). It fetches the jobs,
  beats procrastinate's heartbeat and passes a drain's stop on; a loop blocked or deadlocked stops
  pulsing. While the database is away the worker's retry loop pulses it instead: an outage is not a
  hang (the worker waits for the database and takes jobs again; restarting it would not help);
- each service that says when its heartbeat thread last beat (`Beating`): the thread that renews the
  holds of the turns and curates running here.

A Kubernetes `httpGet` probe, Docker's `HEALTHCHECK` (an HTTP client in the image) and any load
balancer read it as they read an API server's `/healthz`.
"""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Callable, Iterable
from socketserver import ThreadingMixIn
from typing import Protocol, runtime_checkable
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server
from wsgiref.types import StartResponse, WSGIEnvironment

from prometheus_client import CollectorRegistry, make_wsgi_app

LATE_AFTER_BEATS = 3  # as a hold: a part silent for three heartbeats is hung


@runtime_checkable
class Beating(Protocol):
    """A service whose heartbeat thread says when it last beat (`time.monotonic()` when its last beat
    ended, reached the database or not; None before the first)."""

    @property
    def last_beat(self) -> float | None: ...


class Liveness:
    """When each part of a worker last beat, and which are late."""

    def __init__(self, heartbeat_s: float, parts: Iterable[str] = ("loop",)) -> None:
        self.max_age_s = LATE_AFTER_BEATS * heartbeat_s
        now = time.monotonic()
        self._since = now  # a part that never beat is late this long after the worker started
        self._beats = dict.fromkeys(parts, now)
        self._watched: dict[str, Callable[[], float | None]] = {}
        self._lock = threading.Lock()

    def beat(self, part: str = "loop") -> None:
        with self._lock:
            self._beats[part] = time.monotonic()

    def watch(self, part: str, service: Beating) -> None:
        """Read `service.last_beat` at each check."""
        with self._lock:
            self._watched[part] = lambda: service.last_beat

    def late(self) -> dict[str, float]:
        """The parts that have not beaten within three heartbeats, with the seconds since they last did."""
        now = time.monotonic()
        with self._lock:
            beats = dict(self._beats)
            watched = dict(self._watched)
        for part, read in watched.items():
            beats[part] = read() or self._since
        return {part: now - at for part, at in sorted(beats.items()) if now - at > self.max_age_s}


class _Server(ThreadingMixIn, WSGIServer):
    daemon_threads = True


class _Server6(_Server):
    address_family = socket.AF_INET6


class _Quiet(WSGIRequestHandler):
    def log_message(self, format: str, *args: object) -> None:
        """Probes and scrapes are not worth a log line each."""


def serve(port: int, addr: str, registry: CollectorRegistry, liveness: Liveness) -> WSGIServer:
    """Serve `/healthz` (the liveness) and the registry's metrics on every other path, on a thread of
    their own, as `prometheus_client.start_http_server` serves the metrics alone."""
    metrics = make_wsgi_app(registry)

    def app(environ: WSGIEnvironment, start_response: StartResponse) -> Iterable[bytes]:
        if environ.get("PATH_INFO") != "/healthz":
            reply: Iterable[bytes] = metrics(environ, start_response)
            return reply
        late = liveness.late()
        body = (
            "ok"
            if not late
            else "late: " + ", ".join(f"{p} ({s:.0f} s since its last beat)" for p, s in late.items())
        )
        start_response(
            "503 Service Unavailable" if late else "200 OK", [("Content-Type", "text/plain; charset=utf-8")]
        )
        return [body.encode()]

    family = socket.getaddrinfo(addr, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)[0][0]
    server_class = _Server6 if family == socket.AF_INET6 else _Server
    server: WSGIServer = make_server(addr, port, app, server_class, handler_class=_Quiet)
    threading.Thread(target=server.serve_forever, name="sleuth-metrics", daemon=True).start()
    return server
