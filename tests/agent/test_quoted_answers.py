"""What an answer quotes beside `[n]` is what citation n proves, on every synthesis path (issue 22,
item 1): the offline planner's extractive answer, a model's synthesis, and the extractive fallback
when the model fails. A replayed offline turn is byte-identical (item 3)."""

from __future__ import annotations

import re
from collections.abc import Sequence

import pytest

from sleuth.agent.records import Citation, Query
from sleuth.agent.replay import replay
from sleuth.agent.turn import TurnRequest
from sleuth.models.base import ModelError
from tests.agent.support import RuntimeFactory

_QUOTED = re.compile(r"[\"“]([\s\S]{15,}?)[\"”]([^\"“”\[\]\n]{0,80}?)((?:\[\d+\])+)")
HOTEL = "Hotel costs are capped at $220 per night, before tax, in most cities."
MADE_UP = "Staff may expense a hotel suite in any city without approval."


def quotes_beside_markers(text: str, citations: Sequence[Citation]) -> list[tuple[str, str]]:
    """(quotation as shown, grounding of the citation beside it), whitespace collapsed, for every
    quotation followed by markers in its sentence."""
    pairs = []
    for m in _QUOTED.finditer(text):
        if re.search(r"[.!?]\s+\S", m.group(2)):
            continue
        body = m.group(1)
        cuts = [0, *(q.end() for q in re.finditer(r"[\"“”]", body))]
        for n in re.findall(r"\[(\d+)\]", m.group(3)):
            grounding = " ".join(citations[int(n) - 1].grounding.split())
            shown = next(
                (" ".join(body[c:].split()) for c in cuts if " ".join(body[c:].split()) == grounding), body
            )
            pairs.append((" ".join(shown.split()), grounding))
    return pairs


def assert_verified_quotes(query: Query) -> int:
    assert query.status == "completed", query.error
    pairs = quotes_beside_markers(query.answer, query.citations)
    for shown, grounding in pairs:
        assert shown == grounding
    return len(pairs)


@pytest.mark.parametrize(
    "ask",
    [
        "How many days a week can employees work remotely?",
        "What is the hotel limit per night when travelling?",
        "What does ERR-4012 mean?",
        "Who approves exceptions to the security policy?",
        "What was Acme's revenue in 2025?",
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
    query = runtime.ask(
        TurnRequest(ask="What is the hotel limit per night?", scope=["acme"], model="openai:gpt-test",
                    workflow="search_rag")
    )  # fmt: skip
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
    query = runtime.ask(
        TurnRequest(ask="What is the hotel limit per night?", scope=["acme"], model="openai:gpt-test",
                    workflow="search_rag")
    )  # fmt: skip
    assert query.synthesis is not None and query.synthesis.status == "degraded"
    assert assert_verified_quotes(query) >= 1


def test_offline_turn_replays_identically(make_runtime: RuntimeFactory) -> None:
    """The planner awaits several searches together; labels used to follow completion order."""
    runtime = make_runtime()
    query = runtime.ask(TurnRequest(ask="How many days a week can employees work remotely?", scope=["acme"]))
    for _ in range(3):
        report = replay(runtime.home, query.id, db=runtime.db)
        assert report["identical"], report
