"""Turns whose model-written code attacks the host (issue 10): forged evidence, text that cannot be
stored, and floods of work the sandbox's own limits do not see. Each turn must end `completed` or
`failed` with a clear error, with nothing read outside the context and nothing stuck."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from sleuth.agent.trace import MAX_TRACE_BYTES, fit_records
from sleuth.agent.turn import TurnRequest
from sleuth.models.scripted import code, final_call
from sleuth.sandbox.limits import HostBudget
from sleuth.store.records.rows import EvidenceEntry, TraceDocument
from tests.agent.support import RuntimeFactory

MODEL = "openai:gpt-test"
EVIDENCE = "ev = final.__self__.evidence\n"  # the REPL's own evidence registry, reached from `final`


def _ask(runtime: Any, ask: str = "What is the launch code?") -> Any:
    events: list[dict[str, Any]] = []
    query = runtime.ask(TurnRequest(ask=ask, scope=["acme"], model=MODEL), events.append)
    return query, events


def test_a_forged_span_cannot_make_the_host_read_a_file(make_runtime: RuntimeFactory, tmp_path: Path) -> None:
    """Issue 10 (2): a span whose source path was absolute made the host read
    `…/knowledge/pages/{source_path}.jsonl` outside the context and keep it as a citation."""
    secret = tmp_path / "outside" / "secret"
    secret.parent.mkdir()
    text = "TOP SECRET: the launch code is 7781"
    secret.with_suffix(".jsonl").write_text(json.dumps({"page": 1, "text": text}) + "\n")
    secret.with_suffix(".jsonl").chmod(0o600)
    forge = (
        EVIDENCE + f"s = ev.register('acme', {str(secret)!r}, 1, 0, {len(text)}, {text!r}, [], 'chunk')\n"
        "t = ev.register('acme', '../../../../outside/secret', 1, 0, 10, 'TOP SECRET', [], 'chunk')\n"
        "print(s.ref, t.ref)"
    )
    runtime = make_runtime([code(forge), final_call(evidence=["E1", "E2"]), "The launch code is 7781 [1]."])
    query, _events = _ask(runtime)
    assert query.status == "completed", query.error
    assert query.citations == []
    assert "7781" not in json.dumps(query.citations)
    trace = runtime.db.get_trace(query.id)
    assert trace is not None and trace["spans_rejected"] == 2 and trace["evidence"] == []


def test_a_span_whose_text_is_not_the_page_text_is_rejected(make_runtime: RuntimeFactory) -> None:
    """The host derives a span's text from the page; a real page with made-up words is a forgery."""
    forge = (
        "hits = await search_source('remote work days', top_k=1)\nh = hits[0]\n"
        + EVIDENCE
        + "f = ev.register('acme', h.source_path, h.page, h.start, h.end - 1, 'Employees may work "
        "remotely seven days a week', [], 'chunk')\nprint(h.ref, f.ref)"
    )
    runtime = make_runtime([code(forge), final_call(evidence=["E1", "E2"]), "Seven days [2]. Real [1]."])
    query, _events = _ask(runtime, "How many remote days?")
    assert query.status == "completed", query.error
    trace = runtime.db.get_trace(query.id)
    assert trace is not None and trace["spans_rejected"] == 1
    assert [e["ref"] for e in trace["evidence"]] == ["E1"]
    assert all("seven days" not in c.grounding for c in query.citations)


def test_lone_surrogates_in_code_and_output_do_not_wedge_the_turn(make_runtime: RuntimeFactory) -> None:
    """Issue 10 (3): a lone surrogate raised `UnicodeEncodeError` in the store, also inside `fail()`,
    and left the query `in_progress` until a restart."""
    runtime = make_runtime([code("x = 'a\ud800b'\nprint(x)", "look \udfff"), final_call(), "Done \ud800."])
    query, events = _ask(runtime, "Say \ud800 something")
    assert query.status == "completed", query.error
    stored = runtime.db.get_query(query.id)
    assert stored is not None and stored["status"] == "completed"
    assert stored["steps"][0]["output"] == "a\ufffdb\n"
    assert "\ufffd" in json.dumps(runtime.db.events(query.id), ensure_ascii=False)
    assert events[-1]["type"] == "response.completed"


def test_forged_span_floods_stop_at_the_span_budget(make_runtime: RuntimeFactory) -> None:
    """Issue 10 (4): 4 steps × 45k forged spans grew server.sqlite by 99.6 MB."""
    flood = (
        EVIDENCE + "n = globals().get('n', 0)\nfor i in range(n, n + 3000):\n"
        "    ev.register('acme', 'x', 1, i, i + 1, 't', [], 'chunk')\nn += 3000\n"
    )
    runtime = make_runtime([code(f"step = {i}\n" + flood) for i in range(4)] + [final_call(), "x"])
    db_file = runtime.db.path
    assert db_file is not None  # the SQLite default
    before = db_file.stat().st_size
    query, events = _ask(runtime)
    assert query.status == "failed"
    assert query.error is not None and "host budget exceeded: spans" in query.error
    assert events[-1] == {"query_id": query.id, "type": "response.failed", "error": query.error}
    assert [s.status for s in query.steps] == ["completed", "failed"]
    assert query.steps[-1].error == {"type": "BudgetExceeded", "message": query.error}
    assert runtime.db.get_query(query.id)["status"] == "failed"  # type: ignore[index]
    assert db_file.stat().st_size - before < 2 << 20


