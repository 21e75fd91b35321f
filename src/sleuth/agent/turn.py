"""One query turn, stage by stage (runtime.md §1): admit, sandbox, orient, loop, synthesize,
verify, finalize.

`Runtime` is the engine the CLI and the HTTP API share. It resolves the session and the models,
pins each scoped context's live version, runs the loop in a fresh sandbox, writes the answer from
the evidence, verifies every citation against the page text, and records the Query, its events,
its trace and its replay log in `$SLEUTH_HOME`. A crash inside a turn marks the query `failed`; it
never escapes as an exception from `run`.
"""

from __future__ import annotations

import contextlib
import hashlib
import threading
import time
import traceback
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from importlib.metadata import PackageNotFoundError, version
from typing import Any

from sleuth.agent.actions import SDK_NAMES
from sleuth.agent.citations import build_citations, renumber_grounding
from sleuth.agent.evidence import computed_results, select_evidence
from sleuth.agent.extractive import extractive_answer
from sleuth.agent.loop import AgentLoop, LoopResult, LoopSettings, ModelCallRecord, TurnFailed
from sleuth.agent.orientation import (
    PROMPT_VERSION,
    ContextBrief,
    ContextOverview,
    ask_message,
    instructions_text,
    overview,
    system_message,
)
from sleuth.agent.planner import OfflinePlanner, planner_scope
from sleuth.agent.records import Query, QueryStep, Rollup, StopReason, Synthesis, Usage
from sleuth.agent.shape import OfflineShapeError, check_grounding, check_shape, offline_fill
from sleuth.agent.spans import EvidenceSpan
from sleuth.agent.synthesis import ShapeInvalid, SynthesisInput, history_messages, synthesize
from sleuth.models.base import Message, Model, ModelConfig, ModelError
from sleuth.models.catalog import Catalog, CatalogError, build_model
from sleuth.models.fallback import FallbackModel
from sleuth.sandbox.host import HostFunction, Sandbox, SandboxHost, SandboxUnavailable
from sleuth.sandbox.limits import Limits
from sleuth.sdk.errors import SleuthError
from sleuth.sdk.knowledge import Knowledge, ScopedContext
from sleuth.store.home import ContextNotFound, Home
from sleuth.store.replay_log import write_replay_log
from sleuth.store.search import VersionReader
from sleuth.store.server_db import ServerDB

WORKFLOWS = {"search", "search_cc", "search_rag"}
WORKFLOW_ALIASES = {
    "query_search": "search",
    "query_sac": "search",
    "query_cc": "search_cc",
    "query_rag": "search_rag",
}
PINNED_FIELDS = ("scope", "system_prompt", "guardrails", "model", "models", "tools")

Emit = Callable[[dict[str, Any]], None]


class TurnError(Exception):
    """A request rejected before the turn starts: `code` and `status` follow api.md §4."""

    def __init__(self, code: str, message: str, status: int = 400) -> None:
        super().__init__(message)
        self.code = code
        self.status = status


@dataclass
class TurnRequest:
    ask: str
    scope: list[str] | None = None
    session_id: str | None = None
    model: str | None = None
    models: list[str] | None = None
    shape: dict[str, Any] | None = None
    max_steps: int | None = None
    timeout_seconds: int = 900
    max_tool_output_chars: int = 10_000
    system_prompt: str | None = None
    guardrails: str | None = None
    tools: list[str] | None = None
    workflow: str | None = None
    thinking_level: str | None = None
    allow_model_specs: bool = True  # the CLI may name `openai:…` specs; HTTP requests may not


@dataclass
class PreparedTurn:
    """A turn that passed admission: its Query is stored `in_progress` and its session claimed."""

    request: TurnRequest
    query: Query
    session: dict[str, Any]
    briefs: list[ContextBrief]
    model_configs: list[ModelConfig]
    workflow: str
    ignored_fields: list[str] = field(default_factory=list)
    model_override: Model | None = None  # replay: a scripted model for the loop and synthesis
    request_replay: dict[str, Any] | None = None  # replay: recorded planner results
    registry_override: dict[str, HostFunction] | None = None  # replay: recorded host results

    @property
    def offline(self) -> bool:
        return bool(self.model_configs) and self.model_configs[0].provider == "offline"


