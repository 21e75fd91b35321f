"""Routes: queries (spec/api.md §8–§10.3): `POST /query` in its three modes (sync, background, SSE), the
Query, its cancel, trace, events, feedback and replay, and `GET /models`.

`POST /query` reads its body itself instead of letting FastAPI bind it, so the checks run in the
documented order (§8.1 "Validation order"): credentials (the dependency) → JSON syntax → unknown fields
→ extensions under `2026-07` → types and ranges → option conflicts → then `server/admission.py`
`admit_turn`: session → (in `Runtime.resolve`) scope, models, shape → (the server's own) models
available, busy session, comparison group, sandbox, capacity. Nothing is stored until every check
passed. The turn then runs on the bounded executor (turns.py), never on the
request: a client that goes away leaves it running.

Every route that names a turn (`_stored`) or a session answers only for what the caller may see
(`server/access.py`): another principal's turn is `404 query_not_found`, as if it did not exist.
"""

from __future__ import annotations

from functools import partial
from typing import Annotated, Any

from fastapi import APIRouter, Header, Request, Response
from fastapi.responses import JSONResponse, StreamingResponse
from starlette.concurrency import run_in_threadpool

from sleuth.agent.replay import ReplayError, replay
from sleuth.agent.turn import TurnError
from sleuth.api.auth import AdminKey, AnyKey
from sleuth.api.errors import TURN_ERROR_STATUS, ApiError, error_responses
from sleuth.api.query_request import (
    FeedbackRequest,
    _body_schema,
    _invalid,
    _json_object,
    _unknown_fields,
    parse_query_request,
    validated_body,
)
from sleuth.api.sse import follow, stream_response
from sleuth.api.state import api_state, executor
from sleuth.api.versioning import require_unstable
from sleuth.compile.manifest import EMBEDDING_MODELS
from sleuth.models import embedder
from sleuth.server.access import Principal, query_not_found, visible_query
from sleuth.server.admission import QueryRequest, admit_turn, present
from sleuth.server.state import Server
from sleuth.server.turns import settled, wait_until
from sleuth.settings import TURN_CAP_SECONDS
from sleuth.store.records.rows import Feedback, QueryDocument
from sleuth.store.records.server_db import TERMINAL_STATUSES, QueryNotFound

router = APIRouter()

CANCEL_WAIT_S = 10.0  # how long `cancel` waits for the turn to reach its terminal state
SYNC_WAIT_MARGIN_S = 60.0  # a sync request waits this long past the turn's cap


def _error_of(exc: TurnError) -> ApiError:
    extra: dict[str, Any] = {"field": exc.field} if exc.field is not None else {}
    return ApiError(TURN_ERROR_STATUS.get(exc.code, 400), exc.code, str(exc), **extra)


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
    try:
        snapshot, _future = await turns.admit(partial(admit_turn, state, turns, body, who))
    except TurnError as exc:
        raise _error_of(exc) from None
    query_id = str(snapshot["id"])
    if body.background:
        return JSONResponse(snapshot, status_code=202, headers={"Location": f"/api/queries/{query_id}"})
    if body.stream:
        return stream_response(
            follow(state.db, turns.hub, query_id, 1, lambda doc: present(state, doc)), query_id
        )
    # The turn runs here or on a worker: either way its end is in the database. The wait outlasts the
    # turn's own cap, after which the turn has failed with `timeout` (or a worker's loss was noticed).
    wait_s = float(body.timeout_seconds or TURN_CAP_SECONDS) + SYNC_WAIT_MARGIN_S
    if not await wait_until(partial(settled, state.db, query_id), turns.hub, query_id, wait_s):
        # Still waiting for a worker (the turn's cap counts from when one takes it): poll it instead.
        raise ApiError(
            504,
            "query_timeout",
            f"the turn has not finished within {wait_s:g} s (it may still be queued); poll "
            f"GET /api/queries/{query_id}",
            query_id=query_id,
        )
    document = await run_in_threadpool(_stored, state, query_id, who)
    rollup = document.get("rollup")
    timed_out = rollup is not None and rollup.get("stop_reason") == "timeout"
    if document.get("status") == "failed" and timed_out:
        raise ApiError(504, "query_timeout", document.get("error") or "the turn timed out", query_id=query_id)
    return JSONResponse(document)


def _stored(state: Server, query_id: str, who: Principal) -> QueryDocument:
    """The turn as served, or `404 query_not_found` when it does not exist for `who`."""
    return present(state, visible_query(state, who, query_id))


def _served(state: Server, query_id: str, who: Principal) -> dict[str, Any]:
    """`_stored` as a route returns it: a plain object, since FastAPI would make a response model of
    the TypedDict (and a new OpenAPI schema)."""
    return dict(_stored(state, query_id, who))


@router.get(
    "/queries/{query_id}", summary="A query turn", responses=error_responses((404, "query_not_found"))
)
async def get_query(request: Request, query_id: str, who: AnyKey) -> dict[str, Any]:
    return await run_in_threadpool(_served, api_state(request), query_id, who)


@router.post(
    "/queries/{query_id}/cancel",
    summary="Cancel a running turn (idempotent on a finished one)",
    responses=error_responses((404, "query_not_found")),
)
async def cancel_query(request: Request, query_id: str, who: AnyKey) -> dict[str, Any]:
    state, turns = api_state(request), executor(request)
    document = await run_in_threadpool(_stored, state, query_id, who)
    if document.get("status") in TERMINAL_STATUSES:
        return dict(document)
    if await run_in_threadpool(turns.cancel, query_id):
        # Ended and its session released, whichever process ran it.
        await wait_until(partial(settled, state.db, query_id), turns.hub, query_id, CANCEL_WAIT_S)
    return await run_in_threadpool(_served, state, query_id, who)


@router.get(
    "/queries/{query_id}/trace",
    summary="The trace of a finished turn",
    responses=error_responses((404, "query_not_found"), (409, "query_not_terminal")),
)
async def get_trace(request: Request, query_id: str, who: AnyKey) -> Any:
    state = api_state(request)
    document = await run_in_threadpool(_stored, state, query_id, who)
    if document.get("status") not in TERMINAL_STATUSES:
        raise ApiError(409, "query_not_terminal", f"query {query_id} is still running", query_id=query_id)
    length = await run_in_threadpool(state.db.trace_length, query_id)
    if length is None:  # a turn interrupted by a restart has no trace; say so rather than 404
        return {
            "query_id": query_id,
            "steps": [],
            "rollup": document.get("rollup"),
            "replay": {"available": False},
        }
    # The stored text as it is, streamed in pieces: parsing and re-encoding it per download held the
    # whole trace several times over (8 parallel downloads of a large one added 662 MB).
    return StreamingResponse(state.db.trace_chunks(query_id, length), media_type="application/json")


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
    frames = follow(state.db, executor(request).hub, query_id, since, lambda doc: present(state, doc))
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
    feedback: Feedback = {"rating": body.rating, "comment": body.comment}
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
