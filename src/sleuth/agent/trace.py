"""A turn's trace (spec/api.md §8.6) and replay log (spec/runtime.md §11), assembled from what the
turn recorded."""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Collection, Iterable, Sequence
from dataclasses import asdict
from importlib.metadata import PackageNotFoundError, version
from typing import Any

from sleuth.agent.loop import LoopResult, ModelCallRecord
from sleuth.agent.orientation import PROMPT_VERSION, ContextBrief
from sleuth.agent.prepared import PreparedTurn
from sleuth.agent.records import Query, QueryStep, query_document
from sleuth.agent.request import TurnRequest
from sleuth.agent.spans import EvidenceSpan
from sleuth.models.base import ModelConfig
from sleuth.store.database import dumps
from sleuth.store.records.replay_log import write_replay_log
from sleuth.store.records.rows import EvidenceEntry, ModelAccount, TraceDocument, TraceVersions, UsageSeam
from sleuth.store.records.server_db import ServerDB
from sleuth.store.version.info import version_file

log = logging.getLogger("sleuth.agent")


def sleuth_version() -> str:
    try:
        return version("sleuth")
    except PackageNotFoundError:
        return "0+unknown"


# ---------------------------------------------------------------------------------- the trace
def build_trace(
    query: Query,
    loop_result: LoopResult | None,
    model_calls: Sequence[ModelCallRecord],
    host_log: Sequence[dict[str, Any]],
    *,
    sandbox: dict[str, Any],
    briefs: Sequence[ContextBrief],
    ignored_fields: list[str],
    citations_dropped: list[dict[str, Any]],
    ungrounded_fields: list[str],
    cited: Collection[str] = (),
) -> TraceDocument:
    """The trace fields known once the turn has ended, in spec/api.md §8.6's order. The caller merges them
    over the notes its stages left on the way (orientation, synthesis_error, internal_error)."""
    document = query_document(query)
    return {
        "query_id": query.id,
        "steps": trace_steps(query.steps, loop_result.full_outputs if loop_result else []),
        "rollup": document.get("rollup"),
        "sandbox": sandbox,
        "models": model_accounting(model_calls),
        "usage_seams": usage_seams(host_log),
        "evidence": evidence_table(loop_result.spans.values() if loop_result else [], cited),
        "citations_dropped": citations_dropped,
        "ungrounded_fields": ungrounded_fields,
        "synthesis": document.get("synthesis"),
        "ignored_fields": ignored_fields,
        "versions": versions(briefs),
        "replay": {"available": True},
    }


def trace_steps(steps: Sequence[QueryStep], full_outputs: Sequence[str]) -> list[dict[str, Any]]:
    """The finished steps, each with its full output (≤ 1 MiB) where the Query keeps a cut one."""
    entries = []
    for i, step in enumerate(s for s in steps if s.status != "running"):
        entry = step.model_dump(mode="json")
        entry["calls"] = entry.pop("tool_calls")
        entry["full_output"] = full_outputs[i][: 1 << 20] if i < len(full_outputs) else step.output
        entries.append(entry)
    return entries


def model_accounting(calls: Iterable[ModelCallRecord]) -> list[ModelAccount]:
    """Calls, tokens and time per model that answered, loop and synthesis together."""
    models: dict[str, ModelAccount] = {}
    for call in calls:
        reply = call.reply or {}
        mid = str(reply.get("model") or "unknown")
        usage = reply.get("usage") or {}
        entry = models.setdefault(
            mid, {"id": mid, "calls": 0, "input_tokens": 0, "output_tokens": 0, "ms": 0.0}
        )
        entry["calls"] += 1
        entry["input_tokens"] += int(usage.get("input_tokens", 0))
        entry["output_tokens"] += int(usage.get("output_tokens", 0))
        entry["ms"] = round(entry["ms"] + call.ms, 1)
    return list(models.values())