def sleuth_version() -> str:
    try:
        return version("sleuth")
    except PackageNotFoundError:
        return "0+unknown"


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
        recover: bool = False,
    ) -> None:
        """`recover` fails turns left `in_progress` by a crashed process: only the process that owns
        the home's turns (the server) may do that, never a CLI run beside it."""
        self.home = home
        self.catalog = catalog or Catalog.load(home.root)
        self.db = db or ServerDB.for_home(home)
        self.limits = limits or Limits()
        self._host = sandbox_host
        self._own_host = sandbox_host is None
        self.model_factory = model_factory
        self._lock = threading.Lock()
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
    def prepare(self, request: TurnRequest) -> PreparedTurn:
        """Validate, resolve the session, scope and models, store the Query `in_progress`."""
        ask = request.ask
        if not isinstance(ask, str) or not ask.strip() or len(ask) > 20_000:
            raise TurnError("invalid_request", "ask must be a non-blank string of 1-20,000 characters")
        workflow = WORKFLOW_ALIASES.get(request.workflow or "", request.workflow)
        if workflow is not None and workflow not in WORKFLOWS:
            raise TurnError(
                "invalid_request",
                f"unknown workflow {request.workflow!r}; use search, search_cc or search_rag",
            )
        if request.max_steps is not None and not 1 <= request.max_steps <= 50:
            raise TurnError("invalid_request", "max_steps must be from 1 to 50")
        if not 1 <= request.timeout_seconds <= 900:
            raise TurnError("invalid_request", "timeout_seconds must be from 1 to 900")
        if not 1 <= request.max_tool_output_chars <= 100_000:
            raise TurnError(
                "invalid_request",
                "max_tool_output_chars must be an integer from 1 to 100000; "
                f"got {request.max_tool_output_chars}",
            )
        for tool in request.tools or []:
            if tool not in SDK_NAMES:
                raise TurnError("unknown_tool", f"unknown tool {tool!r}; known: {', '.join(SDK_NAMES)}")
        session: dict[str, Any] | None = None
        ignored: list[str] = []
        if request.session_id:
            session = self.db.get_session(request.session_id)
            if session is None:
                raise TurnError("session_not_found", f"no session {request.session_id!r}", 404)
            ignored = [name for name in PINNED_FIELDS if getattr(request, name) not in (None, [])]
        elif not request.scope:
            raise TurnError("scope_required", "a turn that starts a session needs a scope (--context)")
        scope = list(session["scope"]) if session else list(dict.fromkeys(request.scope or []))
        if not 1 <= len(scope) <= 10:
            raise TurnError("invalid_request", "scope takes 1 to 10 contexts")
        briefs = [self._brief(slug) for slug in scope]
        if session is not None:
            model_ids = list(session["models"])
        else:
            wanted: list[str | None] = list(request.models or []) or [request.model]
            try:
                model_ids = [
                    self.catalog.resolve(name, allow_specs=request.allow_model_specs).id for name in wanted
                ]
            except CatalogError as exc:
                raise TurnError("model_unavailable", str(exc)) from None
        configs = []
        for model_id in model_ids:
            try:
                configs.append(self.catalog.resolve(model_id, allow_specs=request.allow_model_specs))
            except CatalogError as exc:
                raise TurnError("model_unavailable", str(exc)) from None
        if request.shape is not None:
            try:
                check_shape(request.shape)
            except ValueError as exc:
                raise TurnError("invalid_shape", str(exc)) from None
        if session is None:
            session = self.db.create_session(
                scope=scope,
                title=ask.strip()[:80],
                system_prompt=request.system_prompt,
                guardrails=request.guardrails,
                models=model_ids,
                tools=request.tools,
                workflow=workflow or "search",
            )
        workflow = workflow or session.get("workflow") or "search"
        previous = session.get("last_query_id")
        query = Query(
            id=_new_query_id(),
            session_id=session["id"],
            created=int(time.time()),
            previous_query_id=previous,
            input=[{"role": "user", "content": ask}],
            max_steps=request.max_steps or (2 if workflow == "search_rag" else 8),
            max_tool_output_chars=request.max_tool_output_chars,
        )
        if not self.db.claim_session(session["id"], query.id):
            raise TurnError("session_busy", "a turn of this session is still running", 409)
        self.db.insert_query(query.model_dump(mode="json"))
        return PreparedTurn(request, query, session, briefs, configs, workflow, ignored)

    def _brief(self, slug: str) -> ContextBrief:
        try:
            context = self.home.find(slug)
        except (ContextNotFound, ValueError):
            raise TurnError("context_not_found", f"no context {slug!r}", 404) from None
        live = context.live_version()
        if live is None:
            raise TurnError("context_not_curated", f"context {slug!r} has no compiled version yet", 409)
        info = context.info()
        return ContextBrief(info.slug, info.name, info.description, context.version_dir(live), live)

    # ------------------------------------------------------------------------------ the turn
    def ask(self, request: TurnRequest, on_event: Emit | None = None) -> Query:
        return self.run(self.prepare(request), on_event)

    def run(self, turn: PreparedTurn, on_event: Emit | None = None) -> Query:
        """Run a prepared turn to a terminal state. Never raises for a failure inside the turn."""
        runner = _TurnRun(self, turn, on_event)
        try:
            runner.execute()
        except Exception as exc:  # a crash inside a turn fails the query, never the process
            runner.fail(f"internal error: {type(exc).__name__}: {exc}", traceback.format_exc())
        finally:
            runner.close()
            self.db.release_session(turn.session["id"], turn.query.id)
        return runner.query


