"""Admitting a turn (spec/api.md §8.1), for `POST /query` and MCP's `query_context`, in one pass: the
session the request continues (`_session_of`), the runtime's plan (`Runtime.resolve`: scope, models,
shape), the server's own checks in the documented order (`_check`: models available, busy session,
comparison group, sandbox floor, capacity: the key's share, then the total), then the runtime stores the
turn (`Runtime.admit`) and the executor gets it run. A refusal is a `Told` or the runtime's
`TurnError`: the API gives it its status.
"""

from __future__ import annotations

from concurrent.futures import Future

from pydantic import ConfigDict, Field

from sleuth.agent.records import Query, query_document
from sleuth.agent.request import Caller, TurnRequest
from sleuth.agent.turn import TurnError, TurnPlan
from sleuth.errors import ToldConflict, ToldInvalid, ToldUnavailable
from sleuth.server.access import Principal, check_scope, visible_query, visible_session
from sleuth.server.sandbox_probe import sandbox_report
from sleuth.server.state import Server
from sleuth.server.turns import TurnExecutor
from sleuth.store.records.rows import QueryDocument
from sleuth.store.records.server_db import COMPARISON_GROUP_SIZE, ComparisonGroupFull, TurnPlacesFull


class QueryRequest(TurnRequest):
    """The body of `POST /query` (spec/api.md §8.1): the turn contract plus what is the server's. Validated
    strictly: `"100"` is not an integer, `1` not a bool."""

    model_config = ConfigDict(extra="forbid", strict=True)

    previous_query_id: str | None = Field(None, max_length=200)
    stream: bool = False
    background: bool = False

    def turn(self, session_id: str | None) -> TurnRequest:
        """The turn this body asks for, in the session that `previous_query_id` resolved to."""
        fields = {name: getattr(self, name) for name in TurnRequest.model_fields}
        return TurnRequest.model_construct(**{**fields, "session_id": session_id})


def present(state: Server, document: QueryDocument) -> QueryDocument:
    """A stored Query as served: `comparison` lists the other turns of its group as they are now. A turn
    in a group is stored with `comparison: []`, so ungrouped ones (nearly all) cost no second read."""
    if document.get("comparison") is None:
        return document
    comparison = state.db.comparison_of(str(document.get("id")))
    return {**document, "comparison": comparison or []}


def group_full(group: str) -> ToldConflict:
    """`409 comparison_group_full`, whether the read before admission or the admitting transaction
    finds the group full."""
    return ToldConflict(
        "comparison_group_full", f"comparison group {group!r} already has {COMPARISON_GROUP_SIZE} turns"
    )


def share_key(who: Principal) -> str | None:
    """The key whose share of the turn places a turn counts against (`TurnPlaces`): a query
    key's id. None for an admin key (the operator, who may use every place) and for no-auth mode, whose
    one implicit user must keep the server's whole capacity."""
    return who.key_id if who.key_id is not None and not who.is_admin else None


# ---------------------------------------------------------------------------------- admission
def admit_turn(
    state: Server, turns: TurnExecutor, body: QueryRequest, who: Principal
) -> tuple[QueryDocument, Future[Query] | None]:
    """Resolve, check, store and submit one turn (on an admission thread: it reads files and writes the
    database).

    Returns the stored in-progress Query and, when this process runs it, the turn's future (None when
    a worker will). Admission and submission happen in this one call, so a request cancelled meanwhile
    cannot leave a stored turn that never runs.

    The checks before `Runtime.admit` are reads; its one transaction re-checks the busy session, the
    comparison group and the turn places and stores the turn, so requests racing on any number of
    servers never pass a limit together.
    """
    request = body.turn(_session_of(state, body, who))
    plan = state.runtime.resolve(request, Caller(who.name, model_specs=False))
    key = share_key(who)
    _check(state, turns, plan, key)
    try:
        prepared = state.runtime.admit(plan, places=turns.places(key), holder=turns.holder())
    except ComparisonGroupFull:  # filled by a turn admitted since `_check` read it
        raise group_full(str(request.comparison_group)) from None
    except TurnPlacesFull as exc:
        raise turns.refusal(exc) from None
    snapshot = present(state, query_document(prepared.query))
    return snapshot, turns.submit(prepared)


def _session_of(state: Server, body: QueryRequest, who: Principal) -> str | None:
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
        raise ToldInvalid(
            "invalid_request",
            f"previous_query_id {body.previous_query_id!r} belongs to session {session_id!r}, "
            f"not to session_id {body.session_id!r}",
            field="previous_query_id",
        )
    return session_id


def _check(state: Server, turns: TurnExecutor, plan: TurnPlan, key: str | None) -> None:
    """The server's own checks on a resolved turn, in spec/api.md §8.1's order."""
    request = plan.request
    if plan.session is None:
        names: list[str | None] = list(request.models or []) or [request.model]
        for name in names:
            state.runtime.catalog.usable(name)
    elif plan.session.get("active_query_id"):
        raise TurnError("session_busy", "a turn of this session is still running")
    group = request.comparison_group
    if group is not None and state.db.comparison_group_size(group) >= COMPARISON_GROUP_SIZE:
        raise group_full(group)
    if request.retrieval is None and turns.queue is None:  # a retrieval-only turn starts no sandbox
        _check_sandbox(state)  # with a queue a worker runs it: its own sandbox is what matters
    turns.check_places(key)


def _check_sandbox(state: Server) -> None:
    report = sandbox_report(state)
    if not report.get("ok"):
        missing = ", ".join(report.get("missing") or []) or "unknown"
        raise ToldUnavailable(
            "sandbox_unavailable", f"the sandbox is below its isolation floor (missing: {missing})"
        )
