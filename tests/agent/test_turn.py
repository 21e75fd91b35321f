"""The turn end to end with a scripted model: the loop, the real sandbox over the compiled sample
corpus, synthesis, citation verification, the stored Query, events and trace."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import ValidationError

from sleuth.agent.turn import TurnError, TurnRequest
from sleuth.models.base import ModelError
from sleuth.models.scripted import code, final_call
from tests.agent.support import RuntimeFactory

SEARCH_REMOTE = (
    "hits = await search_source('how many days per week can employees work remotely', top_k=5)\n"
    "for h in hits[:3]:\n"
    "    print(h.ref, h.name, h.fields['chunk_text'][:300])\n"
)
MODEL = "openai:gpt-test"


def _answer(query: Any) -> str:
    return str(query.answer)


def test_multi_step_turn_answers_with_verified_citations(make_runtime: RuntimeFactory) -> None:
    runtime = make_runtime(
        [
            code("tables = list_tables()\nprint([t.name for t in tables])", "Look at the tables"),
            code(SEARCH_REMOTE, "Search the remote-work policy"),
            final_call(evidence=["E1"]),
            "Employees may work remotely up to three days per week [1].",
        ]
    )
    events: list[dict[str, Any]] = []
    query = runtime.ask(
        TurnRequest(ask="How many days a week can I work from home?", scope=["acme"], model=MODEL),
        events.append,
    )
    assert query.status == "completed", query.error
    assert query.rollup is not None and query.rollup.stop_reason == "final"
    assert [s.status for s in query.steps] == ["completed", "completed"]
    assert query.steps[0].fns == ["list_tables"] and query.steps[1].fns == ["search_source"]
    assert query.steps[1].strategy.kind == "chunks_first"
    assert "E1" in (query.steps[1].output or "")
    assert _answer(query) == "Employees may work remotely up to three days per week [1]."
    [citation] = query.citations
    assert citation.source.endswith(("remote-work-policy.md", "employee-handbook.docx"))
    assert citation.kind == "chunk" and citation.pages == [1]
    page = runtime.db.get_trace(query.id)
    assert page is not None
    # every grounding is a verbatim slice of the stored page text
    from sleuth.store.version.search import VersionReader

    home = runtime.home
    ctx = home.find("acme")
    reader = VersionReader(ctx.version_dir(ctx.live_version() or ""))
    text = reader.page_text(citation.source, 1) or ""
    assert text[citation.start : citation.end] == citation.grounding
    assert "three days" in citation.grounding
    # events in the documented order
    kinds = [e["type"] for e in events]
    assert kinds[0] == "response.created"
    assert kinds[1:5] == ["response.step"] * 4
    assert [e["status"] for e in events[1:5]] == ["running", "completed", "running", "completed"]
    assert kinds[5:] == [
        "response.output_text.delta",
        "response.turn_rollup",
        "response.synthesis",
        "response.trace",
        "response.completed",
    ]
    stored = runtime.db.events(query.id)
    assert [e["type"] for e in stored] == kinds
    assert [e["seq"] for e in stored] == list(range(1, len(kinds) + 1))
    assert runtime.db.get_query(query.id)["status"] == "completed"  # type: ignore[index]
    # the synthesis call saw the evidence, not the corpus, and usage was counted
    synthesis_call = runtime.scripted.calls[-1]  # type: ignore[attr-defined]
    prompt = synthesis_call.messages[-1].content
    assert "[1] (" in prompt and "three days" in prompt
    assert query.usage.input_tokens > 0 and query.synthesis is not None
    assert query.synthesis.method == "model" and query.synthesis.tokens_in > 0


def test_the_trace_marks_the_evidence_the_answer_cites(make_runtime: RuntimeFactory) -> None:
    """`cited` in the trace's evidence table was always false: nothing set it."""
    runtime = make_runtime(
        [code(SEARCH_REMOTE), final_call(evidence=["E1", "E2"]), "Up to three days per week [1]."]
    )
    query = runtime.ask(TurnRequest(ask="How many remote days?", scope=["acme"], model=MODEL), lambda e: None)
    assert query.status == "completed", query.error
    trace = runtime.db.get_trace(query.id)
    assert trace is not None
    marks = {e["ref"]: (e["seen"], e["cited"]) for e in trace["evidence"]}
    assert marks["E1"] == (True, True) and marks["E2"] == (True, False)
    assert len(query.citations) == 1


