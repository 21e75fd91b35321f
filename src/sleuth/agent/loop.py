"""The agent loop (spec/runtime.md §4): the model decides, the code runs in the turn's sandbox, the
truncated output goes back, until the model finishes or a limit stops it.

The loop knows nothing about synthesis or storage: it returns what happened (steps, evidence,
the draft answer, why it stopped) and reports each step through `emit` as it goes.
"""

from __future__ import annotations

import dataclasses
import math
import re
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from sleuth.agent.actions import (
    SDK_NAMES,
    TOOLS,
    Action,
    misread_tool,
    parse_reply,
    rejection_message,
    reserved_binding,
)
from sleuth.agent.evidence import mark_seen
from sleuth.agent.records import QueryStep, StepCost, StopReason, Strategy, TraceCall
from sleuth.agent.repeats import code_key, repeat_notice
from sleuth.agent.spans import EvidenceSpan
from sleuth.errors import Failed
from sleuth.models.base import CompletionParams, Message, Model, ModelError, Reply, TokenUsage
from sleuth.sandbox.host import Sandbox, SandboxDied, StepResult
from sleuth.sandbox.limits import BudgetExceeded, BudgetMeter
from sleuth.sandbox.messages import SpanReport
from sleuth.sdk.knowledge import Knowledge  # noqa: F401  (declaring it registers the primitives)
from sleuth.sdk.primitives import primitives
from sleuth.settings import TOOL_OUTPUT_CHARS
from sleuth.store.text import clean

MAX_CODE_CHARS = 20_000
MODEL_CALL_TIMEOUT_S = 300.0  # local CPU servers prefill a few thousand tokens in minutes
MAX_TRACE_CALLS = 200
#: Each primitive's trace category and score space, as its declaration says (`sdk.primitives`); a call
#: that is no primitive (`embed`, `llm_query`) is the host's.
CATEGORIES: dict[str, str] = {p.name: p.category for p in primitives()}
SCORE_SPACES: dict[str, str] = {p.name: p.score_space for p in primitives() if p.score_space is not None}
_CALL = re.compile(r"\b(" + "|".join(SDK_NAMES) + r")\s*\(")


class TurnFailed(Failed):
    """The turn cannot complete (every model failed, the sandbox could not be restarted)."""


@dataclass(frozen=True)
class LoopSettings:
    max_steps: int = 8
    step_timeout_s: float = 30.0
    max_tool_output_chars: int = TOOL_OUTPUT_CHARS
    max_failed_in_a_row: int = 3
    #: Steps whose code was already run in the turn (`agent.repeats`), after which the loop ends and
    #: synthesis answers from the evidence held (stop reason `repeated`).
    max_repeats: int = 2
    max_reply_tokens: int = 2048
    temperature: float | None = None
    seed: int | None = None
    reasoning_effort: str | None = None


@dataclass
class ModelCallRecord:
    """One model call, for the replay log and the trace's model accounting."""

    phase: str
    messages: list[dict[str, Any]]
    reply: dict[str, Any] | None
    error: str | None
    ms: float


@dataclass
class LoopResult:
    steps: list[QueryStep]
    spans: dict[str, EvidenceSpan]
    final_labels: list[str]
    draft: str | None
    stop_reason: StopReason
    usage: TokenUsage
    observations: list[tuple[list[str], str]]  # (fns called, observation) per step: computed results
    full_outputs: list[str]
    model_calls: list[ModelCallRecord] = field(default_factory=list)
    answered_by: str | None = None
    total_hits: int = 0
    spans_rejected: int = 0  # reports that did not resolve against the pinned versions


