"""Deterministic replay (spec/runtime.md §11): re-run a finished turn in a fresh sandbox with a scripted
model that returns the recorded responses and host functions that return the recorded results,
against the same pinned context versions, then compare step by step.

The replayed turn is stored in a scratch database, never in the user's sessions.
"""

from __future__ import annotations

import json
import tempfile
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from sleuth.agent.orientation import ContextBrief
from sleuth.agent.records import Query, query_document
from sleuth.agent.trace import args_digest
from sleuth.agent.turn import PreparedTurn, Runtime, TurnRequest, new_query_id
from sleuth.errors import Failed
from sleuth.models.base import ModelConfig, ModelError, Reply
from sleuth.models.scripted import ScriptedModel
from sleuth.sandbox.host import HostFunction
from sleuth.settings import TURN_CAP_SECONDS
from sleuth.store.contexts.home import ContextNotFound, Home
from sleuth.store.records.replay_log import read_replay_log
from sleuth.store.records.rows import QueryDocument, TraceDocument
from sleuth.store.records.server_db import ServerDB
from sleuth.store.version.info import has_version_info


class ReplayError(Failed):
    """Replay is impossible: no such query, no log, or its context version was collected."""

    def __init__(self, message: str, code: str = "replay_unavailable") -> None:
        super().__init__(message)
        self.code = code


class RecordedHost:
    """Host functions that answer from the log, in order per function; a call whose arguments differ
    from the recorded one is answered anyway and reported as a difference."""

    def __init__(self, records: list[dict[str, Any]]) -> None:
        self._queues: dict[str, list[dict[str, Any]]] = {}
        for record in records:
            self._queues.setdefault(str(record["fn"]), []).append(record)
        self.mismatches: list[dict[str, Any]] = []

    def registry(self, names: list[str]) -> dict[str, HostFunction]:
        return {name: self._function(name) for name in names}

    def _function(self, name: str) -> HostFunction:
        def answer(args: dict[str, Any]) -> Any:
            queue = self._queues.get(name) or []
            if not queue:
                raise RuntimeError(f"replay: no recorded result left for host function {name!r}")
            record = queue.pop(0)
            if "args_sha256" in record:  # a rejected call: only a digest of its arguments was kept
                same = record["args_sha256"] == args_digest(args)
            else:
                same = record.get("args") == args
            if not same:
                self.mismatches.append({"fn": name, "recorded": record.get("args"), "replayed": args})
            if not record.get("ok", True):
                raise RuntimeError(str(record.get("error")))
            return record.get("result")

        return answer


def replay(home: Home, query_id: str, db: ServerDB | None = None) -> dict[str, Any]:
    """Re-run `query_id` and return the ReplayReport of spec/api.md §8.6."""
    db = db or ServerDB.for_home(home)
    recorded_query = db.get_query(query_id)
    recorded_trace = db.get_trace(query_id)
    if recorded_query is None or recorded_trace is None:
        raise ReplayError(f"no finished turn {query_id!r} to replay", "query_not_found")
    try:
        records = read_replay_log(db.replay_root, query_id, db.storage)
    except (FileNotFoundError, ValueError) as exc:
        raise ReplayError(str(exc)) from None
    turn_record = next((r for r in records if r.get("kind") == "turn"), None)
    if turn_record is None:
        raise ReplayError(f"the replay log of {query_id} has no turn record")
    briefs = _pinned_briefs(home, turn_record["contexts"])
    replies: list[Reply | ModelError] = []
    for record in records:
        if record.get("kind") != "model":
            continue
        if record.get("reply") is not None:
            replies.append(Reply.from_json(record["reply"]))
        else:
            replies.append(ModelError(str(record.get("error")), retryable=False))
    model_info = turn_record["model"]
    scripted = ScriptedModel(replies, model_id=model_info["id"], tool_protocol=model_info["tool_protocol"])
    scripted.config = ModelConfig(
        id=model_info["id"],
        provider="scripted",
        model=model_info["id"],
        tool_protocol=model_info["tool_protocol"],
        prompt_profile=model_info.get("prompt_profile", "standard"),
        context_window=int(model_info.get("context_window", 128_000)),
    )
    host_records = [r for r in records if r.get("kind") == "host"]
    recorded_host = RecordedHost(host_records)
    planner = next((r for r in records if r.get("kind") == "planner"), None)
    request_data = turn_record["request"]
    with tempfile.TemporaryDirectory(prefix="sleuth-replay-") as scratch:
        scratch_db = ServerDB(Path(scratch) / "replay.sqlite", replay_root=Path(scratch))
        with Runtime(home, db=scratch_db) as runtime:
            names = sorted(runtime.sandbox_host.registry)
            first_model = turn_record["models"][0] if turn_record["models"] else model_info["id"]
            provider = "offline" if first_model == "sleuth/offline" else "scripted"
            configs = [ModelConfig(id=first_model, provider=provider, model=first_model)]  # type: ignore[arg-type]
            session = scratch_db.create_session(
                scope=list(turn_record["contexts"]),
                title=request_data["ask"][:80],
                system_prompt=request_data.get("system_prompt"),
                guardrails=request_data.get("guardrails"),
                models=[c.id for c in configs],
                tools=turn_record.get("tools"),
                workflow=turn_record.get("workflow") or "search",
            )
            query = Query(
                id=new_query_id(),
                session_id=session["id"],
                created=int(time.time()),
                input=[{"role": "user", "content": request_data["ask"]}],
                max_steps=turn_record.get("max_steps"),
                max_tool_output_chars=turn_record.get("max_tool_output_chars"),
            )
            scratch_db.claim_session(session["id"], query.id)
            scratch_db.insert_query(query_document(query))
            request = TurnRequest(
                ask=request_data["ask"],
                shape=request_data.get("shape"),
                max_steps=request_data.get("max_steps"),
                timeout_seconds=int(request_data.get("timeout_seconds") or TURN_CAP_SECONDS),
                max_tool_output_chars=request_data.get("max_tool_output_chars"),
                thinking_level=request_data.get("thinking_level"),
                **_retrieval_flags(request_data.get("retrieval")),
            )
            prepared = PreparedTurn(
                request=request,
                query=query,
                session=session,
                briefs=briefs,
                model_configs=configs,
                workflow=turn_record.get("workflow") or "search",
                model_override=scripted,
                registry_override=recorded_host.registry(names),
                request_replay={"planner": planner} if planner else None,
            )
            replayed = query_document(runtime.run(prepared))
            replayed_trace = scratch_db.get_trace(replayed["id"]) or {}
        scratch_db.close()
    return compare(recorded_query, recorded_trace, replayed, replayed_trace, recorded_host.mismatches)


