"""The server process's root: built once per process by `server.build.open_server` (for `serve`,
`worker`, `mcp` and the tests): the data directory, the server database, the query runtime, the
settings, and the services that run turns and tasks (here or, with PostgreSQL, through the queue).
Routes reach it through `api.state.api_state(request)`; it knows no HTTP."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from prometheus_client import CollectorRegistry

from sleuth.agent.turn import Runtime
from sleuth.sandbox.host import SandboxHost
from sleuth.server.task_service import TaskService
from sleuth.server.turns import TurnExecutor
from sleuth.settings import Settings, current
from sleuth.store.contexts.home import Home
from sleuth.store.records.server_db import ServerDB

if TYPE_CHECKING:  # their optional packages (procrastinate, psycopg) load only where they run
    from sleuth.server.notices import Listener
    from sleuth.server.queue import JobQueue

log = logging.getLogger("sleuth.server")


@dataclass
class Server:
    home: Home
    db: ServerDB
    runtime: Runtime
    overrides: dict[str, Any] = field(default_factory=dict)  # the server's flags: they win over the env
    auth: bool = False  # API keys required (False: no-auth local mode, spec/api.md §3.3)
    # Built by `open_server` (PostgreSQL: the queue's); otherwise this process's own, made on first use
    # by `turn_executor()` and `own_tasks()`.
    turns: TurnExecutor | None = None
    tasks: TaskService | None = None
    queue: JobQueue | None = None  # PostgreSQL: turns and curates wait here for workers
    listener: Listener | None = None  # PostgreSQL: this process's one LISTEN connection
    registry: CollectorRegistry | None = None  # `/metrics` (server.metrics.registry_of)
    frozen: Settings | None = None  # `open_server`: the settings, read once at start
    sandbox_host: SandboxHost | None = None  # `open_server`'s, on its settings: closed with the server
    _lock: threading.Lock = field(default_factory=threading.Lock, init=False, repr=False)
    _own_tasks: bool = field(default=False, init=False, repr=False)

    def close(self) -> None:
        """Stop the services, then the database (a server's or worker's last step)."""
        for service in (self.listener, self.turns, self.tasks, self.queue):
            if service is not None:
                service.close()
        self.runtime.close()
        if self.sandbox_host is not None:
            self.sandbox_host.close()
        self.db.close()

    def turn_executor(self) -> TurnExecutor:
        """The executor of this process's turns (`open_server` builds it; one made here otherwise)."""
        with self._lock:
            if self.turns is None:
                settings = self.settings
                self.turns = TurnExecutor(
                    self.runtime,
                    settings.max_concurrent_turns,
                    settings.max_queued_turns,
                    settings.max_turns_per_key,
                )
            return self.turns

    def own_tasks(self, make: Callable[[], TaskService]) -> TaskService:
        """The task service: `open_server`'s (PostgreSQL: the queue's), else one `make()` builds on first
        use, which this process stops with `stop_tasks` (`server.jobs.task_service` gives it the job
        kinds)."""
        with self._lock:
            if self.tasks is None:
                self.tasks = make()
                self._own_tasks = True
            return self.tasks

    def stop_tasks(self) -> None:
        """Stop a task service made here (the app's shutdown); the queue's is the process's to close."""
        with self._lock:
            service = self.tasks if self._own_tasks else None
            if service is not None:
                self.tasks, self._own_tasks = None, False
        if service is not None:
            service.close()

    @property
    def settings(self) -> Settings:
        """The settings this process runs with. A server or worker (`server.open_server`) reads them
        once, at start, with its command-line flags on top: what `/version` shows is what it uses. A
        state built bare (tests) reads the environment at each use."""
        if self.frozen is not None:
            return self.frozen
        return current().model_copy(update=self.overrides)
