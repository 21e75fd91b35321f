"""Routes: queries (api.md §8–§10.3): `POST /query` in its three modes (sync, background, SSE), the
Query, its cancel, trace, events, feedback and replay, and `GET /models`.

`POST /query` reads its body itself instead of letting FastAPI bind it, so the checks run in the
documented order (§8.1 "Validation order"): credentials (the dependency) → JSON syntax → unknown fields
→ extensions under `2026-07` → types and ranges → option conflicts → session → (in `Runtime.prepare`)
scope, models, shape → (in its `admit` hook) busy session, comparison group, sandbox, capacity. Nothing
is stored until every check passed. The turn then runs on the bounded executor (turns.py), never on the
request: a client that goes away leaves it running.

Every route that names a turn (`_stored`) or a session answers only for what the caller may see
(`api/access.py`): another principal's turn is `404 query_not_found`, as if it did not exist.
"""

from __future__ import annotations

import json
import threading
from concurrent.futures import Future
from functools import partial
from typing import Annotated, Any, Literal, TypeVar

from fastapi import APIRouter, Header, Request, Response
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict, Field, ValidationError
from starlette.concurrency import run_in_threadpool

from sleuth.agent.records import Query
from sleuth.agent.replay import ReplayError, replay
from sleuth.agent.request import INT_BOUNDS, Caller, TurnRequest
from sleuth.agent.turn import TurnError
from sleuth.api.access import check_scope, query_not_found, visible_query, visible_session
from sleuth.api.auth import AdminKey, AnyKey, Principal
from sleuth.api.errors import TURN_ERROR_STATUS, ApiError
from sleuth.api.sse import follow, stream_response
from sleuth.api.state import ApiState, api_state
from sleuth.api.system import sandbox_report
from sleuth.api.turns import TurnExecutor, executor, wait_for, wait_until
from sleuth.api.versioning import require_unstable
from sleuth.compile.manifest import EMBEDDING_MODELS
from sleuth.models import embedder
from sleuth.models.catalog import CatalogError
from sleuth.store.server_db import COMPARISON_GROUP_SIZE, TERMINAL_STATUSES, QueryNotFound, ServerDB

router = APIRouter()

EXTENSION_FIELDS = ("max_tool_output_chars",)  # request fields accepted only under `unstable`
CANCEL_WAIT_S = 10.0  # how long `cancel` waits for the turn to reach its terminal state


class QueryRequest(TurnRequest):
    """The body of `POST /query` (api.md §8.1): the turn contract plus what is HTTP's. Validated
    strictly: `"100"` is not an integer, `1` not a bool."""

    model_config = ConfigDict(extra="forbid", strict=True)

    previous_query_id: str | None = Field(None, max_length=200)
    stream: bool = False
    background: bool = False

    def turn(self, session_id: str | None) -> TurnRequest:
        """The turn this body asks for, in the session that `previous_query_id` resolved to."""
        fields = {name: getattr(self, name) for name in TurnRequest.model_fields}
        return TurnRequest.model_construct(**{**fields, "session_id": session_id})


class FeedbackRequest(BaseModel):
    """The body of `POST /queries/{id}/feedback` (api.md §10.3)."""

    model_config = ConfigDict(extra="forbid", strict=True)

    rating: Literal["up", "down"]
    comment: str | None = Field(None, max_length=2_000)


def _body_schema(model: type[BaseModel]) -> dict[str, Any]:
    """The OpenAPI request body of a route that parses its own JSON (so the order of checks is ours)."""
    return {
        "requestBody": {
            "required": True,
            "content": {
                "application/json": {"schema": model.model_json_schema(ref_template="#/$defs/{model}")}
            },
        }
    }


def error_responses(*pairs: tuple[int, str]) -> dict[int | str, dict[str, Any]]:
    """OpenAPI `responses=`: the documented error statuses of a route, with the envelope."""
    return {
        status: {
            "description": code,
            "content": {"application/json": {"example": {"message": code.replace("_", " "), "code": code}}},
        }
        for status, code in pairs
    }


