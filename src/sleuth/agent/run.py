"""One running turn: its events, its stages from orientation to synthesis, and how it ends."""

from __future__ import annotations

import contextlib
import hashlib
import socket
import threading
import time
import traceback
from collections.abc import Callable, Sequence
from typing import Any, Literal

from sleuth.agent.citations import build_citations, renumber_grounding
from sleuth.agent.evidence import computed_results, evidence_budget, select_evidence
from sleuth.agent.extractive import extractive_answer
from sleuth.agent.grounding import check_grounding
from sleuth.agent.loop import AgentLoop, LoopResult, LoopSettings, ModelCallRecord, TurnFailed
from sleuth.agent.orientation import ContextOverview, ask_message, instructions_text, overview, system_message
from sleuth.agent.pinned import PinnedVersions
from sleuth.agent.planner import OfflinePlanner
from sleuth.agent.planner_scope import pinned_planner_scope
from sleuth.agent.prepared import Engine, PreparedTurn
from sleuth.agent.records import Citation, QueryStep, Rollup, StopReason, Synthesis, Usage, turn_usage
from sleuth.agent.retrieval import Retrieval, RetrievalOptions
from sleuth.agent.shape_fill import OfflineShapeError, offline_fill
from sleuth.agent.spans import EvidenceSpan, SpanResolver
from sleuth.agent.synthesis import (
    ShapeInvalid,
    SynthesisInput,
    cited_documents,
    history_messages,
    synthesis_reserve,
    synthesize,
)
from sleuth.agent.trace import args_digest, build_trace, fit_records, persist, replay_records, turn_record
from sleuth.models.base import Message, Model, ModelError
from sleuth.models.fallback import FallbackModel
from sleuth.sandbox.host import HostFunction, Sandbox, SandboxUnavailable
from sleuth.sandbox.limits import BudgetExceeded, BudgetMeter
from sleuth.settings import TOOL_OUTPUT_CHARS
from sleuth.store.database import dumps
from sleuth.store.text import clean

Emit = Callable[[dict[str, Any]], None]  # a turn's event listener; each event is stored first


CANCELLED_ERROR = "cancelled by client"  # spec/api.md §9.4
StopCause = Literal["cancelled", "timeout"]


def timeout_error(seconds: int) -> str:
    """The error of a turn that passed its wall-clock cap (spec/api.md §9.1)."""
    return f"turn timed out after {seconds} s"