class AgentLoop:
    """One turn's loop. `restart_sandbox` gives a fresh sandbox when a step killed the old one."""

    def __init__(
        self,
        model: Model,
        sandbox: Sandbox,
        messages: list[Message],
        settings: LoopSettings,
        *,
        deadline: float,
        emit: Callable[[QueryStep], None],
        restart_sandbox: Callable[[], Sandbox],
        tools: Sequence[str] | None = None,
        clock: Callable[[], float] = time.monotonic,
        should_stop: Callable[[], bool] = lambda: False,
        resolve_span: Callable[[SpanReport], EvidenceSpan | None],
        meter: BudgetMeter | None = None,
    ) -> None:
        """`should_stop` is polled between steps (cancel, hard time cap): when it turns true the loop
        ends with stop_reason `cancelled` and never restarts a sandbox that was killed to stop it.
        `resolve_span` turns what the sandbox reports into evidence (None: rejected); `meter` is the
        turn's host budget, charged one per span reported."""
        self.model = model
        self.sandbox = sandbox
        self.messages = messages
        self.settings = settings
        self.deadline = deadline
        self.emit = emit
        self.restart_sandbox = restart_sandbox
        self.disabled = [n for n in SDK_NAMES if tools is not None and n not in tools]
        self.clock = clock
        self.should_stop = should_stop
        self.resolve_span = resolve_span
        self.meter = meter or BudgetMeter()
        self.protocol = model.config.tool_protocol
        self.result = LoopResult([], {}, [], None, "final", TokenUsage(), [], [])
        self._seen_counter = 0
        self._elided: set[int] = set()
        self._finished = False
        self._new_spans: list[EvidenceSpan] = []  # resolved in the current step
        self._ran: dict[str, int] = {}  # `code_key` of each step's code → the step that ran it

    # ------------------------------------------------------------------------------ the loop
    def run(self) -> LoopResult:
        failed_in_a_row = 0
        repeats = 0
        number = 0
        while True:
            if self.should_stop():
                self.result.stop_reason = "cancelled"
                break
            if number >= self.settings.max_steps:
                self.result.stop_reason = "max_steps"
                break
            if self.clock() >= self.deadline:
                self.result.stop_reason = "timeout"
                break
            number += 1
            began = self.clock()
            reply = self._decide()
            decide_ms = (self.clock() - began) * 1000
            if self.should_stop():  # a model call cannot be interrupted: drop its decision instead
                self.result.stop_reason = "cancelled"
                break
            action = parse_reply(reply, self.protocol)
            if action.kind != "code":
                self._remember_reply(reply, action, None)
                self.result.draft = action.answer
                self.result.final_labels = self._known_labels(action.evidence)
                self.result.stop_reason = "final" if action.kind == "final" else "no_tool_call"
                break
            key = code_key(action.code)
            earlier = self._ran.get(key)
            if earlier is not None:
                self._repeated_step(number, action, reply, decide_ms, earlier)
                repeats += 1
                if repeats >= self.settings.max_repeats:
                    self.result.stop_reason = "repeated"
                    break
                continue
            step = self._run_step(number, action, reply, decide_ms, key)
            failed_in_a_row = failed_in_a_row + 1 if step.status == "failed" else 0
            if self._finished:
                break
            if failed_in_a_row >= self.settings.max_failed_in_a_row:
                self.result.stop_reason = "errors"
                break
        return self.result

    def _decide(self) -> Reply:
        self._fit_context_window()
        tools = TOOLS if self.protocol == "native" else []
        params = CompletionParams(
            max_tokens=self.settings.max_reply_tokens,
            temperature=self.settings.temperature
            if self.settings.temperature is not None
            else self.model.config.temperature,
            seed=self.settings.seed if self.settings.seed is not None else self.model.config.seed,
            reasoning_effort=self.settings.reasoning_effort,
            timeout_s=max(5.0, min(MODEL_CALL_TIMEOUT_S, self.deadline - self.clock())),
        )
        sent = [m.to_json() for m in self.messages]
        began = self.clock()
        try:
            # A model's text is outside text too: made valid UTF-8 before code is parsed or stored.
            reply = Reply.from_json(clean(self.model.complete(self.messages, tools, params).to_json()))
        except ModelError as exc:
            self.result.model_calls.append(
                ModelCallRecord("loop", sent, None, str(exc), (self.clock() - began) * 1000)
            )
            raise TurnFailed(f"model failed: {exc}") from exc
        self.result.model_calls.append(
            ModelCallRecord("loop", sent, reply.to_json(), None, (self.clock() - began) * 1000)
        )
        self.result.usage = self.result.usage + reply.usage
        self.result.answered_by = reply.model or self.model.config.id
        return reply

    def _run_step(self, number: int, action: Action, reply: Reply, decide_ms: float, key: str) -> QueryStep:
        """Run a step's code; `key` is its `code_key`, kept once the code is run (not refused)."""
        step_id = f"step_{number}"
        code = action.code[:MAX_CODE_CHARS]
        usage = reply.usage
        self.result.steps.append(
            QueryStep(
                step_id=step_id,
                status="running",
                commentary=action.commentary,
                code={"language": "python", "source": code},
                model=reply.model or self.model.config.id,
            )
        )
        self.emit(self.result.steps[-1])
        problem = action.problem or self._refusal(action.code)
        if problem is None:
            self._ran.setdefault(key, number)
        self._new_spans = []
        began = self.clock()
        outcome: StepResult | None = None
        error: dict[str, str] | None
        if problem is not None:
            observation, error = problem, {"type": "StepRejected", "message": problem}
        else:
            timeout = max(1.0, min(self.settings.step_timeout_s, self.deadline - self.clock()))
            try:
                outcome = self.sandbox.exec(action.code, timeout, self.settings.max_tool_output_chars)
                observation, error = self._observe(outcome)
            except BudgetExceeded as exc:
                self._fail_step(action, reply, exc)
                raise TurnFailed(str(exc)) from exc
            except SandboxDied as exc:
                if self.should_stop():  # killed to stop the turn: no restart, the loop ends next
                    message = "the step was interrupted: the turn is stopping"
                    observation, error = (
                        f"Interrupted: {message}",
                        {"type": "Interrupted", "message": message},
                    )
                else:
                    observation, error = f"SandboxDied: {exc}", {"type": "SandboxDied", "message": str(exc)}
                    self.sandbox = self.restart_sandbox()
        execute_ms = (self.clock() - began) * 1000
        calls = [self._trace_call(c) for c in (outcome.calls if outcome else [])]
        fns = list(dict.fromkeys(c.fn for c in calls))
        step = QueryStep(
            step_id=step_id,
            status="failed" if error else "completed",
            commentary=action.commentary,
            fns=fns,
            strategy=strategy_of(calls, sorted({s.context for s in self._new_spans})),
            tool_calls=calls[:MAX_TRACE_CALLS],
            code={"language": "python", "source": code},
            trace_truncated={
                "truncated": len(calls) > MAX_TRACE_CALLS,
                "dropped_documents": 0,
                "dropped_tool_calls": max(0, len(calls) - MAX_TRACE_CALLS),
            },
            **_usage_fields(usage, self.result.usage, decide_ms, execute_ms),
            output=observation,
            output_chars=outcome.output_chars if outcome else len(observation),
            output_truncated=outcome.truncated if outcome else False,
            error=error,
            model=reply.model or self.model.config.id,
        )
        self.result.steps[-1] = step
        self.result.observations.append((fns, observation))
        self.result.full_outputs.append(outcome.full_output if outcome else observation)
        self.result.total_hits += sum(int(c.result.get("hits", 0)) for c in calls)
        self._remember_reply(reply, action, observation)
        self.emit(step)
        if outcome is not None and outcome.final is not None:
            self.result.draft = _text(outcome.final.answer)
            self.result.final_labels = self._known_labels(outcome.final.evidence)
            self.result.stop_reason = "final"
            self._finished = True
        return step

    def _repeated_step(
        self, number: int, action: Action, reply: Reply, decide_ms: float, earlier: int
    ) -> None:
        """A step whose code step `earlier` ran: not run again; the model reads where its output is."""
        notice = repeat_notice(earlier, self.result.steps[earlier - 1].output or "")
        step = QueryStep(
            step_id=f"step_{number}",
            status="failed",
            commentary=action.commentary,
            code={"language": "python", "source": action.code[:MAX_CODE_CHARS]},
            **_usage_fields(reply.usage, self.result.usage, decide_ms),
            output=notice,
            output_chars=len(notice),
            output_truncated=False,
            error={"type": "StepRepeated", "message": f"the code of step {earlier}, run again"},
            model=reply.model or self.model.config.id,
        )
        self.result.steps.append(step)
        self.result.observations.append(([], notice))
        self.result.full_outputs.append(notice)
        self._remember_reply(reply, action, notice)
        self.emit(step)

    def _fail_step(self, action: Action, reply: Reply, exc: BudgetExceeded) -> None:
        """Close the running step as failed with the budget that stopped the turn."""
        step = self.result.steps[-1].model_copy(
            update={
                "status": "failed",
                "error": {"type": "BudgetExceeded", "message": str(exc)},
                "output": f"BudgetExceeded: {exc}",
            }
        )
        self.result.steps[-1] = step
        self._remember_reply(reply, action, step.output)
        self.emit(step)

    # ------------------------------------------------------------------------------ pieces
    def _refusal(self, code: str) -> str | None:
        misread = misread_tool(code)
        if misread is not None:
            return misread
        name = reserved_binding(code)
        if name is not None:
            return rejection_message(name)
        used = set(_CALL.findall(code))
        for disabled in self.disabled:
            if disabled in used:
                return f"Step not run: `{disabled}` is not enabled for these queries."
        return None

    def _observe(self, outcome: StepResult) -> tuple[str, dict[str, str] | None]:
        for report in outcome.spans:
            known = self.result.spans.get(report.ref)
            if known is not None:
                score = report.score
                if (
                    score is not None
                    and math.isfinite(score)
                    and (known.score is None or score > known.score)
                ):
                    self.result.spans[report.ref] = dataclasses.replace(known, score=score)
                continue
            self.meter.charge("spans", 1)
            span = self.resolve_span(report)
            if span is None:
                self.result.spans_rejected += 1
            else:
                self.result.spans[span.ref] = span
                self._new_spans.append(span)
        observation = outcome.output
        hints = []
        if outcome.output_chars == 0 and outcome.final is None:
            hints.append("[hint] the step printed nothing; print what you need to see")
        message = (outcome.error or {}).get("message", "")
        if "PendingSearch" in message or "was not awaited" in message or "never awaited" in message:
            hints.append("[hint] search functions are async; write `await search_source(...)`")
        if hints:
            observation = (observation.rstrip("\n") + "\n" if observation else "") + "\n".join(hints)
        self._seen_counter = mark_seen(self.result.spans.values(), outcome.output, self._seen_counter)
        error = None
        if not outcome.ok and outcome.error is not None:
            error = {
                "type": str(outcome.error.get("type")),
                "message": str(outcome.error.get("message"))[:2000],
            }
        return observation, error

    def _trace_call(self, call: dict[str, Any]) -> TraceCall:
        fn = str(call.get("fn"))
        return TraceCall(
            fn=fn,
            category=CATEGORIES.get(fn, "host"),
            args=str(call.get("args", ""))[:1000],
            result=dict(call.get("result") or {}),
            duration_ms=float(call.get("ms", 0.0)),
            ok=bool(call.get("ok", True)),
            score_space=SCORE_SPACES.get(fn),
            error=call.get("error"),
        )

    def _known_labels(self, labels: Sequence[Any]) -> list[str]:
        return [str(label) for label in labels if str(label) in self.result.spans]

    def _remember_reply(self, reply: Reply, action: Action, observation: str | None) -> None:
        """Append the model's action and the observation to the conversation, in the protocol's form."""
        if self.protocol == "native" and reply.tool_calls:
            self.messages.append(Message("assistant", reply.text, tool_calls=list(reply.tool_calls)))
            if observation is None:
                observation = "ok"
            for i, call in enumerate(reply.tool_calls):
                self.messages.append(
                    Message("tool", observation if i == 0 else "(ran in the same step)", tool_call_id=call.id)
                )
        else:
            self.messages.append(Message("assistant", reply.text))
            if observation is not None:
                self.messages.append(Message("user", f"Output of the step:\n{observation}"))

    def _fit_context_window(self) -> None:
        """Replace the oldest observations by a stub when the conversation outgrows the window."""
        budget = (self.model.config.context_window - self.settings.max_reply_tokens) * 4
        observations = [
            i
            for i, m in enumerate(self.messages)
            if i >= 2
            and (m.role == "tool" or (m.role == "user" and m.content.startswith("Output of the step")))
        ]
        for index in observations:
            if sum(len(m.content) for m in self.messages) <= budget:
                return
            if index in self._elided:
                continue
            message = self.messages[index]
            self.messages[index] = Message(
                message.role,
                f"[observation elided: {len(message.content):,} chars]",
                tool_call_id=message.tool_call_id,
            )
            self._elided.add(index)


