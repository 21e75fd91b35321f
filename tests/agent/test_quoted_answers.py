"""What an answer quotes beside `[n]` is what citation n proves, on every synthesis path (issue 22,
item 1): the offline planner's extractive answer, a model's synthesis, and the extractive fallback
when the model fails. A replayed offline turn is byte-identical (item 3)."""

from __future__ import annotations

import pytest

from sleuth.agent.records import Query
from sleuth.agent.replay import replay
from sleuth.agent.turn import Runtime, TurnRequest
from sleuth.models.base import ModelError
from tests.agent.support import RuntimeFactory, assert_quotes_are_groundings

HOTEL = "Hotel costs are capped at $220 per night, before tax, in most cities."
MADE_UP = "Staff may expense a hotel suite in any city without approval."


def assert_verified_quotes(query: Query) -> int:
    assert query.status == "completed", query.error
    return assert_quotes_are_groundings(query.answer, query.citations)


def ask_hotel_limit(runtime: Runtime) -> Query:
    """The hotel question through `search_rag`: two fixed steps, then the model's synthesis."""
    ask = "What is the hotel limit per night?"
    return runtime.ask(TurnRequest(ask=ask, scope=["acme"], model="openai:gpt-test", workflow="search_rag"))


@pytest.mark.parametrize(
    "ask",
    [
        "How many days a week can employees work remotely?",
        "What is the hotel limit per night when travelling?",
        "What does ERR-4012 mean?",
        "Who approves exceptions to the security policy?",
        "What drove growth in the Flow segment?",  # a figure question is stated, not quoted: test_offline
    ],
)
def test_offline_extractive_quotes_are_their_groundings(make_runtime: RuntimeFactory, ask: str) -> None:
    query = make_runtime().ask(TurnRequest(ask=ask, scope=["acme"]))
    assert query.synthesis is not None and query.synthesis.method == "extractive"
    assert assert_verified_quotes(query) >= 1


def test_model_synthesis_quotes_are_their_groundings(make_runtime: RuntimeFactory) -> None:
    """The model quotes a real sentence beside every marker it might need, and a made-up one: the
    real one keeps only the markers whose span holds it, the made-up one keeps none."""
    reply = f'The policy says "{HOTEL}" [1][2][3][4][5][6]. It also says "{MADE_UP}" [1][2][3].'
    runtime = make_runtime([reply])
    query = ask_hotel_limit(runtime)
    assert query.synthesis is not None and query.synthesis.method == "model"
    assert assert_verified_quotes(query) >= 1
    assert f'"{MADE_UP}".' in query.answer  # still there, but beside no marker
    assert any(c.grounding == HOTEL for c in query.citations)
    trace = runtime.db.get_trace(query.id)
    assert trace is not None
    reasons = {d["reason"] for d in trace["citations_dropped"]}
    assert "quote_not_in_evidence" in reasons


def test_degraded_synthesis_quotes_are_their_groundings(make_runtime: RuntimeFactory) -> None:
    runtime = make_runtime([ModelError("provider down", retryable=False)])
    query = ask_hotel_limit(runtime)
    assert query.synthesis is not None and query.synthesis.status == "degraded"
    assert assert_verified_quotes(query) >= 1


def test_offline_turn_replays_identically(make_runtime: RuntimeFactory) -> None:
    """The planner awaits several searches together; labels used to follow completion order."""
    runtime = make_runtime()
    query = runtime.ask(TurnRequest(ask="How many days a week can employees work remotely?", scope=["acme"]))
    for _ in range(3):
        report = replay(runtime.home, query.id, db=runtime.db)
        assert report["identical"], report
