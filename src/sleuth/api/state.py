"""What every route needs, built once per server: the data directory, the server database, the query
runtime and the settings. Routes reach it through `api_state(request)`."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from fastapi import Request

from sleuth.agent.turn import Runtime
from sleuth.settings import Settings, current
from sleuth.store.home import Home
from sleuth.store.server_db import ServerDB


@dataclass
class ApiState:
    home: Home
    db: ServerDB
    runtime: Runtime
    overrides: dict[str, Any] = field(default_factory=dict)  # the server's flags: they win over the env
    auth: bool = False  # API keys required (False: no-auth local mode, spec/api.md §3.3)

    @property
    def settings(self) -> Settings:
        """The settings as they are now: the environment, read at each use (a limit lowered there applies
        to the next request), with the server's command-line flags on top. Each access reads the
        environment again: take it once per use."""
        return current().model_copy(update=self.overrides)


def api_state(request: Request) -> ApiState:
    state: ApiState = request.app.state.sleuth
    return state