def test_truncated_output_reaches_the_model_with_the_notice(make_runtime: RuntimeFactory) -> None:
    runtime = make_runtime([code("print('x' * 500)"), final_call(), "Nothing relevant was found."])
    query = runtime.ask(
        TurnRequest(ask="print a lot", scope=["acme"], model=MODEL, max_tool_output_chars=100)
    )
    step = query.steps[0]
    assert step.output_truncated is True and step.output_chars == 501
    assert step.output == "x" * 100 + "\n[truncated: showing 100 of 501 chars]"
    seen = runtime.scripted.calls[1].messages[-1]  # type: ignore[attr-defined]
    assert seen.role == "tool" and seen.content == step.output
    trace = runtime.db.get_trace(query.id)
    assert trace is not None and trace["steps"][0]["full_output"] == "x" * 500 + "\n"


def test_step_cap_ends_the_loop_and_still_synthesizes(make_runtime: RuntimeFactory) -> None:
    runtime = make_runtime([code(SEARCH_REMOTE), code("print(1)"), "Up to three days a week [1]."])
    query = runtime.ask(TurnRequest(ask="remote days?", scope=["acme"], model=MODEL, max_steps=2))
    assert query.status == "completed"
    assert query.rollup is not None and query.rollup.stop_reason == "max_steps"
    assert len(query.steps) == 2
    assert query.citations and "three days" in query.citations[0].grounding


def test_errors_are_fed_back_and_three_in_a_row_end_the_loop(make_runtime: RuntimeFactory) -> None:
    runtime = make_runtime(
        [
            code("rows = query_db('SELECT nope FROM product')"),
            code("search_source = 1"),
            code("1/0"),
            "I could not find it.",
        ]
    )
    query = runtime.ask(TurnRequest(ask="anything", scope=["acme"], model=MODEL))
    assert query.status == "completed"
    assert [s.status for s in query.steps] == ["failed", "failed", "failed"]
    assert query.rollup is not None and query.rollup.stop_reason == "errors"
    first = query.steps[0].output or ""
    assert "QueryError" in first and "search_source" in first  # the schema and the tip come back
    second = query.steps[1]
    assert second.error is not None and second.error["type"] == "StepRejected"
    assert "reserved" in (second.output or "") and not second.tool_calls
    assert "ZeroDivisionError" in (query.steps[2].output or "")
    # the model saw each error as the observation of its step
    messages = runtime.scripted.calls[1].messages  # type: ignore[attr-defined]
    assert "QueryError" in messages[-1].content


def test_a_step_past_its_timeout_fails_and_the_turn_goes_on(make_runtime: RuntimeFactory) -> None:
    runtime = make_runtime(
        [
            code("import time\nwhile True:\n    time.sleep(0.05)"),
            code(SEARCH_REMOTE),
            final_call(),
            "Three [1].",
        ]
    )
    query = runtime.ask(TurnRequest(ask="remote days", scope=["acme"], model=MODEL))
    assert query.status == "completed"
    assert query.steps[0].status == "failed" and query.steps[0].error is not None
    assert "time" in query.steps[0].error["message"].lower()
    assert query.steps[1].status == "completed"


def test_turn_timeout_stops_the_loop_early(make_runtime: RuntimeFactory) -> None:
    # Five 2 s steps against a 5 s budget: room for a sandbox that starts slowly on a loaded machine (a 1 s
    # budget failed a turn that had not begun its first step), and still stopped before the fifth.
    steps = [code(f"import time\ntime.sleep(2)\nprint('ok', {i})") for i in range(5)]  # none a repeat
    runtime = make_runtime([*steps, "Nothing found."])
    query = runtime.ask(TurnRequest(ask="slow", scope=["acme"], model=MODEL, timeout_seconds=5))
    assert query.status == "completed"
    assert query.rollup is not None and query.rollup.stop_reason == "timeout"
    assert len(query.steps) < 5