class TurnRun:
    """The state of one running turn; `Runtime.run` drives it."""

    def __init__(self, runtime: Engine, turn: PreparedTurn, on_event: Emit | None) -> None:
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
        self.cited_refs: set[str] = set()  # labels of the spans the answer cites
        self.terminal = False
        self.replay_records: list[dict[str, Any]] = []
        self.planner: OfflinePlanner | None = None  # when the offline planner plays the model
        self._provider: Model | None = None
        self.pinned = PinnedVersions(turn.briefs)  # what spans and citations resolve against
        self._stop_cause: StopCause | None = None
        self._stop_lock = threading.Lock()
        self._watchdog: threading.Timer | None = None
        self.meter = BudgetMeter(runtime.budget)  # the host's work for this turn (limits.HostBudget)
        self._ending = False  # set once the turn is ending: recording then goes on past the budget

    # ---------------------------------------------------------------------------- stopping
    def start_watchdog(self) -> None:
        """Enforce the hard cap: at `timeout_seconds` the turn is interrupted like a cancel."""
        remaining = max(0.0, self.deadline - time.monotonic())
        self._watchdog = threading.Timer(remaining, self.interrupt, args=("timeout",))
        self._watchdog.daemon = True
        self._watchdog.start()

    def interrupt(self, cause: StopCause) -> None:
        """Stop the turn from another thread (cancel, time cap): raise the flag the loop checks between
        steps, then cut the sandbox's channel so a running step ends now. The turn's own thread, which
        is blocked on that channel, kills the sandbox process and ends the turn: `Sandbox` is not
        thread-safe, so nothing here closes it."""
        with self._stop_lock:
            if self._stop_cause is None:
                self._stop_cause = cause
        self.turn.cancel_event.set()
        sandbox = self.sandbox
        channel = getattr(sandbox, "_sock", None)
        if isinstance(channel, socket.socket):
            with contextlib.suppress(OSError):
                channel.shutdown(socket.SHUT_RDWR)

    def stopping(self) -> bool:
        """Cancelled, or past the hard cap (checked by the clock too: the watchdog is best-effort)."""
        return self.turn.cancel_event.is_set() or time.monotonic() >= self.deadline

    def _stop_now(self) -> None:
        """End an interrupted turn: `cancelled`, or `failed` with the time-out error. Finished steps,
        the trace and the events stay; a step still marked running is closed as failed."""
        with self._stop_lock:
            cause = self._stop_cause or ("cancelled" if self.turn.cancel_event.is_set() else "timeout")
            self._stop_cause = cause
        for step in [s for s in self.query.steps if s.status == "running"]:
            message = "the step was interrupted: the turn is stopping"
            self._step_event(
                step.model_copy(
                    update={"status": "failed", "error": {"type": "Interrupted", "message": message}}
                )
            )
        if cause == "timeout":
            self.fail(timeout_error(self.turn.request.timeout_seconds), stop_reason="timeout")
        else:
            self.cancel()

    # ---------------------------------------------------------------------------- events
    def emit(self, event: dict[str, Any], *, with_query: bool = False) -> None:
        """Store the event (with `with_query`, together with the Query as it is now, in one
        transaction), then tell the listener."""
        event = clean({"query_id": self.query.id, **event})  # model text may hold lone surrogates
        if with_query:
            self.rt.db.update_query(self.query.model_dump(mode="json"), event=event)
        else:
            self.rt.db.append_event(self.query.id, event)
        if self.on_event is not None:
            with contextlib.suppress(Exception):  # a listener that breaks must not break the turn
                self.on_event(event)

    def _step_event(self, step: QueryStep) -> None:
        steps = [s for s in self.query.steps if s.step_id != step.step_id]
        self.query.steps = [*steps, step]
        self.query.runtime_ms = self._elapsed_ms()
        self.rt.db.update_query(self.query.model_dump(mode="json"))
        event = {"type": "response.step", **step.model_dump(mode="json")}
        self.emit(event)
        self._recorded(len(dumps(event)))

    def _recorded(self, size: int) -> None:
        """Charge `size` recorded bytes to the turn; past the budget the turn stops (not while it ends)."""
        try:
            self.meter.charge("recorded_bytes", size)
        except BudgetExceeded:
            if not self._ending:
                raise

    def _elapsed_ms(self) -> int:
        return round((time.monotonic() - self.began) * 1000)

    # ---------------------------------------------------------------------------- stages
    def execute(self) -> None:
        turn, request = self.turn, self.turn.request
        self.emit({"type": "response.created", "session_id": self.query.session_id})
        if self.stopping():  # cancelled while it waited in the queue
            self._stop_now()
            return
        if request.retrieval is not None:
            self._retrieve(request.retrieval)
            return
        contexts = {b.slug: b.version_dir for b in turn.briefs}
        overviews = [overview(b) for b in turn.briefs]
        earlier = self.rt.db.previous_completed_queries(self.query.session_id, self.query.id)
        history = history_messages(earlier)
        session = turn.session
        instructions = instructions_text(overviews, session.get("system_prompt"), session.get("guardrails"))
        model = self._model(turn, history, cited_documents(earlier[-1:] if earlier else []))
        protocol = model.config.tool_protocol
        messages = [
            Message(
                "system",
                system_message(
                    overviews,
                    profile=model.config.prompt_profile,
                    protocol=protocol,
                    max_output=self.query.max_tool_output_chars or TOOL_OUTPUT_CHARS,
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
        self.replay_records.append(turn_record(turn, model.config))
        try:
            self.sandbox = self._start_sandbox(contexts)
        except SandboxUnavailable as exc:
            self.fail(f"sandbox_unavailable: {exc}")
            return
        if self.stopping():
            self._stop_now()
            return
        reserve = synthesis_reserve(request.timeout_seconds)
        settings = LoopSettings(
            max_steps=self.query.max_steps or 8,
            step_timeout_s=self.rt.limits.step_timeout_s,
            max_tool_output_chars=self.query.max_tool_output_chars or TOOL_OUTPUT_CHARS,
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
            should_stop=self.stopping,
            resolve_span=SpanResolver(self.pinned.readers()).resolve,
            meter=self.meter,
        )
        try:
            result = loop.run()
        except BudgetExceeded as exc:  # raised while a step was recorded: the loop did not end the turn
            self.loop_result = loop.result
            self.model_calls += loop.result.model_calls
            self.fail(str(exc))
            return
        except TurnFailed as exc:
            self.loop_result = loop.result
            self.model_calls += loop.result.model_calls
            if self.stopping():
                self._stop_now()
            else:
                self.fail(str(exc))
            return
        finally:
            self.sandbox = loop.sandbox
        self.loop_result = result
        self.model_calls += result.model_calls
        if self.stopping():
            self._stop_now()
            return
        self.query.model = (
            model.config.id if self.planner is not None else (result.answered_by or model.config.id)
        )
        self._synthesize(result, model, instructions, history, overviews)

    def _retrieve(self, options: RetrievalOptions) -> None:
        """A retrieval-only turn (spec/api.md §8.7): one deterministic hybrid retrieval in this process,
        shown as one step, the hits in `output_json`. No model, no sandbox, no synthesis."""
        # Replay re-runs the retrieval against the recorded embeddings and compares the step and hits.
        self.replay_records.append(turn_record(self.turn, self.turn.model_configs[0]))
        retrieval = Retrieval(
            {b.slug: b.version_dir for b in self.turn.briefs},
            self.turn.request.ask,
            options,
            embed=self._recording_registry().get("embed"),
        )
        step = QueryStep(
            step_id="step_1",
            status="running",
            commentary=retrieval.commentary,
            code={"language": "python", "source": retrieval.code},
        )
        self._step_event(step)
        began = time.monotonic()
        try:
            found = retrieval.run()
        except Exception as exc:  # an SDK error, an unreadable index: the turn fails, never the process
            error = {"type": type(exc).__name__, "message": str(exc)[:2000]}
            self._step_event(retrieval.step(step, began, status="failed", error=error))
            self.fail(f"retrieval failed: {type(exc).__name__}: {exc}", traceback.format_exc())
            return
        output = (
            f"{len(found.hits)} hits kept ({found.chunks} chunks, {found.artifacts} artifacts) "
            f"of {found.total_hits} retrieved"
        )
        self._step_event(
            retrieval.step(step, began, status="completed", output=output, output_chars=len(output))
        )
        if self.stopping():
            self._stop_now()
            return
        q = self.query
        q.output, q.citations, q.output_json, q.synthesis = [], [], {"hits": found.hits}, None
        q.rollup = self._rollup("retrieval_only")
        q.usage = self._usage(None)
        self.emit({"type": "response.turn_rollup", **q.rollup.model_dump(mode="json")})
        self._finish("completed", None)

    def _model(
        self, turn: PreparedTurn, history: list[Message], previous_documents: tuple[tuple[str, str], ...]
    ) -> Model:
        """The loop's model: the fallback chain of the session's models, or the offline planner (which
        is told the documents the previous turn cited, so a follow-up reads them again)."""
        previous_ask = next((m.content for m in reversed(history) if m.role == "user"), None)
        if turn.model_override is not None:
            return turn.model_override
        if turn.workflow == "search_rag" or turn.offline:
            scope = pinned_planner_scope(tuple((b.slug, b.version_dir) for b in turn.briefs))
            self.planner = OfflinePlanner(
                turn.request.ask[:2000],
                scope,
                previous_ask,
                general_only=turn.workflow == "search_rag",
                previous_documents=previous_documents,
            )
            return self.planner
        return self._provider_model()

    def _provider_model(self) -> Model:
        """The session's models as one (fallback) model, built once: the loop and synthesis share
        its clients."""
        if self.turn.model_override is not None:
            return self.turn.model_override
        if self._provider is None:
            models = [self.rt.model_factory(c) for c in self.turn.model_configs if c.provider != "offline"]
            self._provider = models[0] if len(models) == 1 else FallbackModel(models)
        return self._provider

    def _recording_registry(self) -> dict[str, HostFunction]:
        registry = self.turn.registry_override or self.rt.sandbox_host.registry

        def wrap(name: str, fn: HostFunction) -> HostFunction:
            def recorded(args: dict[str, Any]) -> Any:
                """Keep what replay needs: the arguments of a call that was answered (its function
                bounded them), and only a digest of those of a rejected one, which may be anything."""
                try:
                    result = fn(args)
                except Exception as exc:
                    record: dict[str, Any] = {
                        "kind": "host",
                        "fn": name,
                        "args_sha256": args_digest(args),
                        "ok": False,
                        "error": str(exc)[:500],
                    }
                    self.host_log.append(record)
                    self._recorded(len(dumps(record)))
                    raise
                record = {"kind": "host", "fn": name, "args": args, "ok": True, "result": result}
                self._recorded(len(dumps(record)))
                self.host_log.append(record)
                return result

            return recorded

        return {name: wrap(name, fn) for name, fn in registry.items()}

    def _start_sandbox(self, contexts: dict[str, Any]) -> Sandbox:
        host = self.rt.sandbox_host
        sandbox = host.start_turn(contexts, registry=self._recording_registry(), meter=self.meter)
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
        self.pinned.attach_artifact_sources(spans)
        computed = computed_results(result.observations)
        evidence = select_evidence(
            spans,
            result.final_labels,
            request.ask,
            max_chars=evidence_budget(
                [c for c in self.turn.model_configs if c.provider != "offline"],
                len(instructions) + len(computed) + sum(len(m.content) for m in history),
            ),
        )
        slugs = [b.slug for b in self.turn.briefs]
        synthesis = Synthesis()
        data: dict[str, Any] | None = None
        grounding: dict[str, list[int]] | None = None
        began = time.monotonic()
        text = ""
        if self.turn.offline:
            text = extractive_answer(
                request.ask, evidence, result.draft, slugs, self.pinned.boilerplate_share
            )
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
                out = synthesize(
                    self._provider_model(), inp, timeout_s=max(1.0, self.deadline - time.monotonic())
                )
            except ShapeInvalid as exc:
                self.fail(str(exc), answer=exc.text, evidence=evidence)
                return
            except ModelError as exc:
                text = extractive_answer(request.ask, evidence, None, slugs, self.pinned.boilerplate_share)
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
        if self.stopping():  # cancelled or out of time while the answer was written: not released
            self._stop_now()
            return
        extra = sorted(
            {n for numbers in (grounding or {}).values() for n in numbers if 1 <= n <= len(evidence)}
        )
        cited = build_citations(text, evidence, self.pinned.page_text, extra_cited=extra)
        output_grounding: dict[str, list[int]] | None = None
        ungrounded: list[str] = []
        if data is not None:
            numbered = renumber_grounding(grounding or {}, cited.evidence_to_citation)
            texts = {i + 1: c.grounding for i, c in enumerate(cited.citations)}
            span_texts = {
                cited.evidence_to_citation[pos]: evidence[pos - 1].text for pos in cited.evidence_to_citation
            }
            texts.update(span_texts)
            output_grounding, ungrounded = check_grounding(data, numbered, texts, computed)
        synthesis.answer_preview = cited.text[:200]
        self.trace["citations_dropped"] = cited.dropped
        self.cited_refs = {evidence[pos - 1].ref for pos in cited.evidence_to_citation}
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

    # ---------------------------------------------------------------------------- endings
    def _usage(self, synthesis: Synthesis | None) -> Usage:
        loop = self.loop_result.usage if self.loop_result else None
        return turn_usage(loop, synthesis, next(iter(self.turn.model_configs), None))

    def _rollup(self, stop_reason: StopReason, citations_dropped: int = 0) -> Rollup:
        steps = [s for s in self.query.steps if s.status != "running"]
        by_category: dict[str, int] = {}
        for step in steps:
            for call in step.tool_calls:
                by_category[call.category] = by_category.get(call.category, 0) + 1
        result = self.loop_result
        if result is not None:
            total_hits = result.total_hits
        else:  # no loop (a retrieval-only turn): the hits its searches returned
            total_hits = sum(int(c.result.get("hits", 0)) for s in steps for c in s.tool_calls)
        return Rollup(
            n_steps=len(steps),
            n_tool_calls=sum(len(s.tool_calls) for s in steps),
            by_category=by_category,
            total_hits=total_hits,
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
        citations: list[Citation],
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
        stop_reason: StopReason = "failed",
    ) -> None:
        if self.terminal:
            return
        self._ending = True
        q = self.query
        q.error = error
        if answer:
            q.output = [{"role": "assistant", "content": [{"type": "output_text", "text": answer}]}]
        q.rollup = self._rollup(stop_reason)
        q.usage = self._usage(None)
        if detail:
            self.trace["internal_error"] = detail[-4000:]
        self.emit({"type": "response.turn_rollup", **q.rollup.model_dump(mode="json")})
        self._finish("failed", error)

    def cancel(self) -> None:
        """End the turn `cancelled` (spec/api.md §9.4): steps so far are kept and the trace is persisted."""
        if self.terminal:
            return
        self._ending = True
        q = self.query
        q.rollup = self._rollup("cancelled")
        q.usage = self._usage(None)
        self.emit({"type": "response.turn_rollup", **q.rollup.model_dump(mode="json")})
        self._finish("cancelled", CANCELLED_ERROR)

    def _finish(self, status: str, error: str | None) -> None:
        self._ending = True
        q = self.query
        q.status = status  # type: ignore[assignment]
        q.error = error
        q.runtime_ms = self._elapsed_ms()
        q.trace_ref = f"trace/{q.id}"
        self._persist_trace()
        self.emit({"type": "response.trace", "trace_ref": q.trace_ref})
        terminal: dict[str, Any] = {"type": f"response.{status}"}
        if error:
            terminal["error"] = error
        self.emit(terminal, with_query=True)  # the terminal status and event are seen together
        self.terminal = True

    def _persist_trace(self) -> None:
        self.trace.update(
            build_trace(
                self.query,
                self.loop_result,
                self.model_calls,
                self.host_log,
                sandbox=self.sandbox_info,
                briefs=self.turn.briefs,
                ignored_fields=self.turn.ignored_fields,
                citations_dropped=self.trace.get("citations_dropped", []),
                ungrounded_fields=self.trace.get("ungrounded_fields", []),
                cited=self.cited_refs,
            )
        )
        if self.turn.request.retrieval is not None:
            self.trace["sandbox"] = None  # no sandbox was started
        self.trace["host_budget"] = self.meter.to_json()
        self.trace["spans_rejected"] = self.loop_result.spans_rejected if self.loop_result else 0
        records = replay_records(self.replay_records, self.model_calls, self.host_log)
        kept, recorded = fit_records(self.trace, records, self.meter.left("recorded_bytes"))
        self._recorded(recorded)
        self.trace["host_budget"] = self.meter.to_json()  # now with the trace and the log it counts
        persist(self.rt.db, self.query.id, self.trace, kept)

    def close(self) -> None:
        if self._watchdog is not None:
            self._watchdog.cancel()
        if self.sandbox is not None:
            self.sandbox.close()
            self.sandbox = None