def _retrieval_flags(data: dict[str, Any] | None) -> dict[str, Any]:
    """The request flags that give back a trace's recorded retrieval options (`RetrievalOptions`)."""
    if data is None:
        return {}
    kinds = tuple(data.get("kinds") or ())
    return {
        "retrieval_only": True,
        "pointers_only": bool(data.get("pointers_only")),
        "chunks_only": kinds == ("chunk",),
        "artifacts_only": kinds == ("artifact",),
        "max_retrieved": int(data.get("max_hits") or 20),
        "max_retrieved_chars": int(data.get("max_chars") or 2_000),
    }


def _pinned_briefs(home: Home, contexts: Mapping[str, str]) -> list[ContextBrief]:
    briefs = []
    for slug, version in contexts.items():
        try:
            context = home.find(slug)
        except (ContextNotFound, ValueError):
            raise ReplayError(f"context {slug!r} no longer exists", "version_unavailable") from None
        directory = context.version_dir(version)
        if not has_version_info(directory):
            raise ReplayError(
                f"version {version} of context {slug!r} was collected; replay refuses other data",
                "version_unavailable",
            )
        info = context.info()
        briefs.append(ContextBrief(info.slug, info.name, info.description, directory, version))
    return briefs


STEP_FIELDS = ("code", "output", "calls", "error")


def compare(
    recorded: QueryDocument,
    recorded_trace: TraceDocument,
    replayed: QueryDocument,
    replayed_trace: TraceDocument,
    host_mismatches: list[dict[str, Any]] | None = None,
) -> dict[str, Any]:
    """The first difference, step by step, then the answer, citations and `output_json`."""
    steps_a = recorded_trace.get("steps") or []
    steps_b = replayed_trace.get("steps") or []
    compared = 0
    for a, b in zip(steps_a, steps_b, strict=False):
        compared += 1
        for name in STEP_FIELDS:
            left, right = _step_field(a, name), _step_field(b, name)
            if left != right:
                return _report(False, compared, a.get("step_id"), name, left, right)
    if len(steps_a) != len(steps_b):
        return _report(False, compared, f"step_{compared + 1}", "steps", len(steps_a), len(steps_b))
    labels_a = [
        (e["ref"], e["source"], e["page"], e["start"], e["end"]) for e in recorded_trace.get("evidence") or []
    ]
    labels_b = [
        (e["ref"], e["source"], e["page"], e["start"], e["end"]) for e in replayed_trace.get("evidence") or []
    ]
    if labels_a != labels_b:
        return _report(False, compared, None, "evidence", labels_a, labels_b)
    for name in ("status", "output", "citations", "output_json", "output_grounding"):
        if recorded.get(name) != replayed.get(name):
            return _report(False, compared, None, name, recorded.get(name), replayed.get(name))
    if host_mismatches:
        m = host_mismatches[0]
        return _report(False, compared, None, f"host:{m['fn']}", m["recorded"], m["replayed"])
    return _report(True, compared, None, None, None, None)


def _step_field(step: dict[str, Any], name: str) -> Any:
    if name == "code":
        return (step.get("code") or {}).get("source")
    if name == "calls":
        # Calls gathered concurrently finish in any order: compare them as a sorted list.
        calls = [
            (c.get("fn"), c.get("args"), c.get("ok"), json.dumps(c.get("result"), sort_keys=True))
            for c in step.get("calls") or []
        ]
        return sorted(calls, key=repr)
    return step.get(name)


def _report(
    identical: bool, compared: int, step_id: str | None, field: str | None, recorded: Any, replayed: Any
) -> dict[str, Any]:
    difference = None
    if not identical:
        difference = {"step_id": step_id, "field": field, "recorded": recorded, "replayed": replayed}
    return {"identical": identical, "steps_compared": compared, "first_difference": difference}
