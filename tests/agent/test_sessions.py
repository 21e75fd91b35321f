"""Sessions (spec/runtime.md §9): history, pinning, instruction layering, one turn in flight; shapes with
per-field grounding (§8.5); deterministic replay (§11)."""

from __future__ import annotations

import pytest

from sleuth.agent.replay import ReplayError, replay
from sleuth.agent.turn import TurnError, TurnRequest
from sleuth.api.errors import TURN_ERROR_STATUS
from sleuth.models.scripted import code, final_call
from tests.agent.support import RuntimeFactory

MODEL = "openai:gpt-test"
PRICE = (
    "rows = query_db(\"SELECT sku, name, price_usd, _provenance FROM product WHERE sku = 'TX-9'\")\n"
    "print(rows)\n"
    "hits = await search_source_by_keyword('TX-9', top_k=3)\n"
    "for h in hits:\n"
    "    print(h.ref, h.name, h.fields['chunk_text'][:200])\n"
)


def test_session_history_pinning_and_instructions(make_runtime: RuntimeFactory) -> None:
    runtime = make_runtime(
        [
            code(PRICE, "Look up TX-9"),
            final_call(),
            "The TX-9 costs $689.00 [1].",
            code(PRICE, "Look again"),
            final_call(),
            "It is sold in the catalog at $689.00 [1].",
        ]
    )
    first = runtime.ask(
        TurnRequest(
            ask="What does the TX-9 cost?",
            scope=["acme"],
            model=MODEL,
            system_prompt="Answer in one sentence.",
            guardrails="Never guess prices.",
        )
    )
    assert first.status == "completed", first.error
    assert first.citations and "689" in first.citations[0].grounding
    orientation = runtime.scripted.calls[0].messages[0].content  # type: ignore[attr-defined]
    # the context's own instructions come first, the session prompt is appended, then guardrails
    acme = orientation.index("Acme Instruments staff")
    session = orientation.index("Answer in one sentence.")
    guard = orientation.index("## Guardrails\nNever guess prices.")
    assert acme < session < guard

    second = runtime.ask(
        TurnRequest(
            ask="And is it in the catalog?",
            session_id=first.session_id,
            system_prompt="Ignored on a later turn",
            scope=["other"],
        )
    )
    assert second.status == "completed", second.error
    assert second.previous_query_id == first.id and second.session_id == first.session_id
    call = runtime.scripted.calls[3]  # type: ignore[attr-defined]
    assert call.messages[0].content == orientation  # blocks A and B are byte-identical across turns
    roles = [m.role for m in call.messages[:4]]
    assert roles == ["system", "user", "assistant", "user"]
    assert call.messages[1].content == "What does the TX-9 cost?"
    assert "The TX-9 costs $689.00 [1]." in call.messages[2].content
    assert "Sources: [1] uploads/acme-corpus/" in call.messages[2].content
    trace = runtime.db.get_trace(second.id)
    assert trace is not None and trace["ignored_fields"] == ["scope", "system_prompt"]
    # the synthesis of the follow-up also sees the history and the instructions
    synthesis = runtime.scripted.calls[5]  # type: ignore[attr-defined]
    assert "Answer in one sentence." in synthesis.messages[0].content
    assert any(m.content == "What does the TX-9 cost?" for m in synthesis.messages)


def test_one_turn_in_flight_per_session(make_runtime: RuntimeFactory) -> None:
    runtime = make_runtime([final_call(), "Nothing found.", final_call(), "Nothing."])
    first = runtime.ask(TurnRequest(ask="q1", scope=["acme"], model=MODEL))
    prepared = runtime.prepare(TurnRequest(ask="q2", session_id=first.session_id))
    with pytest.raises(TurnError) as info:
        runtime.prepare(TurnRequest(ask="q3", session_id=first.session_id))
    assert info.value.code == "session_busy" and TURN_ERROR_STATUS[info.value.code] == 409
    done = runtime.run(prepared)
    assert done.status == "completed"
    again = runtime.prepare(TurnRequest(ask="q4", session_id=first.session_id))  # released again
    assert again.query.previous_query_id == done.id


SHAPE = {
    "type": "object",
    "properties": {"sku": {"type": "string"}, "price": {"type": "number"}},
    "required": ["sku", "price"],
    "additionalProperties": False,
}


def test_shape_document_is_validated_repaired_and_grounded(make_runtime: RuntimeFactory) -> None:
    runtime = make_runtime(
        [
            code(PRICE),
            final_call(),
            '{"answer": "TX-9 costs $689 [1].", "data": {"sku": "TX-9", "price": "689"}, "grounding": {}}',
            '```json\n{"answer": "TX-9 costs $689 [1].", "data": {"sku": "TX-9", "price": 689.0},'
            ' "grounding": {"/price": [1], "/sku": [1], "/missing": [1]}}\n```',
        ]
    )
    query = runtime.ask(TurnRequest(ask="TX-9 price?", scope=["acme"], model=MODEL, shape=SHAPE))
    assert query.status == "completed", query.error
    assert query.output_json == {"sku": "TX-9", "price": 689.0}
    assert query.output_grounding == {"/price": [1], "/sku": [1]}
    assert query.citations and "689" in query.citations[0].grounding
    repair = runtime.scripted.calls[3].messages[-1].content  # type: ignore[attr-defined]
    assert "/price" in repair and "did not match" in repair


def test_shape_still_invalid_after_repair_fails_the_turn(make_runtime: RuntimeFactory) -> None:
    bad = '{"answer": "x", "data": {"sku": 9}}'
    runtime = make_runtime([final_call(), bad, bad])
    query = runtime.ask(TurnRequest(ask="TX-9 price?", scope=["acme"], model=MODEL, shape=SHAPE))
    assert query.status == "failed"
    assert (query.error or "").startswith("output did not match shape:")


def test_replay_reproduces_a_turn_and_finds_a_difference(make_runtime: RuntimeFactory) -> None:
    runtime = make_runtime([code(PRICE, "Look up TX-9"), final_call(), "The TX-9 costs $689.00 [1]."])
    query = runtime.ask(TurnRequest(ask="What does the TX-9 cost?", scope=["acme"], model=MODEL))
    assert query.status == "completed"
    report = replay(runtime.home, query.id, db=runtime.db)
    assert report == {"identical": True, "steps_compared": 1, "first_difference": None}
    # tamper with the stored trace: replay reports the first difference
    trace = runtime.db.get_trace(query.id)
    assert trace is not None
    trace["steps"][0]["output"] = "something else"
    runtime.db.save_trace(query.id, trace)
    report = replay(runtime.home, query.id, db=runtime.db)
    assert report["identical"] is False
    assert report["first_difference"]["field"] == "output"
    assert report["first_difference"]["step_id"] == "step_1"
    with pytest.raises(ReplayError):
        replay(runtime.home, "qry_00000000-0000-0000-0000-000000000000", db=runtime.db)
