"""The state of one running turn and what it records: its events, stored as they happen; its stop (a
cancel, the time cap); and its ending (rollup, usage, trace, terminal event).

`run.TurnRun` extends it with the stages that produce them, from orientation to synthesis. Keeping
the record apart keeps one rule in one place: a turn ends once, and every ending is recorded the same
way, whatever stage it ends in.
"""

from __future__ import annotations

import contextlib
import socket
import threading
import time
from collections.abc import Callable
from typing import Any, Literal

from sleuth.agent.loop import LoopResult, ModelCallRecord
from sleuth.agent.pinned import PinnedVersions
from sleuth.agent.prepared import Engine, PreparedTurn
from sleuth.agent.records import (
    Citation,
    QueryStep,
    Rollup,
    StopReason,
    Synthesis,
    Usage,
    query_document,
    turn_usage,
)
from sleuth.agent.spans import EvidenceSpan
from sleuth.agent.trace import build_trace, fit_records, persist, replay_records
from sleuth.sandbox.host import Sandbox
from sleuth.sandbox.limits import BudgetExceeded, BudgetMeter
from sleuth.store.database import dumps
from sleuth.store.records.rows import TraceDocument
from sleuth.store.text import clean

Emit = Callable[[dict[str, Any]], None]  # a turn's event listener; each event is stored first


CANCELLED_ERROR = "cancelled by client"  # spec/api.md §9.4
StopCause = Literal["cancelled", "timeout"]


def timeout_error(seconds: int) -> str:
    """The error of a turn that passed its wall-clock cap (spec/api.md §9.1)."""
    return f"turn timed out after {seconds} s"


class RunState:
    """The state of one running turn and its record; `run.TurnRun` runs its stages."""

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
        self.trace: TraceDocument = {}
        self.cited_refs: set[str] = set()  # labels of the spans the answer cites
        self.terminal = False
        self.replay_records: list[dict[str, Any]] = []
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
            self.rt.db.update_query(query_document(self.query), event=event)
        else:
            self.rt.db.append_event(self.query.id, event)
        if self.on_event is not None:
            with contextlib.suppress(Exception):  # a listener that breaks must not break the turn
                self.on_event(event)

    def _step_event(self, step: QueryStep) -> None:
        steps = [s for s in self.query.steps if s.step_id != step.step_id]
        self.query.steps = [*steps, step]
        self.query.runtime_ms = self._elapsed_ms()
        self.rt.db.update_query(query_document(self.query))
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
        """End the turn `cancelled` (spec/api.md §9.4): steps so far are kept and the trace is persisted.
        Its error is `cancelled by client`, or the reason the process that stopped it gave."""
        if self.terminal:
            return
        self._ending = True
        q = self.query
        q.rollup = self._rollup("cancelled")
        q.usage = self._usage(None)
        self.emit({"type": "response.turn_rollup", **q.rollup.model_dump(mode="json")})
        self._finish("cancelled", self.turn.cancel_reason or CANCELLED_ERROR)

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
