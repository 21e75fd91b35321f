"""How a route reaches the process's `Server` (built once by `server.build.open_server`) and its
services, and the app's lifespan duty toward them."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from fastapi import FastAPI, Request

from sleuth.server import jobs
from sleuth.server.connectors import ConnectorSchedule
from sleuth.server.state import Server
from sleuth.server.task_service import TaskService
from sleuth.server.turns import TurnExecutor


def api_state(request: Request) -> Server:
    state: Server = request.app.state.sleuth
    return state


def task_service(request: Request) -> TaskService:
    return jobs.task_service(api_state(request))


def executor(request: Request) -> TurnExecutor:
    return api_state(request).turn_executor()


@asynccontextmanager
async def serving(app: FastAPI) -> AsyncIterator[None]:
    """The app's lifespan: the task service starts with it (recovering interrupted tasks) and so does
    the connector schedule; both stop with it. The app's own, not a router's: routers are mounted
    twice (`/api`, `/api/v0`)."""
    server: Server = app.state.sleuth
    schedule = ConnectorSchedule(server, jobs.task_service(server))
    schedule.start()
    try:
        yield
    finally:
        schedule.stop()
        server.stop_tasks()
