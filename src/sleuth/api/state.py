"""What every route needs, built once per server: the data directory, the server database, the query
runtime and the settings. Routes reach it through `api_state(request)`."""

from __future__ import annotations

from dataclasses import dataclass, field

from fastapi import Request

from sleuth.agent.turn import Runtime
from sleuth.store.home import Home
from sleuth.store.server_db import ServerDB


@dataclass
class ApiSettings:
    auth: bool = False  # API keys required (False = no-auth local mode, api.md §3.3)
    max_concurrent_turns: int = 4
    max_queued_turns: int = 32
    project_id: str = "local"
    project_name: str = "local"


@dataclass
class ApiState:
    home: Home
    db: ServerDB
    runtime: Runtime
    settings: ApiSettings = field(default_factory=ApiSettings)


def api_state(request: Request) -> ApiState:
    state: ApiState = request.app.state.sleuth
    return state
