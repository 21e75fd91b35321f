"""The HTTP side of what a principal may see (`server/access.py` decides it): the one router dependency
that keeps a key limited to contexts out of the context and task routes of any other."""

from __future__ import annotations

from fastapi import Request
from starlette.concurrency import run_in_threadpool

from sleuth.api.auth import AnyKey
from sleuth.api.errors import ApiError
from sleuth.api.state import api_state, task_service
from sleuth.server.access import Principal, visible_context


def _visible_task(request: Request, who: Principal, task_id: str) -> None:
    task = task_service(request).store.get(task_id)
    if task is not None and not who.sees_context(task.get("context_id")):
        raise ApiError(404, "task_not_found", f"no task {task_id!r}", task_id=task_id)


async def context_guard(request: Request, who: AnyKey) -> None:
    """Dependency of every context and task route: for a key limited to contexts, the context
    (`{slug}`) or task (`{task_id}`) a route names must be one of its own, else it does not exist.
    It runs after authentication and before the route's own checks (the role's `403` included)."""
    if not who.limited:
        return
    state = api_state(request)
    params = request.path_params
    if "slug" in params:
        await run_in_threadpool(visible_context, state, who, str(params["slug"]))
    if "task_id" in params:
        await run_in_threadpool(_visible_task, request, who, str(params["task_id"]))