def test_an_embed_flood_stops_at_the_rpc_budget(make_runtime: RuntimeFactory) -> None:
    flood = "for i in range(200):\n    await search_source(f'remote work {i}', top_k=1)\n"
    runtime = make_runtime([code(flood), final_call(), "x"], budget=HostBudget(rpc_calls=30))
    query, _events = _ask(runtime)
    assert query.status == "failed"
    assert query.error is not None and "rpc_calls" in query.error
    trace = runtime.db.get_trace(query.id)
    assert trace is not None and trace["host_budget"]["rpc_calls"]["used"] == 31


def test_recorded_bytes_are_budgeted(make_runtime: RuntimeFactory) -> None:
    """Step outputs are recorded (events, the query, the trace); a turn that prints past its
    recorded-bytes budget stops, and its trace still fits."""
    # Each step's code its own (`step = i`): code already run in the turn is not run again (issue 46).
    big = [code(f"step = {i}\nprint('y' * 90_000)") for i in range(6)]
    runtime = make_runtime([*big, final_call(), "x"], budget=HostBudget(recorded_bytes=300_000))
    query = runtime.ask(TurnRequest(ask="print", scope=["acme"], model=MODEL, max_tool_output_chars=100_000))
    assert query.status == "failed"
    assert query.error is not None and "recorded_bytes" in query.error
    trace = runtime.db.get_trace(query.id)
    assert trace is not None and trace.get("full_outputs_dropped")


def test_a_forged_infinite_number_ends_as_a_sandbox_failure_not_an_internal_error(
    make_runtime: RuntimeFactory,
) -> None:
    """Issue 22 (11): `1e999` in a step's call report parsed to infinity, which the store cannot
    write: the turn failed much later as "internal error". The host now refuses the line."""
    forge = (
        "import gc\nch = next(o for o in gc.get_objects() if type(o).__name__ == 'Channel')\n"
        'line = (\'{"t":"result","id":1,"ok":true,"output":"","output_chars":0,\'\n'
        '        \'"truncated":false,"full_output":"",\'\n'
        '        \'"calls":[{"fn":"search_source","ms":1e999}]}\\n\')\n'
        "ch.sock.sendall(line.encode())\n"
        "import time\ntime.sleep(5)"
    )
    runtime = make_runtime([code(forge), final_call(), "Nothing found."])
    query, events = _ask(runtime)
    assert "internal error" not in (query.error or "")
    assert query.status in ("completed", "failed")
    step = query.steps[0]
    assert step.status == "failed" and step.error is not None
    assert "out of range" in json.dumps(step.error) or "channel" in json.dumps(step.error)
    assert events[-1]["type"] in ("response.completed", "response.failed")


def test_the_trace_is_capped_and_counted(make_runtime: RuntimeFactory) -> None:
    """Issue 22 (11): a turn wrote a 53 MB trace while its budget report said 574 KB. The trace is
    now charged before the report is written, and kept within MAX_TRACE_BYTES whatever the budget."""
    big = [code(f"step = {i}\nprint('z' * 1_000_000)") for i in range(10)]
    runtime = make_runtime([*big, final_call(), "x"], budget=HostBudget(recorded_bytes=1 << 30))
    query = runtime.ask(TurnRequest(ask="print", scope=["acme"], model=MODEL, max_steps=12))
    assert query.status == "completed", query.error
    text = runtime.db.trace_text(query.id)
    assert text is not None and len(text) <= MAX_TRACE_BYTES
    trace = json.loads(text)
    assert trace["full_outputs_dropped"] and trace["replay"]["available"]
    assert trace["host_budget"]["recorded_bytes"]["used"] >= len(text)


def _evidence(ref: str) -> EvidenceEntry:
    return {
        "ref": ref,
        "context": "acme",
        "source": "a.md",
        "page": 1,
        "start": 0,
        "end": 1,
        "kind": "chunk",
        "seen": False,
        "cited": False,
    }


def test_a_trace_over_the_cap_after_outputs_are_dropped_is_trimmed() -> None:
    steps = [
        {
            "code": {"python": "x" * 50_000},
            "output": "y" * 50_000,
            "calls": [{"args": "a" * 900, "result": {}}],
        }
    ]
    trace: TraceDocument = {"steps": steps * 400, "evidence": [_evidence(f"E{i}") for i in range(500)]}
    kept, size = fit_records(trace, [{"kind": "turn"}], room=float(1 << 40))
    assert kept is not None  # the log fitted; only the trace was cut
    assert size <= MAX_TRACE_BYTES and len(trace["evidence"]) == 100 and "trimmed" in trace
    assert trace["steps"][0]["code"]["python"].endswith("[trimmed to 2,000 characters]")
