"""A section the question names, answered without a model by its own outline (issue 45, section answers):
the sample corpus's remote work policy, read by the offline planner from the section structure the
compiler keeps on every chunk."""

from __future__ import annotations

from pathlib import Path

from sleuth.agent.planner_sections import section_answer, section_words
from sleuth.agent.request import TurnRequest
from tests.agent.support import RuntimeFactory
from tests.agent.test_offline import _check_citations

POLICY = "uploads/acme-corpus/policies/remote-work-policy.md"


def test_a_summary_is_the_sections_own_headings_each_with_its_opening_sentence_cited(
    make_runtime: RuntimeFactory, sample_version: Path
) -> None:
    query = make_runtime().ask(TurnRequest(ask="Summarize the remote work policy.", scope=["acme"]))
    assert query.status == "completed" and query.answer is not None, query.error
    head, *items = query.answer.splitlines()
    assert head == f"Remote Work Policy, in {POLICY} (p. 1), by its own headings and opening sentences:"
    assert 3 <= len(items) <= 6 and all(item.startswith("- ") and item.endswith("]") for item in items)
    assert (
        '- 1. Purpose: "Acme Instruments designs, assembles and calibrates laboratory sensors." [1]' in items
    )
    eligibility = next(item for item in items if item.startswith("- 2. Eligibility: "))
    assert "Employees may work remotely up to three days per week with manager approval." in eligibility
    assert query.synthesis is not None and query.synthesis.assurance == "section"
    _check_citations(query, sample_version)
    for item, citation in zip(items, query.citations, strict=False):  # each sentence is in what it cites
        sentence = item.split('"')[1].removesuffix(" …")
        assert citation.source == POLICY
        assert " ".join(citation.grounding.split()).startswith(" ".join(sentence.split())), (
            sentence,
            citation,
        )


def test_which_questions_ask_for_a_section() -> None:
    assert section_words("Summarize the risk factors.") == ("risk", "factor")
    assert section_words("What legal proceedings is Netflix involved in?") is not None
    assert section_words("Describe the travel policy") == ("travel", "policy")
    assert section_words("What was Netflix's revenue in 2017?") is None
    assert section_words("How many days a week can employees work remotely?") is None


def test_a_section_step_that_found_none_answers_with_the_search() -> None:
    assert section_answer({"heading": None, "where": None, "items": []}) is None
    assert section_answer({"heading": "Risk Factors", "where": "a.pdf", "items": [["E1", "", 7]]}) is None
    text, refs = section_answer(  # type: ignore[misc]
        {
            "heading": "Risk Factors",
            "where": "a.pdf",
            "pages": [5, 8],
            "items": [["E1", "", "Our stock may fall."]],
        }
    )
    assert (
        text == "Risk Factors, in a.pdf (pp. 5–8), by its own headings and opening sentences:\n"
        '- "Our stock may fall." [E1]'
    )
    assert refs == ["E1"]