def test_text_protocol_fenced_code_and_reply_without_code(make_runtime: RuntimeFactory) -> None:
    runtime = make_runtime(
        [code(SEARCH_REMOTE, "Search"), "Up to three days a week, per the policy.", "Three days a week [1]."],
        protocol="text",
    )
    query = runtime.ask(TurnRequest(ask="remote days", scope=["acme"], model=MODEL))
    assert query.status == "completed"
    assert query.rollup is not None and query.rollup.stop_reason == "no_tool_call"
    assert query.steps[0].commentary == "Search"
    assert query.citations
    first_prompt = runtime.scripted.calls[0]  # type: ignore[attr-defined]
    assert first_prompt.tools == []
    assert "```python" in first_prompt.messages[0].content  # the text protocol is explained


def test_forged_marker_and_bad_numbers_never_reach_the_answer(make_runtime: RuntimeFactory) -> None:
    runtime = make_runtime(
        [code(SEARCH_REMOTE), final_call(evidence=["E1"]), "Three days [1][7]. See [2024]."]
    )
    query = runtime.ask(TurnRequest(ask="remote days", scope=["acme"], model=MODEL))
    assert _answer(query) == "Three days [1]. See (2024)."
    assert len(query.citations) == 1


def test_every_model_failing_fails_the_turn_without_raising(make_runtime: RuntimeFactory) -> None:
    runtime = make_runtime([ModelError("provider down", retryable=False)])
    query = runtime.ask(TurnRequest(ask="anything", scope=["acme"], model=MODEL))
    assert query.status == "failed" and "provider down" in (query.error or "")
    events = [e["type"] for e in runtime.db.events(query.id)]
    assert events[-1] == "response.failed" and "response.trace" in events
    assert runtime.db.get_trace(query.id) is not None


def test_synthesis_failure_degrades_to_extractive(make_runtime: RuntimeFactory) -> None:
    runtime = make_runtime([code(SEARCH_REMOTE), final_call(evidence=["E1"]), ModelError("synthesis down")])
    query = runtime.ask(
        TurnRequest(ask="How many days per week can employees work remotely?", scope=["acme"], model=MODEL)
    )
    assert query.status == "completed"
    assert query.synthesis is not None
    assert (query.synthesis.status, query.synthesis.method) == ("degraded", "extractive")
    assert "three days" in _answer(query) and query.citations


def test_bad_requests_are_rejected_before_the_turn(make_runtime: RuntimeFactory) -> None:
    runtime = make_runtime([])
    cases = [
        (TurnRequest(ask="  ", scope=["acme"]), "invalid_request"),
        (TurnRequest(ask="q"), "scope_required"),
        (TurnRequest(ask="q", scope=["nope"]), "context_not_found"),
        (TurnRequest(ask="q", scope=["acme"], model="no-such-model"), "model_unavailable"),
        (TurnRequest(ask="q", scope=["acme"], tools=["rm_rf"]), "unknown_tool"),
        (TurnRequest(ask="q", scope=["acme"], shape={"type": "object", "oneOf": []}), "invalid_shape"),
        (TurnRequest(ask="q", session_id="ses_missing"), "session_not_found"),
    ]
    for request, expected in cases:
        with pytest.raises(TurnError) as info:
            runtime.prepare(request)
        assert info.value.code == expected
    with pytest.raises(ValidationError):  # a range is the contract's: refused when the request is built
        TurnRequest(ask="q", scope=["acme"], max_tool_output_chars=0)


def test_disabled_tools_are_refused_with_a_hint(make_runtime: RuntimeFactory) -> None:
    runtime = make_runtime([code("print(walk_graph('x'))"), final_call(), "Nothing."])
    query = runtime.ask(TurnRequest(ask="q", scope=["acme"], model=MODEL, tools=["search_source"]))
    assert "`walk_graph` is not enabled" in (query.steps[0].output or "")
    assert "def walk_graph" not in runtime.scripted.calls[0].messages[0].content  # type: ignore[attr-defined]
