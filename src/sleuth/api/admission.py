"""Admitting a turn over HTTP and MCP (spec/api.md §8.1): session resolution, the server's own checks in the
documented order (models available, busy session, comparison group, sandbox floor, capacity: the
key's share, then the total), then the runtime's `prepare` and the turn executor.
"""

from __future__ import annotations

from concurrent.futures import Future
from typing import Any

from sleuth.agent.records import Query
from sleuth.agent.request import Caller
from sleuth.agent.turn import TurnError
from sleuth.api.access import check_scope, visible_query, visible_session
from sleuth.api.auth import Principal
from sleuth.api.errors import ApiError
from sleuth.api.query_request import (
    QueryRequest,
    _invalid,
)
from sleuth.api.system import sandbox_report
from sleuth.server.state import Server
from sleuth.server.turns import TurnExecutor
from sleuth.store.server_db import COMPARISON_GROUP_SIZE, TurnPlacesFull


def present(state: Server, document: dict[str, Any]) -> dict[str, Any]:
    """A stored Query as served: `comparison` lists the other turns of its group as they are now. A turn
    in a group is stored with `comparison: []`, so ungrouped ones (nearly all) cost no second read."""
    if document.get("comparison") is None:
        return document
    comparison = state.db.comparison_of(str(document.get("id")))
    return {**document, "comparison": comparison or []}


# ---------------------------------------------------------------------------------- admission
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
        raise _invalid(
            "previous_query_id",
            f"previous_query_id {body.previous_query_id!r} belongs to session {session_id!r}, "
            f"not to session_id {body.session_id!r}",
        )
    return session_id


def admit_turn(
    state: Server, turns: TurnExecutor, body: QueryRequest, who: Principal
) -> tuple[dict[str, Any], Future[Query] | None]:
    """Prepare, store and submit one turn (on an admission thread: it reads files and writes the
    database).

    Returns the stored in-progress Query and, when this process runs it, the turn's future (None when
    a worker will). Admission and submission happen in this one call, so a request cancelled meanwhile
    cannot leave a stored turn that never runs. The MCP server's `query_context` admits here too.

    The checks run in spec/api.md §8.1's order as reads (`admit`); then one transaction re-checks the
    busy session, the comparison group and the turn places and stores the turn, so requests racing on
    any number of servers never pass a limit together.
    """
    session_id = _session_of(state, body, who)
    key = share_key(who)
    group = body.comparison_group
    request = body.turn(session_id)

    def admit(session: dict[str, Any] | None) -> None:
        if session is None:
            _check_models_available(state, body)
        elif session.get("active_query_id"):
            raise TurnError("session_busy", "a turn of this session is still running")
        if group is not None and state.db.comparison_group_size(group) >= COMPARISON_GROUP_SIZE:
            raise ApiError(
                409,
                "comparison_group_full",
                f"comparison group {group!r} already has {COMPARISON_GROUP_SIZE} turns",
            )
        if request.retrieval is None and turns.queue is None:  # a retrieval-only turn starts no sandbox
            _check_sandbox(state)  # with a queue a worker runs it: its own sandbox is what matters
        turns.check_places(key)

    try:
        prepared = state.runtime.prepare(
            request,
            admit,
            Caller(who.name, model_specs=False),
            places=turns.places(key),
            holder=turns.holder(),
        )
    except TurnPlacesFull as exc:
        raise turns.refusal(exc) from None
    snapshot = present(state, prepared.query.model_dump(mode="json"))
    return snapshot, turns.submit(prepared)


def share_key(who: Principal) -> str | None:
    """The key whose share of the turn places a turn counts against (`TurnPlaces`): a query
    key's id. None for an admin key (the operator, who may use every place) and for no-auth mode, whose
    one implicit user must keep the server's whole capacity."""
    return who.key_id if who.key_id is not None and not who.is_admin else None


def _check_sandbox(state: Server) -> None:
    report = sandbox_report(state)
    if not report.get("ok"):
        missing = ", ".join(report.get("missing") or []) or "unknown"
        raise ApiError(
            503, "sandbox_unavailable", f"the sandbox is below its isolation floor (missing: {missing})"
        )


def _check_models_available(state: Server, body: QueryRequest) -> None:
    catalog = state.runtime.catalog
    names: list[str | None] = list(body.models or []) or [body.model]
    for name in names:
        catalog.usable(name)
