"""A loop that notices itself (issue 46): code already run in the turn is not run again, the model is
told where its output is, repeats end the loop into synthesis from the evidence held, and a search asked
again is answered from the turn's memory. A scripted model plays the small model that spun eight times
on one search in a real run; the loop, the sandbox and synthesis are real."""

from __future__ import annotations

from sleuth.agent.repeats import code_key, repeat_notice
from sleuth.agent.turn import TurnRequest
from sleuth.models.scripted import code, final_call
from tests.agent.support import RuntimeFactory

MODEL = "openai:gpt-test"
ASK = "How many days a week can employees work remotely?"
SEARCH = (
    "hits = await search_source('remote work policy', top_k=5)\n"
    "for h in hits:\n"
    "    print(h.ref, h.fields['chunk_text'][:120])\n"
)
#: The same step as a model rewrites it: a comment, other spacing, another quote mark.
SEARCH_AGAIN = (
    "# look again\n"
    'hits = await search_source("remote work policy", top_k = 5)\n\n'
    "for h in hits:\n"
    "    print(h.ref,  h.fields['chunk_text'][:120])\n"
)


def test_the_same_code_twice_is_not_run_and_repeats_end_the_loop_into_synthesis(
    make_runtime: RuntimeFactory,
) -> None:
    runtime = make_runtime(
        [
            code(SEARCH, "Search the policy"),
            code(SEARCH_AGAIN, "Search again"),
            code(SEARCH, "And again"),
            "Employees may work remotely with their manager's approval [1].",  # synthesis, from what is held
        ]
    )
    query = runtime.ask(TurnRequest(ask=ASK, scope=["acme"], model=MODEL, max_steps=8))
    assert query.status == "completed", query.error
    assert query.rollup is not None and query.rollup.stop_reason == "repeated"
    first, second, third = query.steps
    assert first.status == "completed" and first.fns == ["search_source"]
    for repeat in (second, third):
        assert repeat.status == "failed" and repeat.fns == [] and repeat.tool_calls == []
        assert repeat.error == {"type": "StepRepeated", "message": "the code of step 1, run again"}
        assert repeat.output is not None and repeat.output.startswith(
            "Step not run: you ran this same code in step 1"
        )
    assert "E1–E5" in (second.output or "")
    # The model read the notice in place of an output (what it is sent next holds it).
    sent = runtime.scripted.calls[2].messages  # type: ignore[attr-defined]
    assert any("you ran this same code in step 1" in m.content for m in sent)
    assert query.synthesis is not None and query.synthesis.method == "model"
    assert "approval [1]" in query.answer and len(query.citations) == 1


def test_a_search_asked_again_in_other_code_is_answered_from_the_turns_memory(
    make_runtime: RuntimeFactory,
) -> None:
    runtime = make_runtime(
        [
            code(SEARCH, "Search the policy"),
            code(
                "again = await search_source('remote work policy', top_k=5)\nprint(len(again), again[0].ref)"
            ),
            final_call(),
            "Employees may work remotely up to three days per week [1].",
        ]
    )
    query = runtime.ask(TurnRequest(ask=ASK, scope=["acme"], model=MODEL))
    assert query.status == "completed", query.error
    first, second = query.steps[:2]
    assert "remembered" not in first.tool_calls[0].result
    assert second.tool_calls[0].result["remembered"] is True
    assert second.tool_calls[0].result["hits"] == first.tool_calls[0].result["hits"]
    assert second.output is not None and second.output.split() == ["5", "E1"]  # the same hits, same labels


def test_code_is_compared_as_python_reads_it() -> None:
    assert code_key(SEARCH) == code_key(SEARCH_AGAIN)
    assert code_key(SEARCH) != code_key(SEARCH.replace("top_k=5", "top_k=6"))
    assert code_key("print(") == code_key("print(  ")  # no syntax: the collapsed text
    assert repeat_notice(2, "E1 a\nE2 b\nE3 c\nE7 d").startswith(
        "Step not run: you ran this same code in step 2; its output (E1–E3, E7) is above."
    )
