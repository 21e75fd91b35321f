"""The extractive answer never quotes boilerplate (issue 11, 2): a certification that shares the
question's words loses to the passage that answers, unless the question asks for the certification."""

from __future__ import annotations

from sleuth.agent.extractive import extractive_answer
from sleuth.agent.spans import EvidenceSpan

CERT = "I certify that the annual report fairly presents the revenue and financial condition of Alder."
FACT = "Alder revenue for the year was $12.5 million, up from $11.0 million."


def _span(ref: str, text: str) -> EvidenceSpan:
    return EvidenceSpan(
        ref=ref, context="acme", source_path=f"{ref}.pdf", page=1, start=0, end=len(text), text=text
    )


def test_boilerplate_spans_give_no_answer_sentence() -> None:
    evidence = [_span("E1", CERT), _span("E2", FACT)]
    shares = {"E1": 1.0, "E2": 0.0}

    def noise(span: EvidenceSpan) -> float:
        return shares[span.ref]

    plain = extractive_answer("What did the annual report say Alder revenue was?", evidence, None, ["acme"])
    assert plain.splitlines()[0].endswith("[1]")  # without the scores the certification wins
    answer = extractive_answer(
        "What did the annual report say Alder revenue was?", evidence, None, ["acme"], noise
    )
    assert "$12.5 million" in answer.splitlines()[0] and "certify" not in answer
    asked = extractive_answer(
        "What does the certification in the annual report say?",
        evidence,
        None,
        ["acme"],
        noise,
    )
    assert "certify" in asked


def test_a_quoted_sentence_runs_past_an_initialism() -> None:
    """An initialism ends no sentence (issue 43, item 3): the quote is the whole sentence, figure and all."""
    sentence = "Revenue from customers in the U.S. Government sector was $5.5 billion in fiscal 2023, up 4%."
    evidence = [_span("E1", sentence + " Other revenue fell.")]
    answer = extractive_answer("What was revenue from the U.S. Government sector?", evidence, None, ["acme"])
    assert f'"{sentence}" [1]' in answer
