"""One running turn: its stages from orientation to synthesis (`TurnRun`). What it records as it goes,
how it stops and how it ends are `run_state.RunState`'s.
"""

from __future__ import annotations

import hashlib
import time
import traceback
from collections.abc import Sequence
from typing import Any, cast, get_args

from sleuth.agent.citations import CitationResult, build_citations, renumber_grounding
from sleuth.agent.evidence import computed_results, evidence_budget, select_evidence
from sleuth.agent.extractive import NO_EVIDENCE, extractive_answer
from sleuth.agent.grounding import check_grounding
from sleuth.agent.loop import AgentLoop, LoopResult, LoopSettings, TurnFailed
from sleuth.agent.orientation import (
    ContextOverview,
    ask_message,
    instructions_text,
    orientation_host,
    orientation_text,
    overview,
)
from sleuth.agent.planner import OfflinePlanner
from sleuth.agent.planner_scope import pinned_planner_scope
from sleuth.agent.prepared import Engine, PreparedTurn
from sleuth.agent.records import Assurance, QueryStep, Synthesis, Unsupported
from sleuth.agent.retrieval import Retrieval, RetrievalOptions
from sleuth.agent.run_state import Emit, RunState
from sleuth.agent.shape import resolve_pointer
from sleuth.agent.shape_fill import OfflineShapeError, offline_fill
from sleuth.agent.spans import EvidenceSpan, SpanResolver
from sleuth.agent.synthesis import (
    ShapeInvalid,
    SynthesisInput,
    SynthesisOutput,
    cited_documents,
    history_messages,
    repair,
    synthesis_reserve,
    synthesize,
)
from sleuth.agent.trace import args_digest, turn_record
from sleuth.models.base import Message, Model, ModelError
from sleuth.models.fallback import FallbackModel
from sleuth.sandbox.host import HostFunction, Sandbox, SandboxUnavailable
from sleuth.sandbox.limits import BudgetExceeded
from sleuth.sdk.orientation import OrientationSettings
from sleuth.settings import TOOL_OUTPUT_CHARS
from sleuth.store.database import dumps
from sleuth.store.records.rows import RepairNote, UnsupportedDocument

__all__ = ["Emit", "TurnRun"]