# ---------------------------------------------------------------------------------- request parsing
def _shown(value: Any) -> str:
    text = json.dumps(value, ensure_ascii=False)
    return text if len(text) <= 60 else text[:57] + "..."


def _invalid(field: str, message: str) -> ApiError:
    return ApiError(400, "invalid_request", message, field=field)


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def _storable(value: Any) -> bool:
    """No lone surrogates (`"\\ud800"` parses, but cannot be stored as UTF-8) at any depth."""
    if isinstance(value, str):
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            return False
        return True
    if isinstance(value, dict):
        return all(_storable(k) and _storable(v) for k, v in value.items())
    if isinstance(value, list):
        return all(_storable(v) for v in value)
    return True


async def _json_object(request: Request) -> dict[str, Any]:
    """The body as a JSON object, or `400 invalid_request` (field `body`, or the field that holds text
    that is not valid Unicode). `NaN` and `Infinity` are not JSON and are refused too."""
    raw = await request.body()
    try:
        data = json.loads(raw, parse_constant=_no_constant)
    except (UnicodeDecodeError, ValueError):  # JSONDecodeError is a ValueError
        raise _invalid("body", "malformed JSON body") from None
    except RecursionError:
        raise _invalid("body", "the JSON body is nested too deeply") from None
    if not isinstance(data, dict):
        raise _invalid("body", "the body must be a JSON object")
    for name, value in data.items():
        try:
            storable = _storable(name) and _storable(value)
        except RecursionError:
            raise _invalid(name, f"{name} is nested too deeply") from None
        if not storable:
            field = name if _storable(name) else "body"
            raise _invalid(field, f"{field} holds text that is not valid Unicode (a lone surrogate)")
    return data


def _unknown_fields(data: dict[str, Any], model: type[BaseModel]) -> None:
    for name in data:
        if name not in model.model_fields:
            raise _invalid(name, f"unknown field {name!r}")


M = TypeVar("M", bound=BaseModel)


def validated_body(data: dict[str, Any], model: type[M]) -> M:
    """`model` from `data`, the first problem as `400 invalid_request` naming its field."""
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        loc = first.get("loc", ())
        name = str(loc[0]) if loc else "body"
        if name in INT_BOUNDS:
            low, high = INT_BOUNDS[name]
            message = f"{name} must be an integer from {low} to {high}; got {_shown(data.get(name))}"
        elif first.get("type") == "missing":
            message = f"{name} is required"
        else:
            path = name + "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in loc[1:])
            message = f"{path}: {first.get('msg', 'invalid value')}"
        raise _invalid(name, message) from None


def parse_query_request(request: Request, data: dict[str, Any]) -> QueryRequest:
    """Unknown fields → extensions → types and ranges → values → option conflicts (api.md §8.1)."""
    _unknown_fields(data, QueryRequest)
    for name in EXTENSION_FIELDS:
        if name in data:
            require_unstable(request, name)
    body = validated_body(data, QueryRequest)
    problem = body.value_problem()
    if problem is not None:
        raise _invalid(*problem)
    if body.stream and body.background:
        raise ApiError(400, "conflicting_options", "stream and background exclude each other", field="stream")
    conflict = body.conflict()
    if conflict is not None:
        raise ApiError(400, "conflicting_options", conflict[1], field=conflict[0])
    return body