class _TurnRun:
    """The state of one running turn; `Runtime.run` drives it."""

    def __init__(self, runtime: Runtime, turn: PreparedTurn, on_event: Emit | None) -> None:
        self.rt = runtime
        self.turn = turn
        self.query = turn.query
        self.on_event = on_event
        self.began = time.monotonic()
        self.deadline = self.began + turn.request.timeout_seconds
        self.sandbox: Sandbox | None = None
        self.sandbox_info: dict[str, Any] = {}
        self.host_log: list[dict[str, Any]] = []
        self.model_calls: list[ModelCallRecord] = []
        self.loop_result: LoopResult | None = None
        self.trace: dict[str, Any] = {}
        self.terminal = False
        self.replay_records: list[dict[str, Any]] = []
        self.planner: OfflinePlanner | None = None  # when the offline planner plays the model
        self._readers: dict[str, VersionReader] | None = None

    # ---------------------------------------------------------------------------- events
    def emit(self, event: dict[str, Any]) -> None:
        event = {"query_id": self.query.id, **event}
        self.rt.db.append_event(self.query.id, event)
        if self.on_event is not None:
            with contextlib.suppress(Exception):  # a listener that breaks must not break the turn
                self.on_event(event)

    def _step_event(self, step: QueryStep) -> None:
        steps = [s for s in self.query.steps if s.step_id != step.step_id]
        self.query.steps = [*steps, step]
        self.query.runtime_ms = self._elapsed_ms()
        self.rt.db.update_query(self.query.model_dump(mode="json"))
        self.emit({"type": "response.step", **step.model_dump(mode="json")})

    def _elapsed_ms(self) -> int:
        return round((time.monotonic() - self.began) * 1000)

    # ---------------------------------------------------------------------------- stages
    def execute(self) -> None:
        turn, request = self.turn, self.turn.request
        self.emit({"type": "response.created", "session_id": self.query.session_id})
        contexts = {b.slug: b.version_dir for b in turn.briefs}
        overviews = [overview(b) for b in turn.briefs]
        history = history_messages(
            self.rt.db.previous_completed_queries(self.query.session_id, self.query.id)
        )
        session = turn.session
        instructions = instructions_text(overviews, session.get("system_prompt"), session.get("guardrails"))
        model = self._model(turn, overviews, history)
        protocol = model.config.tool_protocol
        messages = [
            Message(
                "system",
                system_message(
                    overviews,
                    profile=model.config.prompt_profile,
                    protocol=protocol,
                    max_output=self.query.max_tool_output_chars or 10_000,
                    tools=session.get("tools"),
                    system_prompt=session.get("system_prompt"),
                    guardrails=session.get("guardrails"),
                ),
            ),
            *history,
            Message("user", ask_message(request.ask, self.query.max_steps or 8)),
        ]
        self.trace["orientation"] = {
            "chars": len(messages[0].content),
            "sha256": hashlib.sha256(messages[0].content.encode()).hexdigest(),
        }
        self.replay_records.append(
            {
                "kind": "turn",
                "request": _request_json(request),
                "contexts": {b.slug: b.version for b in turn.briefs},
                "models": [c.id for c in turn.model_configs],
                "model": {
                    "id": model.config.id,
                    "tool_protocol": protocol,
                    "context_window": model.config.context_window,
                    "prompt_profile": model.config.prompt_profile,
                },
                "workflow": turn.workflow,
                "max_steps": self.query.max_steps,
                "max_tool_output_chars": self.query.max_tool_output_chars,
                "tools": session.get("tools"),
            }
        )
        try:
            self.sandbox = self._start_sandbox(contexts)
        except SandboxUnavailable as exc:
            self.fail(f"sandbox_unavailable: {exc}")
            return
        reserve = min(60.0, 0.2 * request.timeout_seconds)
        settings = LoopSettings(
            max_steps=self.query.max_steps or 8,
            step_timeout_s=self.rt.limits.step_timeout_s,
            max_tool_output_chars=self.query.max_tool_output_chars or 10_000,
            reasoning_effort=request.thinking_level,
        )
        loop = AgentLoop(
            model,
            self.sandbox,
            messages,
            settings,
            deadline=self.deadline - reserve,
            emit=self._step_event,
            restart_sandbox=lambda: self._restart_sandbox(contexts),
            tools=session.get("tools"),
        )
        try:
            result = loop.run()
        except TurnFailed as exc:
            self.loop_result = loop.result
            self.model_calls += loop.result.model_calls
            self.fail(str(exc))
            return
        finally:
            self.sandbox = loop.sandbox
        self.loop_result = result
        self.model_calls += result.model_calls
        self.query.model = (
            model.config.id if self.planner is not None else (result.answered_by or model.config.id)
        )
        self._synthesize(result, model, instructions, history, overviews)

    def _model(
        self, turn: PreparedTurn, overviews: Sequence[ContextOverview], history: list[Message]
    ) -> Model:
        """The loop's model: the fallback chain of the session's models, or the offline planner."""
        previous_ask = None
        for message in reversed(history):
            if message.role == "user":
                previous_ask = message.content
                break
        if turn.model_override is not None:
            return turn.model_override
        if turn.workflow == "search_rag" or turn.offline:
            scope = planner_scope({b.slug: b.version_dir for b in turn.briefs})
            self.planner = OfflinePlanner(
                turn.request.ask[:2000], scope, previous_ask, general_only=turn.workflow == "search_rag"
            )
            return self.planner
        return self._provider_model()

    def _provider_model(self) -> Model:
        if self.turn.model_override is not None:
            return self.turn.model_override
        models = [self.rt.model_factory(c) for c in self.turn.model_configs if c.provider != "offline"]
        return models[0] if len(models) == 1 else FallbackModel(models)

    def _recording_registry(self) -> dict[str, HostFunction]:
        registry = self.turn.registry_override or self.rt.sandbox_host.registry

        def wrap(name: str, fn: HostFunction) -> HostFunction:
            def recorded(args: dict[str, Any]) -> Any:
                try:
                    result = fn(args)
                except Exception as exc:
                    self.host_log.append(
                        {"kind": "host", "fn": name, "args": args, "ok": False, "error": str(exc)}
                    )
                    raise
                self.host_log.append({"kind": "host", "fn": name, "args": args, "ok": True, "result": result})
                return result

            return recorded

        return {name: wrap(name, fn) for name, fn in registry.items()}

    def _start_sandbox(self, contexts: dict[str, Any]) -> Sandbox:
        host = self.rt.sandbox_host
        sandbox = host.start_turn(contexts, registry=self._recording_registry())
        self.sandbox_info = {
            "backend": "local",
            "mode": sandbox.ready.get("mode"),
            "layers": sandbox.ready.get("layers"),
            "disabled_layers": sandbox.ready.get("disabled"),
            "limits": self.rt.limits.to_json(),
        }
        return sandbox

    def _restart_sandbox(self, contexts: dict[str, Any]) -> Sandbox:
        if self.sandbox is not None:
            self.sandbox.close()
        try:
            self.sandbox = self._start_sandbox(contexts)
        except SandboxUnavailable as exc:
            raise TurnFailed(f"the sandbox died and could not be restarted: {exc}") from exc
        return self.sandbox

    # ---------------------------------------------------------------------------- synthesis
    def _synthesize(
        self,
        result: LoopResult,
        model: Model,
        instructions: str,
        history: list[Message],
        overviews: Sequence[ContextOverview],
    ) -> None:
        request = self.turn.request
        spans = list(result.spans.values())
        self._attach_artifact_sources(spans)
        evidence = select_evidence(spans, result.final_labels, request.ask)
        computed = computed_results(result.observations)
        slugs = [b.slug for b in self.turn.briefs]
        synthesis = Synthesis()
        data: dict[str, Any] | None = None
        grounding: dict[str, list[int]] | None = None
        began = time.monotonic()
        text = ""
        if self.turn.offline:
            text = extractive_answer(request.ask, evidence, result.draft, slugs)
            synthesis.method = "extractive"
            if request.shape is not None:
                count, items = self._planner_results()
                try:
                    data = offline_fill(request.shape, text, count, items)
                except OfflineShapeError as exc:
                    self.fail(str(exc), answer=text, evidence=evidence)
                    return
        else:
            inp = SynthesisInput(
                request.ask, instructions, history, result.draft, computed, evidence, request.shape
            )
            try:
                out = synthesize(self._provider_model(), inp)
            except ShapeInvalid as exc:
                self.fail(str(exc), answer=exc.text, evidence=evidence)
                return
            except ModelError as exc:
                text = extractive_answer(request.ask, evidence, None, slugs)
                synthesis.status, synthesis.method = "degraded", "extractive"
                self.trace["synthesis_error"] = str(exc)
                self.model_calls += getattr(exc, "calls", [])
            else:
                text, data, grounding = out.text, out.data, out.grounding
                self.model_calls += out.calls
                synthesis.tokens_in = out.usage.input_tokens
                synthesis.tokens_out = out.usage.output_tokens
                synthesis.tokens_in_cached = out.usage.cached_tokens
                synthesis.tokens_in_cache_write = out.usage.cache_write_tokens
                synthesis.tokens_in_fresh = out.usage.fresh_tokens
                self.query.model = out.model or self.query.model
        synthesis.ms = round((time.monotonic() - began) * 1000)
        extra = sorted(
            {n for numbers in (grounding or {}).values() for n in numbers if 1 <= n <= len(evidence)}
        )
        cited = build_citations(text, evidence, self._page_text, extra_cited=extra)
        output_grounding: dict[str, list[int]] | None = None
        ungrounded: list[str] = []
        if data is not None:
            numbered = renumber_grounding(grounding or {}, cited.evidence_to_citation)
            texts = {i + 1: c["grounding"] for i, c in enumerate(cited.citations)}
            span_texts = {
                cited.evidence_to_citation[pos]: evidence[pos - 1].text for pos in cited.evidence_to_citation
            }
            texts.update(span_texts)
            output_grounding, ungrounded = check_grounding(data, numbered, texts, computed)
        synthesis.answer_preview = cited.text[:200]
        self.trace["citations_dropped"] = cited.dropped
        self.trace["ungrounded_fields"] = ungrounded
        self._complete(cited.text, cited.citations, data, output_grounding, synthesis, evidence, result)

    def _planner_results(self) -> tuple[int | None, list[str] | None]:
        """The planner's computed count and list items (recorded, so a replay fills shapes alike)."""
        if self.planner is not None:
            count, items = self.planner.count, self.planner.items
            self.replay_records.append({"kind": "planner", "count": count, "items": items})
            return count, items
        recorded = (self.turn.request_replay or {}).get("planner") or {}
        return recorded.get("count"), recorded.get("items")

    def _attach_artifact_sources(self, spans: list[EvidenceSpan]) -> None:
        names = {(s.context, s.artifact_name) for s in spans if s.artifact_name}
        if not names:
            return
        dirs = {b.slug: b.version_dir for b in self.turn.briefs}
        knowledge = Knowledge([ScopedContext(slug, d) for slug, d in dirs.items()])
        try:
            sources: dict[tuple[str, str], list[str]] = {}
            for context, name in names:
                try:
                    sources[(context, str(name))] = list(
                        knowledge.read_artifact(str(name), context=context).sources
                    )
                except SleuthError:
                    sources[(context, str(name))] = []
            for span in spans:
                if span.artifact_name:
                    span.artifact_sources = sources.get((span.context, span.artifact_name), [])
        finally:
            knowledge.close()

    def _page_text(self, context: str, source: str, page: int) -> str | None:
        if self._readers is None:
            self._readers = {b.slug: VersionReader(b.version_dir) for b in self.turn.briefs}
        reader = self._readers.get(context)
        return reader.page_text(source, page) if reader is not None else None

    # ---------------------------------------------------------------------------- endings
    def _usage(self, synthesis: Synthesis | None) -> Usage:
        loop_usage = self.loop_result.usage if self.loop_result else None
        tokens_in = (loop_usage.input_tokens if loop_usage else 0) + (synthesis.tokens_in if synthesis else 0)
        tokens_out = (loop_usage.output_tokens if loop_usage else 0) + (
            synthesis.tokens_out if synthesis else 0
        )
        cost = None
        configs = self.turn.model_configs
        if (
            configs
            and configs[0].price_input_per_token is not None
            and configs[0].price_output_per_token is not None
        ):
            cost = (
                tokens_in * configs[0].price_input_per_token + tokens_out * configs[0].price_output_per_token
            )
        return Usage(
            input_tokens=tokens_in,
            output_tokens=tokens_out,
            total_tokens=tokens_in + tokens_out,
            cost_usd=cost,
        )

    def _rollup(self, stop_reason: StopReason, citations_dropped: int = 0) -> Rollup:
        steps = [s for s in self.query.steps if s.status != "running"]
        by_category: dict[str, int] = {}
        for step in steps:
            for call in step.tool_calls:
                by_category[call.category] = by_category.get(call.category, 0) + 1
        result = self.loop_result
        return Rollup(
            n_steps=len(steps),
            n_tool_calls=sum(len(s.tool_calls) for s in steps),
            by_category=by_category,
            total_hits=result.total_hits if result else 0,
            duration_ms=self._elapsed_ms(),
            cache_read_tokens=sum(s.cost.tokens_in_cached for s in steps),
            cache_write_tokens=sum(s.cost.tokens_in_cache_write for s in steps),
            stop_reason=stop_reason,
            evidence_seen=sum(1 for s in (result.spans.values() if result else []) if s.seen),
            citations_dropped=citations_dropped,
        )

    def _complete(
        self,
        text: str,
        citations: list[dict[str, Any]],
        data: dict[str, Any] | None,
        grounding: dict[str, list[int]] | None,
        synthesis: Synthesis,
        evidence: list[EvidenceSpan],
        result: LoopResult,
    ) -> None:
        q = self.query
        q.output = [{"role": "assistant", "content": [{"type": "output_text", "text": text}]}] if text else []
        q.citations = citations
        q.output_json = data
        q.output_grounding = grounding
        q.synthesis = synthesis
        q.rollup = self._rollup(result.stop_reason, len(self.trace.get("citations_dropped", [])))
        q.usage = self._usage(synthesis)
        if text:
            self.emit({"type": "response.output_text.delta", "delta": text})
        self.emit({"type": "response.turn_rollup", **q.rollup.model_dump(mode="json")})
        self.emit({"type": "response.synthesis", **synthesis.model_dump(mode="json")})
        self._finish("completed", None)

    def fail(
        self,
        error: str,
        detail: str | None = None,
        *,
        answer: str | None = None,
        evidence: list[EvidenceSpan] | None = None,
    ) -> None:
        if self.terminal:
            return
        q = self.query
        q.error = error
        if answer:
            q.output = [{"role": "assistant", "content": [{"type": "output_text", "text": answer}]}]
        q.rollup = self._rollup("failed")
        q.usage = self._usage(None)
        if detail:
            self.trace["internal_error"] = detail[-4000:]
        self.emit({"type": "response.turn_rollup", **q.rollup.model_dump(mode="json")})
        self._finish("failed", error)

    def _finish(self, status: str, error: str | None) -> None:
        q = self.query
        q.status = status  # type: ignore[assignment]
        q.error = error
        q.runtime_ms = self._elapsed_ms()
        q.trace_ref = f"trace/{q.id}"
        self._persist_trace()
        self.emit({"type": "response.trace", "trace_ref": q.trace_ref})
        self.rt.db.update_query(q.model_dump(mode="json"))
        terminal: dict[str, Any] = {"type": f"response.{status}"}
        if error:
            terminal["error"] = error
        self.emit(terminal)
        self.terminal = True

    def _persist_trace(self) -> None:
        q = self.query
        result = self.loop_result
        full_outputs = result.full_outputs if result else []
        steps = []
        for i, step in enumerate(s for s in q.steps if s.status != "running"):
            entry = step.model_dump(mode="json")
            entry["calls"] = entry.pop("tool_calls")
            entry["full_output"] = full_outputs[i][: 1 << 20] if i < len(full_outputs) else step.output
            steps.append(entry)
        models: dict[str, dict[str, Any]] = {}
        for call in self.model_calls:
            reply = call.reply or {}
            mid = str(reply.get("model") or "unknown")
            usage = reply.get("usage") or {}
            entry_m = models.setdefault(
                mid, {"id": mid, "calls": 0, "input_tokens": 0, "output_tokens": 0, "ms": 0.0}
            )
            entry_m["calls"] += 1
            entry_m["input_tokens"] += int(usage.get("input_tokens", 0))
            entry_m["output_tokens"] += int(usage.get("output_tokens", 0))
            entry_m["ms"] = round(entry_m["ms"] + call.ms, 1)
        embeds = [h for h in self.host_log if h["fn"] == "embed"]
        self.trace.update(
            {
                "query_id": q.id,
                "steps": steps,
                "rollup": q.rollup.model_dump(mode="json") if q.rollup else None,
                "sandbox": self.sandbox_info,
                "models": list(models.values()),
                "usage_seams": [
                    {
                        "kind": "embed",
                        "model": str((embeds[0]["args"] or {}).get("model", "default")),
                        "tokens": sum(
                            sum(len(t) for t in (h["args"].get("texts") or [])) // 4 for h in embeds
                        ),
                        "requests": len(embeds),
                    }
                ]
                if embeds
                else [],
                "evidence": [
                    {
                        "ref": s.ref,
                        "context": s.context,
                        "source": s.source_path,
                        "page": s.page,
                        "start": s.start,
                        "end": s.end,
                        "kind": s.via,
                        "seen": s.seen,
                        "cited": s.cited,
                    }
                    for s in (result.spans.values() if result else [])
                ],
                "citations_dropped": self.trace.get("citations_dropped", []),
                "ungrounded_fields": self.trace.get("ungrounded_fields", []),
                "synthesis": q.synthesis.model_dump(mode="json") if q.synthesis else None,
                "ignored_fields": self.turn.ignored_fields,
                "versions": {
                    "sleuth": sleuth_version(),
                    "prompt": PROMPT_VERSION,
                    "contexts": {b.slug: b.version for b in self.turn.briefs},
                    "manifests": {b.slug: _manifest_hash(b) for b in self.turn.briefs},
                },
                "replay": {"available": True},
            }
        )
        records = [*self.replay_records]
        records += [
            {"kind": "model", "phase": c.phase, "messages": c.messages, "reply": c.reply, "error": c.error}
            for c in self.model_calls
        ]
        records += self.host_log
        try:
            write_replay_log(self.rt.db.replay_root, q.id, records)
        except OSError as exc:
            self.trace["replay"] = {"available": False, "error": str(exc)}
        self.rt.db.save_trace(q.id, self.trace)

    def close(self) -> None:
        if self.sandbox is not None:
            self.sandbox.close()
            self.sandbox = None


def _manifest_hash(brief: ContextBrief) -> str:
    path = brief.version_dir / "version.json"
    try:
        return hashlib.sha256(path.read_bytes()).hexdigest()
    except OSError:
        return ""


def _request_json(request: TurnRequest) -> dict[str, Any]:
    return {
        "ask": request.ask,
        "scope": request.scope,
        "shape": request.shape,
        "max_steps": request.max_steps,
        "timeout_seconds": request.timeout_seconds,
        "max_tool_output_chars": request.max_tool_output_chars,
        "system_prompt": request.system_prompt,
        "guardrails": request.guardrails,
        "tools": request.tools,
        "workflow": request.workflow,
        "thinking_level": request.thinking_level,
    }


def _new_query_id() -> str:
    from sleuth.store.server_db import new_id

    return new_id("qry")
