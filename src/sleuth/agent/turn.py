"""One query turn, stage by stage (spec/runtime.md §1): admit, sandbox, orient, loop, synthesize,
verify, finalize.

`Runtime` is the engine the CLI and the HTTP API share. It resolves the session and the models,
pins each scoped context's live version, runs the loop in a fresh sandbox, writes the answer from
the evidence, verifies every citation against the page text, and records the Query, its events,
its trace and its replay log in `$SLEUTH_HOME`. A crash inside a turn marks the query `failed`; it
never escapes as an exception from `run`.

This module admits a turn; `run.py` runs it and `trace.py` assembles what it leaves behind.
"""

from __future__ import annotations

import logging
import threading
import time
import traceback
from collections.abc import Callable

from sleuth.agent.actions import SDK_NAMES
from sleuth.agent.orientation import ContextBrief
from sleuth.agent.prepared import PreparedTurn, TurnPlan
from sleuth.agent.records import Query, query_document
from sleuth.agent.request import LOCAL, Caller, TurnRequest
from sleuth.agent.run import Emit, TurnRun
from sleuth.agent.shape import check_shape
from sleuth.agent.trace import sleuth_version
from sleuth.errors import Error
from sleuth.models.base import Model, ModelConfig
from sleuth.models.catalog import Catalog, CatalogError, build_model
from sleuth.sandbox.host import SandboxHost
from sleuth.sandbox.limits import HostBudget, Limits
from sleuth.store.contexts.home import ContextNotFound, Home
from sleuth.store.database import new_id
from sleuth.store.records.rows import SessionRow, TurnRecord
from sleuth.store.records.server_db import Holder, ServerDB, SessionBusy, TurnPlaces

__all__ = [
    "Caller",
    "PreparedTurn",
    "Runtime",
    "TurnError",
    "TurnPlan",
    "TurnRequest",
    "new_query_id",
    "sleuth_version",
]

log = logging.getLogger("sleuth.turn")
PINNED_FIELDS = ("scope", "system_prompt", "guardrails", "model", "models", "tools")


class TurnError(Error):
    """A request rejected before the turn starts; `code` is spec/api.md §4's. The HTTP status it maps to
    is the API layer's business (`api.errors.TURN_ERROR_STATUS`): the CLI and MCP have none."""

    def __init__(self, code: str, message: str, field: str | None = None) -> None:
        super().__init__(message)
        self.code = code
        self.field = field  # the request field at fault, where one is


def default_max_steps(workflow: str) -> int:
    """`query_defaults.max_steps` of spec/api.md §8.1: the RAG workflow is two fixed steps."""
    return 2 if workflow == "search_rag" else 8