# ---------------------------------------------------------------------------------- comparison groups
class PendingGroups:
    """Places in comparison groups taken by turns still being admitted. The stored turns of a group
    are counted in the database; these are the ones between the group check and their insert, so two
    requests admitted at once cannot both take a group's last place (api.md §8.1's order puts the
    `409` before the sandbox and capacity checks, which come before the insert)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._pending: dict[str, int] = {}

    def take(self, db: ServerDB, group: str) -> None:
        with self._lock:
            taken = db.comparison_group_size(group) + self._pending.get(group, 0)
            if taken >= COMPARISON_GROUP_SIZE:
                raise ApiError(
                    409,
                    "comparison_group_full",
                    f"comparison group {group!r} already has {COMPARISON_GROUP_SIZE} turns",
                )
            self._pending[group] = self._pending.get(group, 0) + 1

    def release(self, group: str) -> None:
        """The turn was stored (or refused): its place is now counted by the database, or free."""
        with self._lock:
            left = self._pending.get(group, 0) - 1
            if left > 0:
                self._pending[group] = left
            else:
                self._pending.pop(group, None)


_pending_lock = threading.Lock()


def pending_groups(request: Request) -> PendingGroups:
    app_state: Any = request.app.state
    with _pending_lock:
        found: PendingGroups | None = getattr(app_state, "sleuth_pending_groups", None)
        if found is None:
            found = PendingGroups()
            app_state.sleuth_pending_groups = found
        return found


def present(state: ApiState, document: dict[str, Any]) -> dict[str, Any]:
    """A stored Query as served: `comparison` lists the other turns of its group as they are now. A turn
    in a group is stored with `comparison: []`, so ungrouped ones (nearly all) cost no second read."""
    if document.get("comparison") is None:
        return document
    comparison = state.db.comparison_of(str(document.get("id")))
    return {**document, "comparison": comparison or []}


# ---------------------------------------------------------------------------------- admission
def _session_of(state: ApiState, body: QueryRequest, who: Principal) -> str | None:
    """Session resolution: `previous_query_id` names a turn whose session is continued. Only a session
    the caller may see can be continued; then (for a new session) the scope it may see."""
    if body.previous_query_id is None:
        if body.session_id is not None:
            visible_session(state, who, body.session_id)
        else:
            check_scope(state, who, list(body.scope or []))
        return body.session_id
    previous = visible_query(state, who, body.previous_query_id)
    session_id = str(previous["session_id"])
    if body.session_id is not None and body.session_id != session_id:
        raise _invalid(
            "previous_query_id",
            f"previous_query_id {body.previous_query_id!r} belongs to session {session_id!r}, "
            f"not to session_id {body.session_id!r}",
        )
    return session_id


def admit_turn(
    state: ApiState, turns: TurnExecutor, groups: PendingGroups, body: QueryRequest, who: Principal
) -> tuple[dict[str, Any], Future[Query]]:
    """Prepare, store and submit one turn (on a worker thread: it reads files and writes the database).

    Returns the stored in-progress Query and the turn's future. Admission and submission happen in this
    one call, so a request cancelled meanwhile cannot leave a stored turn that never runs. The MCP
    server's `query_context` admits its turns here too.
    """
    session_id = _session_of(state, body, who)
    group = body.comparison_group
    grouped = reserved = False
    request = body.turn(session_id)

    def admit(session: dict[str, Any] | None) -> None:
        nonlocal grouped, reserved
        if session is None:
            _check_models_available(state, body)
        elif session.get("active_query_id"):
            raise TurnError("session_busy", "a turn of this session is still running")
        if group is not None:
            groups.take(state.db, group)
            grouped = True
        if request.retrieval is None:  # a retrieval-only turn starts no sandbox
            _check_sandbox(state)
        turns.reserve()
        reserved = True

    try:
        prepared = state.runtime.prepare(request, admit, Caller(who.name, model_specs=False))
    except BaseException:
        if reserved:
            turns.unreserve()
        raise
    finally:
        if grouped and group is not None:
            groups.release(group)  # stored (now counted by the database) or refused
    snapshot = present(state, prepared.query.model_dump(mode="json"))
    return snapshot, turns.submit(prepared)


def _check_sandbox(state: ApiState) -> None:
    report = sandbox_report(state)
    if not report.get("ok"):
        missing = ", ".join(report.get("missing") or []) or "unknown"
        raise ApiError(
            503, "sandbox_unavailable", f"the sandbox is below its isolation floor (missing: {missing})"
        )


def _check_models_available(state: ApiState, body: QueryRequest) -> None:
    catalog = state.runtime.catalog
    names: list[str | None] = list(body.models or []) or [body.model]
    for name in names:
        try:
            config = catalog.resolve(name, allow_specs=False)
        except CatalogError as exc:
            raise TurnError("model_unavailable", str(exc)) from None
        if not catalog.available(config):
            raise TurnError("model_unavailable", f"model {config.id!r} is not available on this server")


def _error_of(exc: TurnError) -> ApiError:
    return ApiError(TURN_ERROR_STATUS.get(exc.code, 400), exc.code, str(exc))


# ---------------------------------------------------------------------------------- routes
@router.post(
    "/query",
    summary="Run a query turn (sync, background or SSE)",
    response_model=None,
    openapi_extra=_body_schema(QueryRequest),
    responses={
        202: {"description": "background: the Query in progress"},
        **error_responses(
            (400, "invalid_request"),
            (404, "context_not_found"),
            (409, "session_busy"),
            (429, "too_many_queries"),
            (503, "sandbox_unavailable"),
            (504, "query_timeout"),
        ),
    },
)
async def post_query(request: Request, who: AnyKey) -> Response:
    state = api_state(request)
    body = parse_query_request(request, await _json_object(request))
    turns = executor(request)
    groups = pending_groups(request)
    try:
        snapshot, future = await turns.admit(partial(admit_turn, state, turns, groups, body, who))
    except TurnError as exc:
        raise _error_of(exc) from None
    query_id = str(snapshot["id"])
    if body.background:
        return JSONResponse(snapshot, status_code=202, headers={"Location": f"/api/queries/{query_id}"})
    if body.stream:
        return stream_response(
            follow(state.db, turns, query_id, 1, lambda doc: present(state, doc)), query_id
        )
    finished = await wait_for(future)
    document = await run_in_threadpool(_stored, state, query_id, who)
    if (
        finished.status == "failed"
        and finished.rollup is not None
        and finished.rollup.stop_reason == "timeout"
    ):
        raise ApiError(504, "query_timeout", finished.error or "the turn timed out", query_id=query_id)
    return JSONResponse(document)


def _stored(state: ApiState, query_id: str, who: Principal) -> dict[str, Any]:
    """The turn as served, or `404 query_not_found` when it does not exist for `who`."""
    return present(state, visible_query(state, who, query_id))


@router.get(
    "/queries/{query_id}", summary="A query turn", responses=error_responses((404, "query_not_found"))
)
async def get_query(request: Request, query_id: str, who: AnyKey) -> dict[str, Any]:
    return await run_in_threadpool(_stored, api_state(request), query_id, who)


@router.post(
    "/queries/{query_id}/cancel",
    summary="Cancel a running turn (idempotent on a finished one)",
    responses=error_responses((404, "query_not_found")),
)
async def cancel_query(request: Request, query_id: str, who: AnyKey) -> dict[str, Any]:
    state, turns = api_state(request), executor(request)
    document = await run_in_threadpool(_stored, state, query_id, who)
    if document.get("status") in TERMINAL_STATUSES:
        return document
    if await run_in_threadpool(turns.cancel, query_id):

        def finished() -> bool:  # ended, its session released and its place in the pool free
            return not state.runtime.is_active(query_id) and not turns.holds(query_id)

        await wait_until(finished, turns.hub, query_id, CANCEL_WAIT_S)
    return await run_in_threadpool(_stored, state, query_id, who)


@router.get(
    "/queries/{query_id}/trace",
    summary="The trace of a finished turn",
    responses=error_responses((404, "query_not_found"), (409, "query_not_terminal")),
)
async def get_trace(request: Request, query_id: str, who: AnyKey) -> dict[str, Any]:
    state = api_state(request)
    document = await run_in_threadpool(_stored, state, query_id, who)
    if document.get("status") not in TERMINAL_STATUSES:
        raise ApiError(409, "query_not_terminal", f"query {query_id} is still running", query_id=query_id)
    trace = await run_in_threadpool(state.db.get_trace, query_id)
    if trace is None:  # a turn interrupted by a restart has no trace; say so rather than 404
        return {
            "query_id": query_id,
            "steps": [],
            "rollup": document.get("rollup"),
            "replay": {"available": False},
        }
    return trace


@router.get(
    "/queries/{query_id}/events",
    summary="The turn's events as SSE: replayed from Last-Event-ID (inclusive), then live",
    response_model=None,
    responses={
        200: {"description": "text/event-stream", "content": {"text/event-stream": {}}},
        **error_responses((404, "query_not_found")),
    },
)
async def get_events(
    request: Request,
    query_id: str,
    who: AnyKey,
    last_event_id: Annotated[str | None, Header(alias="Last-Event-ID")] = None,
) -> Response:
    state = api_state(request)
    since = 1
    if last_event_id is not None and last_event_id.strip():
        try:
            since = int(last_event_id.strip())
        except ValueError:
            raise _invalid(
                "Last-Event-ID", f"Last-Event-ID must be an event id; got {last_event_id!r}"
            ) from None
    await run_in_threadpool(_stored, state, query_id, who)
    frames = follow(state.db, executor(request), query_id, since, lambda doc: present(state, doc))
    return stream_response(frames, query_id)


@router.post(
    "/queries/{query_id}/feedback",
    summary="Rate a turn (a second call replaces the first)",
    status_code=204,
    response_class=Response,
    openapi_extra=_body_schema(FeedbackRequest),
    responses=error_responses((400, "invalid_request"), (404, "query_not_found")),
)
async def post_feedback(request: Request, query_id: str, who: AnyKey) -> Response:
    data = await _json_object(request)
    _unknown_fields(data, FeedbackRequest)
    body = validated_body(data, FeedbackRequest)
    feedback = {"rating": body.rating, "comment": body.comment}
    state = api_state(request)
    await run_in_threadpool(visible_query, state, who, query_id)
    try:
        await run_in_threadpool(state.db.set_feedback, query_id, feedback)
    except QueryNotFound:
        raise query_not_found(query_id) from None
    return Response(status_code=204)


@router.post(
    "/queries/{query_id}/replay",
    summary="Re-run a finished turn from its replay log and compare [ext]",
    responses=error_responses(
        (400, "requires_unstable_version"),
        (404, "query_not_found"),
        (409, "query_not_terminal"),
    ),
)
async def replay_query(request: Request, query_id: str, who: AdminKey) -> dict[str, Any]:
    require_unstable(request, "POST /queries/{id}/replay")
    state = api_state(request)
    document = await run_in_threadpool(_stored, state, query_id, who)
    if document.get("status") not in TERMINAL_STATUSES:
        raise ApiError(409, "query_not_terminal", f"query {query_id} is still running", query_id=query_id)
    try:
        report: dict[str, Any] = await run_in_threadpool(replay, state.home, query_id, state.db)
    except ReplayError as exc:
        status = 404 if exc.code == "query_not_found" else 409
        raise ApiError(status, exc.code, str(exc), query_id=query_id) from None
    return report


@router.get("/models", summary="The model catalog")
async def get_models(request: Request, who: AnyKey) -> dict[str, Any]:
    catalog = api_state(request).runtime.catalog
    return {**catalog.public(), "embedding_models": embedding_models()}


def embedding_models() -> list[dict[str, Any]]:
    """`embedding_models` [ext]: the embedders a manifest may name, available when their files ship."""
    files = {
        embedder.MiniLMEmbedder.id: (embedder.MiniLMEmbedder.dim, embedder.DATA_DIR / "model.onnx"),
        embedder.StaticEmbedder.id: (embedder.StaticEmbedder.dim, embedder.STATIC_DIR / "embeddings.npy"),
    }
    return [
        {"id": name, "dim": files[name][0], "available": files[name][1].is_file()}
        for name in EMBEDDING_MODELS
        if name in files
    ]