def usage_seams(host_log: Iterable[dict[str, Any]]) -> list[UsageSeam]:
    """Usage outside the models: embedding requests, their tokens estimated at 4 characters each."""
    embeds = [h for h in host_log if h["fn"] == "embed"]
    if not embeds:
        return []
    return [
        {
            "kind": "embed",
            "model": str((embeds[0].get("args") or {}).get("model", "default")),
            "tokens": sum(_text_chars(h.get("args")) // 4 for h in embeds),
            "requests": len(embeds),
        }
    ]


def _text_chars(args: Any) -> int:
    """Characters of an embed call's texts (a rejected call keeps no arguments: 0)."""
    texts = args.get("texts") if isinstance(args, dict) else None
    return sum(len(t) for t in texts if isinstance(t, str)) if isinstance(texts, list) else 0


def args_digest(args: Any) -> str:
    """What the replay log keeps of a rejected host call's arguments, which may be anything: a digest."""
    return hashlib.sha256(dumps(args).encode()).hexdigest()


def evidence_table(spans: Iterable[EvidenceSpan], cited: Collection[str] = ()) -> list[EvidenceEntry]:
    """Every span the turn resolved; `cited` are the labels of those the answer's citations quote."""
    return [
        {
            "ref": s.ref,
            "context": s.context,
            "source": s.source_path,
            "page": s.page,
            "start": s.start,
            "end": s.end,
            "kind": s.via,
            "seen": s.seen,
            "cited": s.ref in cited,
        }
        for s in spans
    ]


def versions(briefs: Sequence[ContextBrief]) -> TraceVersions:
    return {
        "sleuth": sleuth_version(),
        "prompt": PROMPT_VERSION,
        "contexts": {b.slug: b.version for b in briefs},
        "manifests": {b.slug: _manifest_hash(b) for b in briefs},
    }


def _manifest_hash(brief: ContextBrief) -> str:
    path = version_file(brief.version_dir)
    try:
        return hashlib.sha256(path.read_bytes()).hexdigest()
    except OSError:
        return ""


# ---------------------------------------------------------------------------------- the replay log
def turn_record(turn: PreparedTurn, model: ModelConfig) -> dict[str, Any]:
    """The log's first record: what replay needs to rebuild the request and pin the same contexts."""
    session, query = turn.session, turn.query
    return {
        "kind": "turn",
        "request": _request_json(turn.request),
        "contexts": {b.slug: b.version for b in turn.briefs},
        "models": [c.id for c in turn.model_configs],
        "model": {
            "id": model.id,
            "tool_protocol": model.tool_protocol,
            "context_window": model.context_window,
            "prompt_profile": model.prompt_profile,
        },
        "workflow": turn.workflow,
        "max_steps": query.max_steps,
        "max_tool_output_chars": query.max_tool_output_chars,
        "tools": session.get("tools"),
    }


def _request_json(request: TurnRequest) -> dict[str, Any]:
    return {
        "ask": request.ask,
        "scope": request.scope,
        "shape": request.shape,
        "max_steps": request.max_steps,
        "timeout_seconds": request.timeout_seconds,
        "max_tool_output_chars": request.tool_output_chars,
        "system_prompt": request.system_prompt,
        "guardrails": request.guardrails,
        "tools": request.tools,
        "workflow": request.workflow,
        "thinking_level": request.thinking_level,
        "retrieval": None if request.retrieval is None else asdict(request.retrieval),
    }


def replay_records(
    turn_records: Iterable[dict[str, Any]],
    model_calls: Iterable[ModelCallRecord],
    host_log: Iterable[dict[str, Any]],
) -> list[dict[str, Any]]:
    """The whole log: the turn's own records (turn, planner), every model call, every host result."""
    records = [*turn_records]
    records += [
        {"kind": "model", "phase": c.phase, "messages": c.messages, "reply": c.reply, "error": c.error}
        for c in model_calls
    ]
    records += host_log
    return records


def persist(db: ServerDB, query_id: str, trace: TraceDocument, records: list[dict[str, Any]] | None) -> None:
    """Write the replay log (None: there is none to write, and the trace says why), then the trace. A
    log that cannot be written costs the turn its replay, noted in the trace, never its answer."""
    try:
        if records is not None:
            write_replay_log(db.replay_root, query_id, records, db.storage)
    except Exception as exc:  # a full disk, or shared storage away: logged, never the turn's failure
        log.warning("turn %s: its replay log could not be written", query_id, exc_info=True)
        trace["replay"] = {"available": False, "error": str(exc)}
    db.save_trace(query_id, trace)


#: The most a stored trace may take, whatever is left of the turn's `recorded_bytes`: every download
#: of it is read whole, so this bounds what one request for it can cost the server.
MAX_TRACE_BYTES = 8 << 20
#: The least a trace keeps when the turn's budget is spent: enough for its summary and every step cut.
TRACE_FLOOR_BYTES = 256 << 10
#: What a trimmed trace keeps of each step's code and output.
TRIMMED_STEP_CHARS = 2_000


def fit_records(
    trace: TraceDocument, records: list[dict[str, Any]], room: float
) -> tuple[list[dict[str, Any]] | None, int]:
    """Fit the trace and the replay log into `room` bytes (what is left of the turn's
    `recorded_bytes`), the trace also into `MAX_TRACE_BYTES`. What gives way, in order: the steps'
    full outputs (to the outputs the model saw), the replay log (not written; the trace says why),
    then the steps themselves (code and output cut, call results and the evidence table dropped). A
    trace is always written, at most `max(room, TRACE_FLOOR_BYTES)` and `MAX_TRACE_BYTES`. Returns the
    records to write (None: none) and the bytes they and the trace take."""
    log_bytes = sum(len(dumps(r)) for r in records)
    trace_room = min(MAX_TRACE_BYTES, max(room, TRACE_FLOOR_BYTES))
    trace_bytes = len(dumps(trace))
    if trace_bytes + log_bytes > room or trace_bytes > trace_room:
        for entry in trace.get("steps") or []:
            entry["full_output"] = entry.get("output", "")
        trace["full_outputs_dropped"] = "over the turn's recorded_bytes budget"
        trace_bytes = len(dumps(trace))
    kept: list[dict[str, Any]] | None = records
    if trace_bytes + log_bytes > room:
        trace["replay"] = {
            "available": False,
            "error": f"the replay log ({log_bytes:,} bytes) is over the turn's recorded_bytes budget",
        }
        kept, log_bytes = None, 0
    if trace_bytes > trace_room:
        _trim(trace)
        trace_bytes = len(dumps(trace))
    return kept, trace_bytes + log_bytes


def _trim(trace: TraceDocument) -> None:
    """Cut a trace that is still too large to its summary and short steps."""
    cut = TRIMMED_STEP_CHARS
    for entry in trace.get("steps") or []:
        texts: list[tuple[dict[str, Any], str]] = [
            (entry, n) for n in ("output", "full_output", "commentary")
        ]
        if isinstance(entry.get("code"), dict):
            texts += [(entry["code"], n) for n in entry["code"]]
        for holder, name in texts:
            if isinstance(holder.get(name), str) and len(holder[name]) > cut:
                holder[name] = holder[name][:cut] + f"\n[trimmed to {cut:,} characters]"
        for call in entry.get("calls") or []:
            if isinstance(call, dict):
                call.pop("result", None)
                if isinstance(call.get("args"), str):
                    call["args"] = call["args"][:200]
    evidence = trace.get("evidence") or []
    trace["evidence"] = evidence[:100]
    trace["trimmed"] = (
        f"over the trace's size cap: step code and output cut to {cut:,} characters, call results dropped, "
        f"{max(0, len(evidence) - 100):,} of {len(evidence):,} evidence entries dropped"
    )