def _usage_fields(
    usage: TokenUsage, cum: TokenUsage, decide_ms: float, execute_ms: float = 0.0
) -> dict[str, Any]:
    """A step's tokens and time as `QueryStep` records them: one reply's usage, the turn's so far."""
    return {
        "cost": StepCost(
            tokens_in=usage.input_tokens,
            tokens_out=usage.output_tokens,
            decide_ms=round(decide_ms),
            execute_ms=round(execute_ms),
            tokens_in_cached=usage.cached_tokens,
            tokens_in_cache_write=usage.cache_write_tokens,
            tokens_in_fresh=usage.fresh_tokens,
        ),
        "input_tokens": usage.input_tokens,
        "output_tokens": usage.output_tokens,
        "total_tokens": usage.input_tokens + usage.output_tokens,
        "cum_input_tokens": cum.input_tokens,
        "cum_output_tokens": cum.output_tokens,
    }


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) and value.strip() else None


def strategy_of(calls: Sequence[TraceCall], scope: list[str]) -> Strategy:
    """`strategy.kind` derived from the calls (spec/runtime.md §7)."""
    fns = list(dict.fromkeys(c.fn for c in calls))
    if not fns:
        return Strategy(kind="none", fns=[], label="no SDK calls", scope=scope)
    first = fns[0]
    categories = {CATEGORIES.get(f, "host") for f in fns}
    if first == "query_db":
        kind, label = "sql_first", "SQL over the typed tables"
    elif first == "read_rosters":
        kind, label = "rosters_first", "read the rosters"
    elif first == "search_source_by_keyword" and categories <= {"search"} and len(fns) == 1:
        kind, label = "keyword", "keyword search for exact terms"
    elif first == "walk_graph":
        kind, label = "graph", "walk the artifact graph"
    elif first in (
        "search_knowledge",
        "read_artifact",
        "outline_knowledge",
        "describe_type",
        "cite_from_artifact",
    ):
        kind, label = "artifacts_first", "artifacts, then their sources"
    elif first in ("search_source", "search_in_sources", "search_source_by_keyword"):
        kind, label = "chunks_first", "search the source chunks"
    else:
        kind, label = "mixed", "mixed calls"
    return Strategy(kind=kind, fns=fns, label=label, scope=scope)