class Runtime:
    """The query engine over one `$SLEUTH_HOME`. Thread-safe: each turn runs on its caller's thread.

    `model_factory` builds a provider model from a catalog entry; tests pass one that returns a
    scripted model. The offline planner is built here, per turn, because it reads the turn's scope.
    """

    def __init__(
        self,
        home: Home,
        *,
        catalog: Catalog | None = None,
        db: ServerDB | None = None,
        sandbox_host: SandboxHost | None = None,
        model_factory: Callable[[ModelConfig], Model] = build_model,
        limits: Limits | None = None,
        budget: HostBudget | None = None,
        recover: bool = False,
    ) -> None:
        """`recover` fails turns left `in_progress` by a crashed process: only the process that owns
        the home's turns (the server) may do that, never a CLI run beside it. `budget` caps the host's
        work per turn (default: `HostBudget.from_settings()`)."""
        self.home = home
        self.catalog = catalog or Catalog.load(home.root)
        self.db = db or ServerDB.for_home(home)
        self.limits = limits or Limits()
        self.budget = budget or HostBudget.from_settings()
        self._host = sandbox_host
        self._own_host = sandbox_host is None
        self.model_factory = model_factory
        self._lock = threading.Lock()
        # Turns admitted and not yet finished (queued or running), so `cancel` can reach them.
        self._turns: dict[str, PreparedTurn] = {}
        self._runs: dict[str, TurnRun] = {}
        self._turns_lock = threading.Lock()
        if recover:
            self.db.recover_interrupted()

    # ------------------------------------------------------------------------------ lifecycle
    @property
    def sandbox_host(self) -> SandboxHost:
        with self._lock:
            if self._host is None:
                self._host = SandboxHost(self.limits)
            return self._host

    def close(self) -> None:
        if self._own_host and self._host is not None:
            self._host.close()
            self._host = None

    def __enter__(self) -> Runtime:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ------------------------------------------------------------------------------ admission
    def prepare(
        self,
        request: TurnRequest,
        caller: Caller = LOCAL,
        places: TurnPlaces | None = None,
        holder: Holder | None = None,
    ) -> PreparedTurn:
        """`resolve` then `admit`, for a caller with no checks of its own between them (the CLI)."""
        return self.admit(self.resolve(request, caller), places=places, holder=holder)

    def resolve(self, request: TurnRequest, caller: Caller = LOCAL) -> TurnPlan:
        """Check what the request's declaration cannot, and resolve the session, scope and models into a
        plan; nothing is stored. `caller` says who asks (`request.Caller`). Each context's live version is
        pinned here, so a curate that flips mid-turn changes nothing, on any worker."""
        checks = (("invalid_request", request.value_problem()), ("conflicting_options", request.conflict()))
        for code, problem in checks:
            if problem is not None:
                raise TurnError(code, problem[1])
        for tool in request.tools or []:
            if tool not in SDK_NAMES:
                raise TurnError("unknown_tool", f"unknown tool {tool!r}; known: {', '.join(SDK_NAMES)}")
        session: SessionRow | None = None
        ignored: list[str] = []
        if request.session_id:
            session = self.db.get_session(request.session_id)
            if session is None:
                raise TurnError("session_not_found", f"no session {request.session_id!r}")
            ignored = [name for name in PINNED_FIELDS if getattr(request, name) not in (None, [])]
        elif not request.scope:
            raise TurnError(
                "scope_required", "a turn that starts a session needs a scope: the contexts to answer from"
            )
        scope = list(session["scope"]) if session else list(dict.fromkeys(request.scope or []))
        if not 1 <= len(scope) <= 10:
            raise TurnError("invalid_request", "scope takes 1 to 10 contexts")
        briefs = [self._brief(slug) for slug in scope]
        if session is not None:
            model_ids = list(session["models"])
        else:
            wanted: list[str | None] = list(request.models or []) or [request.model]
            try:
                model_ids = [self.catalog.resolve(name, allow_specs=caller.model_specs).id for name in wanted]
            except CatalogError as exc:
                raise TurnError("model_unavailable", str(exc), "model") from None
        configs = []
        for model_id in model_ids:
            try:
                configs.append(self.catalog.resolve(model_id, allow_specs=caller.model_specs))
            except CatalogError as exc:
                raise TurnError("model_unavailable", str(exc), "model") from None
            # A model the default factory cannot build here (its SDK extra or key missing) is refused
            # before a session is stored, not failed inside the turn as an internal error
            missing = self.catalog.missing(configs[-1]) if self.model_factory is build_model else None
            if missing is not None:
                raise TurnError("model_unavailable", missing, "model")
        if request.shape is not None:
            try:
                check_shape(request.shape)
            except ValueError as exc:
                raise TurnError("invalid_shape", str(exc)) from None
        return TurnPlan(
            request,
            caller,
            session,
            tuple(scope),
            tuple(briefs),
            tuple(model_ids),
            tuple(configs),
            request.canonical_workflow,
            tuple(ignored),
        )

    def admit(
        self, plan: TurnPlan, *, places: TurnPlaces | None = None, holder: Holder | None = None
    ) -> PreparedTurn:
        """Store a resolved turn: one transaction (`ServerDB.admit_turn`) re-checks the busy session,
        the comparison group and `places` where no other request, on any server, can race it, and
        stores the session, the claim and the Query `in_progress` together, with what a worker needs to
        run it (`restore`), held by `holder` when this process runs it. A full group or full places
        are the store's errors (`ComparisonGroupFull`, `TurnPlacesFull`): the server words them."""
        request, session, configs = plan.request, plan.session, list(plan.configs)
        new_session = session is None
        if session is None:
            session = self.db.new_session(
                scope=list(plan.scope),
                title=request.ask.strip()[:80],
                system_prompt=request.system_prompt,
                guardrails=request.guardrails,
                models=list(plan.model_ids),
                tools=request.tools,
                workflow=plan.workflow or "search",
                created_by=plan.caller.name,
            )
        workflow = plan.workflow or session.get("workflow") or "search"
        previous = session.get("last_query_id")
        query = Query(
            id=new_query_id(),
            session_id=session["id"],
            # The first choice, so a queued turn already names it (a fallback rewrites it); a
            # retrieval-only turn calls no model.
            model=configs[0].id if configs and request.retrieval is None else None,
            created=int(time.time()),
            previous_query_id=previous,
            input=[{"role": "user", "content": request.ask}],
            max_steps=1
            if request.retrieval is not None
            else request.max_steps or default_max_steps(workflow),
            max_tool_output_chars=request.tool_output_chars,
            comparison=None if request.comparison_group is None else [],  # filled in when read
        )
        briefs, ignored = list(plan.briefs), list(plan.ignored)
        record: TurnRecord = {
            "request": request.model_dump(mode="json"),
            "contexts": [[brief.slug, brief.version] for brief in briefs],
            "models": [config.id for config in configs],
            "workflow": workflow,
            "ignored": ignored,
        }
        try:
            self.db.admit_turn(
                query_document(query),
                session=session,
                new_session=new_session,
                workflow=workflow,
                comparison_group=request.comparison_group,
                places=places,
                request=record,
                holder=holder,
            )
        except SessionBusy:
            raise TurnError("session_busy", "a turn of this session is still running") from None
        if new_session:
            session = {**session, "active_query_id": query.id}
        prepared = PreparedTurn(request, query, session, briefs, configs, workflow, ignored)
        with self._turns_lock:
            self._turns[query.id] = prepared
        return prepared

    def restore(self, query_id: str) -> PreparedTurn | None:
        """The admitted turn `query_id` as `admit` left it, rebuilt from the database by whichever
        process runs it (a worker); None when it is not waiting to run (ended, or stored without a
        request record). A context version the turn pinned is read as pinned, not as live now."""
        record = self.db.turn_request(query_id)
        document = self.db.get_query(query_id)
        if record is None or document is None or document.get("status") != "in_progress":
            return None
        session = self.db.get_session(str(document["session_id"]))
        if session is None:
            return None
        request = TurnRequest.model_validate(record["request"])
        briefs = [self._brief(slug, version) for slug, version in record["contexts"]]
        configs = [self.catalog.resolve(model_id, allow_specs=True) for model_id in record["models"]]
        query = Query.model_validate(document)
        prepared = PreparedTurn(
            request, query, session, briefs, configs, str(record["workflow"]), list(record["ignored"])
        )
        with self._turns_lock:
            self._turns[query_id] = prepared
        return prepared

    def _brief(self, slug: str, version: str | None = None) -> ContextBrief:
        try:
            context = self.home.find(slug)
        except (ContextNotFound, ValueError):
            raise TurnError("context_not_found", f"no context {slug!r}") from None
        live = version or context.live_version()
        if live is None:
            raise TurnError("context_not_curated", f"context {slug!r} has no compiled version yet")
        info = context.info()
        return ContextBrief(info.slug, info.name, info.description, context.version_dir(live), live)

    # ------------------------------------------------------------------------------ the turn
    def ask(self, request: TurnRequest, on_event: Emit | None = None, caller: Caller = LOCAL) -> Query:
        return self.run(self.prepare(request, caller=caller), on_event)

    def run(self, turn: PreparedTurn, on_event: Emit | None = None) -> Query:
        """Run a prepared turn to a terminal state. Never raises for a failure inside the turn."""
        runner = TurnRun(self, turn, on_event)
        with self._turns_lock:
            self._turns[turn.query.id] = turn
            self._runs[turn.query.id] = runner
        try:
            runner.start_watchdog()
            runner.execute()
        except Exception as exc:  # a crash inside a turn fails the query, never the process
            error = f"internal error: {type(exc).__name__}: {str(exc)[:500]}"
            try:
                runner.fail(error, traceback.format_exc())
            except Exception:  # even failing failed (the store): the query must still end
                log.exception("turn %s could not be failed normally", turn.query.id)
                self.db.fail_query(turn.query.id, error)
                runner.query.status, runner.query.error = "failed", error
        finally:
            runner.close()
            self.db.release_session(turn.session["id"], turn.query.id)
            with self._turns_lock:
                self._turns.pop(turn.query.id, None)
                self._runs.pop(turn.query.id, None)
        return runner.query

    # ------------------------------------------------------------------------------ control
    def cancel(self, query_id: str, reason: str | None = None) -> bool:
        """Ask a turn admitted here to stop (spec/api.md §9.4): a queued turn ends as soon as it starts, a
        running one between steps, its sandbox killed. It ends `cancelled` with `reason` as its error
        (None: `cancelled by client`), unless it was already stopping. False when this runtime does not
        hold the turn (unknown, finished, or run by another process)."""
        with self._turns_lock:
            turn = self._turns.get(query_id)
            runner = self._runs.get(query_id)
        if turn is None:
            return False
        if reason is not None and not turn.cancel_event.is_set():
            turn.cancel_reason = reason
        if runner is not None:
            runner.interrupt("cancelled")
        else:
            turn.cancel_event.set()
        return True

    def forget(self, query_id: str) -> None:
        """Drop an admitted turn this process will not run (a worker runs it, or it ended waiting)."""
        with self._turns_lock:
            self._turns.pop(query_id, None)

    def is_active(self, query_id: str) -> bool:
        """Admitted here and not yet finished: its events may still grow."""
        with self._turns_lock:
            return query_id in self._turns


def new_query_id() -> str:
    return new_id("qry")
