"""What every route needs, built once per process by `server.build_state` (for `serve`, `worker` and
`mcp`): the data directory, the server database, the query runtime, the settings, and the services
that run turns and tasks (here or, with PostgreSQL, through the queue). Routes reach it through
`api_state(request)`."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol

from fastapi import Request
from prometheus_client import CollectorRegistry

from sleuth.agent.turn import Runtime
from sleuth.settings import Settings, current
from sleuth.store.home import Home
from sleuth.store.server_db import ServerDB


class Service(Protocol):
    """A service of the state that holds threads or connections (`turns.TurnExecutor`,
    `task_service.TaskService`, `queue.JobQueue`, `notices.Listener`); each module's accessor gives it
    its own type. Typed this loosely so that this module imports none of them (they import it)."""

    def close(self) -> None: ...


@dataclass
class ApiState:
    home: Home
    db: ServerDB
    runtime: Runtime
    overrides: dict[str, Any] = field(default_factory=dict)  # the server's flags: they win over the env
    auth: bool = False  # API keys required (False: no-auth local mode, spec/api.md §3.3)
    # Built by `server.build_state`; a state made bare (tests) gets in-process ones on first use.
    turns: Service | None = None
    tasks: Service | None = None
    queue: Service | None = None  # PostgreSQL: turns and curates wait here for workers
    listener: Service | None = None  # PostgreSQL: this process's one LISTEN connection
    registry: CollectorRegistry | None = None  # `/metrics` (operations.registry_of)
    frozen: Settings | None = None  # `server.build_state`: the settings, read once at start

    def close(self) -> None:
        """Stop the services, then the database (a server's or worker's last step)."""
        for service in (self.listener, self.turns, self.tasks, self.queue):
            if service is not None:
                service.close()
        self.runtime.close()
        self.db.close()

    @property
    def settings(self) -> Settings:
        """The settings this process runs with. A server or worker (`server.build_state`) reads them
        once, at start, with its command-line flags on top: what `/version` shows is what it uses. A
        state built bare (tests) reads the environment at each use."""
        if self.frozen is not None:
            return self.frozen
        return current().model_copy(update=self.overrides)


def api_state(request: Request) -> ApiState:
    state: ApiState = request.app.state.sleuth
    return state