class TurnRun(RunState):
    """One running turn; `Runtime.run` drives it."""

    def __init__(self, runtime: Engine, turn: PreparedTurn, on_event: Emit | None) -> None:
        super().__init__(runtime, turn, on_event)
        self.planner: OfflinePlanner | None = None  # when the offline planner plays the model
        self._provider: Model | None = None
        self._orientation: HostFunction | None = None  # the sandbox's `orientation`, once oriented

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
        tools = session.get("tools")
        oriented = OrientationSettings(
            profile=model.config.prompt_profile,
            protocol=model.config.tool_protocol,
            tools=None if tools is None else tuple(tools),
            system_prompt=session.get("system_prompt"),
            guardrails=session.get("guardrails"),
            max_tool_output_chars=self.query.max_tool_output_chars or TOOL_OUTPUT_CHARS,
        )
        # The primitive `orientation()` answers with this very text (`orientation_host`).
        self._orientation = orientation_host(turn.briefs, oriented)
        messages = [
            Message("system", orientation_text(turn.briefs, oriented)),
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
        earlier_asks = [m.content for m in history if m.role == "user"]  # a follow-up chain, oldest first
        if turn.model_override is not None:
            return turn.model_override
        if turn.workflow == "search_rag" or turn.offline:
            scope = pinned_planner_scope(tuple((b.slug, b.version_dir) for b in turn.briefs))
            self.planner = OfflinePlanner(
                turn.request.ask[:2000],
                scope,
                earlier_asks,
                general_only=turn.workflow == "search_rag",
                previous_documents=previous_documents,
                # A model answers this turn: the steps are the workflow's fixed retrieval, no planner's.
                author="Offline planner" if turn.offline else "search_rag retrieval (no model writes it)",
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
        registry = dict(self.turn.registry_override or self.rt.sandbox_host.registry)
        if self._orientation is not None:  # replay: built again from the pinned versions
            registry.setdefault("orientation", self._orientation)

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
        checked: CitationResult | None = None  # a prose answer's citations, built while deciding on repair
        if self.turn.offline:
            text = extractive_answer(
                request.ask, evidence, result.draft, slugs, self.pinned.boilerplate_share
            )
            synthesis.method = "extractive"
            planned = self._planner_results()
            synthesis.assurance = (
                "none" if text.startswith(NO_EVIDENCE) else _assurance(planned.get("assurance"))
            )
            if request.shape is not None:
                try:
                    data = offline_fill(request.shape, text, planned.get("count"), planned.get("items"))
                except OfflineShapeError as exc:
                    self.fail(str(exc), answer=text, evidence=evidence)
                    return
        else:
            inp = SynthesisInput(
                request.ask, instructions, history, result.draft, computed, evidence, request.shape
            )
            model = self._provider_model()
            try:
                out = synthesize(model, inp, timeout_s=max(1.0, self.deadline - time.monotonic()))
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
                if data is None:
                    text, checked, out = self._repaired(model, inp, out, evidence, computed)
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
        cited = (
            checked
            if checked is not None  # a prose answer's, with no grounding to add
            else build_citations(
                text,
                evidence,
                self.pinned.page_text,
                extra_cited=extra,
                question=request.ask,
                computed=computed,
            )
        )
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
        self.query.unsupported = [Unsupported.model_validate(u) for u in cited.unsupported] + [
            Unsupported(reason="field_not_in_evidence", field=pointer, missing=_leaf_text(data, pointer))
            for pointer in ungrounded
        ]
        self.trace["unsupported"] = [
            cast(UnsupportedDocument, u.model_dump(mode="json")) for u in self.query.unsupported
        ]
        self._complete(cited.text, cited.citations, data, output_grounding, synthesis, evidence, result)

    def _repaired(
        self,
        model: Model,
        inp: SynthesisInput,
        out: SynthesisOutput,
        evidence: list[EvidenceSpan],
        computed: str,
    ) -> tuple[str, CitationResult, SynthesisOutput]:
        """The prose answer to release, its citations and the synthesis calls behind it: an answer
        with sentences its citations do not support goes back to the model once (spec/runtime.md
        §8.4.1); the rewrite is kept only when the claim check flags fewer sentences in it. The trace
        notes the attempt. The citations are the caller's too: they are built once per text."""
        first = build_citations(
            out.text, evidence, self.pinned.page_text, question=inp.ask, computed=computed
        )
        remaining = self.deadline - time.monotonic()
        if not first.unsupported or not out.text or remaining < 2.0 or self.stopping():
            return out.text, first, out
        note: RepairNote = {"flagged": len(first.unsupported), "flagged_after": None, "kept": "first"}
        self.trace["synthesis_repair"] = note
        try:
            again = repair(model, inp, out.text, first.unsupported, timeout_s=remaining)
        except ModelError as exc:
            note["error"] = str(exc)
            return out.text, first, out
        out.calls += again.calls
        out.usage = out.usage + again.usage
        after = build_citations(
            again.text, evidence, self.pinned.page_text, question=inp.ask, computed=computed
        )
        note["flagged_after"] = len(after.unsupported)
        if again.text and len(after.unsupported) < len(first.unsupported):
            note["kept"] = "repair"
            return again.text, after, out
        return out.text, first, out

    def _planner_results(self) -> dict[str, Any]:
        """The planner's computed count and list items and how sure its answer is (recorded, so a
        replay fills shapes and reports alike)."""
        if self.planner is not None:
            planner = self.planner
            record = {"count": planner.count, "items": planner.items, "assurance": planner.assurance}
            self.replay_records.append({"kind": "planner", **record})
            return record
        recorded: dict[str, Any] = (self.turn.request_replay or {}).get("planner") or {}
        return recorded


def _leaf_text(data: object, pointer: str) -> list[str]:
    """A shaped answer's leaf as text, for `Unsupported.missing`."""
    found, value = resolve_pointer(data, pointer)
    return [str(value)] if found and value is not None else []


def _assurance(value: object) -> Assurance | None:
    """A recorded assurance, None for a replay recorded before assurances were."""
    return cast(Assurance, value) if value in get_args(Assurance) else None
