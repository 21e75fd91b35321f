"""Claims held to what they cite (issue 46): a sentence whose facts its cited spans do not state loses
its markers and is reported unsupported, in prose, in a shaped answer and in an answer that cites
nothing; arithmetic on cited figures, the question's own terms and honest sentences pass. A model is
asked once to repair what was flagged, and its rewrite is kept only when it holds better.

The turns run over the compiled sample corpus with a scripted model (the one double: the replies are
what a small model wrote in a real run, "5 days [1]" over a span that never says 5); the loop, the
sandbox, synthesis and the checks are the real ones.
"""

from __future__ import annotations

import re

from sleuth.agent.citations import build_citations
from sleuth.agent.claims import check_claims, sentence_bounds, stating
from sleuth.agent.records import Query
from sleuth.agent.replay import replay
from sleuth.agent.spans import EvidenceSpan
from sleuth.agent.turn import TurnRequest
from sleuth.models.base import ModelError
from sleuth.models.scripted import code, final_call
from tests.agent.support import RuntimeFactory

MODEL = "openai:gpt-test"
ASK = "How many days a week can employees work remotely?"
SEARCH = (
    "hits = await search_source('remote work policy days per week', top_k=5)\n"
    "for h in hits[:5]:\n"
    "    print(h.ref, h.fields['chunk_text'][:300])\n"
)
#: Found by the search above: a span that says the rule, and one that a small model might cite instead.
RULE, OTHER = "up to three days per week", "home office allowance"


def _turn(make_runtime: RuntimeFactory, answer: str) -> tuple[Query, list[str]]:
    runtime = make_runtime([code(SEARCH, "Search the policy"), final_call(), answer])
    query = runtime.ask(TurnRequest(ask=ASK, scope=["acme"], model=MODEL))
    assert query.status == "completed", query.error
    trace = runtime.db.get_trace(query.id)
    assert trace is not None
    assert trace["unsupported"] == [u.model_dump(mode="json") for u in query.unsupported]
    return query, [d["reason"] for d in trace["citations_dropped"]]


def _label(make_runtime: RuntimeFactory, words: str) -> str:
    """The evidence label of the search hit whose text holds `words` (what the model would cite)."""
    runtime = make_runtime([code(SEARCH, "Search the policy"), final_call(), "Nothing. [E1]"])
    query = runtime.ask(TurnRequest(ask=ASK, scope=["acme"], model=MODEL))
    hits = re.split(r"\n(?=E\d+ )", query.steps[0].output or "")
    return next(hit for hit in hits if words in " ".join(hit.split())).split()[0]


def test_a_number_its_citation_lacks_loses_the_marker_and_the_sentence_is_flagged(
    make_runtime: RuntimeFactory,
) -> None:
    other = _label(make_runtime, OTHER)
    query, dropped = _turn(make_runtime, f"Employees can work remotely 5 days a week. [{other}]")
    assert query.answer == "Employees can work remotely 5 days a week."
    assert query.citations == []
    assert dropped == ["claim_not_in_evidence"]
    (flag,) = query.unsupported
    assert (flag.reason, flag.missing, flag.text) == (
        "claim_not_in_evidence",
        ["5"],
        "Employees can work remotely 5 days a week.",
    )
    assert query.answer[flag.start : flag.end] == flag.text


def test_the_same_sentence_citing_the_span_that_says_it_keeps_its_citation(
    make_runtime: RuntimeFactory,
) -> None:
    rule = _label(make_runtime, RULE)
    query, dropped = _turn(make_runtime, f"Employees can work remotely 3 days a week [{rule}].")
    assert len(query.citations) == 1 and "three days" in query.citations[0].grounding
    assert query.unsupported == [] and dropped == []


def test_an_answer_that_cites_nothing_is_flagged_not_returned_as_grounded(
    make_runtime: RuntimeFactory,
) -> None:
    query, _ = _turn(make_runtime, "Employees can work remotely 3 days a week.")
    (flag,) = query.unsupported
    assert flag.reason == "uncited" and flag.missing == ["3"]


def test_a_shaped_field_its_citation_lacks_is_flagged(make_runtime: RuntimeFactory) -> None:
    rule = _label(make_runtime, RULE)
    shape = {
        "type": "object",
        "properties": {"days": {"type": "integer"}},
        "required": ["days"],
        "additionalProperties": False,
    }
    # The prose states no figure (nothing to hold it to); the field states 5 where its span says three.
    reply = '{"answer": "Employees may work remotely [1].", "data": {"days": 5}, "grounding": {"/days": [1]}}'
    runtime = make_runtime([code(SEARCH, "Search the policy"), final_call(evidence=[rule]), reply])
    query = runtime.ask(TurnRequest(ask=ASK, scope=["acme"], model=MODEL, shape=shape))
    assert query.status == "completed", query.error
    assert query.output_json == {"days": 5} and query.output_grounding == {}
    assert len(query.citations) == 1  # the prose keeps its citation
    (flag,) = query.unsupported
    assert (flag.reason, flag.field, flag.missing) == ("field_not_in_evidence", "/days", ["5"])


def test_the_model_repairs_an_unsupported_sentence_once_and_the_rewrite_is_kept_when_it_holds(
    make_runtime: RuntimeFactory,
) -> None:
    other, rule = _label(make_runtime, OTHER), _label(make_runtime, RULE)
    first = f"Employees can work remotely 5 days a week. [{other}]"
    rewrite = f"Employees can work remotely up to three days per week [{rule}]."
    runtime = make_runtime([code(SEARCH, "Search the policy"), final_call(), first, rewrite])
    query = runtime.ask(TurnRequest(ask=ASK, scope=["acme"], model=MODEL))
    assert query.status == "completed", query.error
    assert query.answer == "Employees can work remotely up to three days per week [1]."
    assert query.unsupported == [] and len(query.citations) == 1
    # The repair call saw its answer and what the evidence lacks, and nothing was asked a third time.
    repair_call = runtime.scripted.calls[-1]  # type: ignore[attr-defined]
    assert repair_call.messages[-2].content == first
    assert '"Employees can work remotely 5 days a week."' in repair_call.messages[-1].content
    assert "does not state 5" in repair_call.messages[-1].content
    trace = runtime.db.get_trace(query.id)
    assert trace is not None
    assert trace["synthesis_repair"] == {"flagged": 1, "flagged_after": 0, "kept": "repair"}
    assert trace["citations_dropped"] == []
    report = replay(runtime.home, query.id, db=runtime.db)
    assert report["identical"], report


def test_a_rewrite_that_is_no_better_is_discarded_and_a_failed_repair_keeps_the_flag(
    make_runtime: RuntimeFactory,
) -> None:
    other = _label(make_runtime, OTHER)
    first = f"Employees can work remotely 5 days a week. [{other}]"
    worse = f"Employees can work remotely 6 days a week [{other}]. They get 4 weeks off [{other}]."
    for replies, after in (([first, worse], 2), ([first, ModelError("provider down")], None)):
        runtime = make_runtime([code(SEARCH, "Search the policy"), final_call(), *replies])
        query = runtime.ask(TurnRequest(ask=ASK, scope=["acme"], model=MODEL))
        assert query.status == "completed", query.error
        assert query.answer == "Employees can work remotely 5 days a week."
        assert [u.reason for u in query.unsupported] == ["claim_not_in_evidence"]
        trace = runtime.db.get_trace(query.id)
        assert trace is not None
        note = trace["synthesis_repair"]
        assert (note["flagged"], note["flagged_after"], note["kept"]) == (1, after, "first")
        assert ("error" in note) == (after is None)


def test_the_repair_request_points_an_uncited_sentence_at_the_evidence_that_states_it(
    make_runtime: RuntimeFactory,
) -> None:
    """A small model wrote a right answer without a marker; the request names the span that says it,
    and the marker it adds is checked like any other."""
    rule = _label(make_runtime, RULE)
    first = "Employees can work remotely up to three days per week. Support answers on ERR-9999."
    runtime = make_runtime([code(SEARCH, "Search"), final_call(evidence=[rule]), first, "Three days [1]."])
    query = runtime.ask(TurnRequest(ask=ASK, scope=["acme"], model=MODEL))
    assert query.status == "completed", query.error
    asked = runtime.scripted.calls[-1].messages[-1].content  # type: ignore[attr-defined]
    rule_line = '"Employees can work remotely up to three days per week.": cites no evidence, though [1]'
    assert rule_line in asked
    assert 'write "Employees can work remotely up to three days per week [1]."' in asked
    assert '"Support answers on ERR-9999.": cites no evidence, and no evidence states ERR-9999' in asked
    assert query.answer == "Three days [1]." and len(query.citations) == 1 and query.unsupported == []


# --- the rules, on spans written here -------------------------------------------------------------------

TABLE = "Revenues $ 11,692,713 $ 8,830,669 $ 6,779,511"


def _span(text: str, cell: str | None = None) -> EvidenceSpan:
    return EvidenceSpan(
        ref="E1",
        context="nf",
        source_path="NETFLIX_2017_10K.pdf",
        page=40,
        start=0,
        end=len(text),
        text=text,
        cell=cell,
    )


def _unsupported(answer: str, question: str = "") -> list[tuple[str, ...]]:
    return [u.missing for u in check_claims(answer, [_span(TABLE)], question)]


def test_scales_rounding_and_one_step_of_arithmetic_on_cited_figures_pass() -> None:
    assert _unsupported("Revenues were $11.7 billion in 2017 [1].") == []  # a table in thousands, rounded
    # The offline planner's aside in parentheses is no negative (6 right citations were lost to it).
    assert _unsupported("Revenues were 11,692,713 thousand (11.69 billion) [1].") == []
    assert _unsupported("Revenues grew 32.4 %, from $8,830,669K to $11,692,713K [1].") == []
    assert _unsupported("Revenues rose by $2.86 billion in 2017 [1].") == []  # a difference of two cells
    assert _unsupported("Revenues were $12.9 billion in 2017 [1].") == [("12.9 billion",)]
    assert _unsupported("Revenues grew 45.1% [1].") == [("45.1%",)]  # no pair of its figures gives it
    # A figure that is no computation is not excused by arithmetic: 11,692,713 − 6,779,511 is no head count.
    assert _unsupported("Netflix had 4,913,202 employees [1].") == [("4,913,202",)]


def test_a_working_the_sentence_shows_derives_its_result_in_any_number_of_steps() -> None:
    """Issue 45: "every number computed from verified spans". A growth rate over two years is two steps
    from its operands; the sentence's own working gives it, and the working's constants (the 1/2 and
    the 1) are part of it. A working that does not hold, or an operand the span lacks, is flagged."""
    cagr = (
        "Revenues grew at a compound annual rate of 31.3 %: 31.3 % = (11,692,713 [1] / 6,779,511 [1])^(1/2)"
        " − 1."
    )
    assert _unsupported(cagr) == []
    average = "Average revenues: 9,100,964.3 = (11,692,713 [1] + 8,830,669 [1] + 6,779,511 [1]) / 3."
    assert _unsupported(average) == []
    assert _unsupported(cagr.replace("31.3 %", "35.0 %")) == [("35.0 %",)]  # it does not hold
    # it holds, but 7,000,000 is in no cited span: the operand is flagged, and with it the sentence
    invented = "Average revenues: 9,346,356.5 = (11,692,713 [1] + 7,000,000 [1]) / 2."
    assert _unsupported(invented) == [("7,000,000",)]
    # what a model writes is hostile: a working nested past the bound, or raised to a huge power, is
    # read as no working (its figures are then held to the spans), never evaluated without limit
    nested = "Revenues were 5 = " + "(" * 190 + "5" + ")" * 190 + " [1]."
    assert _unsupported(nested) == [("5",)]
    assert _unsupported("Growth was 1 = 10^10^10^10 [1].") == [("10",)]


def test_the_question_frames_the_answer_and_file_names_pages_and_codes_are_read_as_such() -> None:
    assert _unsupported("In 2019 revenues were $11.7 billion [1].") == [("2019",)]
    assert _unsupported("In 2019 revenues were $11.7 billion [1].", "What were revenues in 2019?") == []
    assert _unsupported("As NETFLIX_2017_10K.pdf says on p. 40, revenues were $11.7 billion [1].") == []
    assert _unsupported("Revenues for 2017 were $11.7 billion [1].") == []  # the year is the file's
    assert _unsupported("The error code is ERR-4012 [1].") == [("ERR-4012",)]
    # A unit written against its figure is a figure (the 1.5B model's "a supply voltage of 3.00V").
    assert _unsupported("It needs a supply voltage of 3.00V [1].") == [("3.00V",)]
    assert _unsupported("3M and its 10-K say nothing of revenues [1].") == []  # names, not figures


def test_sentences_own_the_markers_after_them_and_abbreviations_do_not_end_them() -> None:
    text = (
        "Revenue rose (p. 40) to $11.7 billion. [1] Costs fell, per Netflix Inc. and U.S. filings [2]."
        "\n- 3 items"
    )
    assert [text[a:b] for a, b in sentence_bounds(text)] == [
        "Revenue rose (p. 40) to $11.7 billion. [1]",
        " Costs fell, per Netflix Inc. and U.S. filings [2].",
        "- 3 items",
    ]


def test_a_marker_dropped_in_one_sentence_stays_where_another_sentence_earns_it() -> None:
    page = TABLE
    result = build_citations(
        "Revenues were $11.7 billion [1]. They were $99 billion in 2015 [1].", [_span(TABLE)], lambda *_: page
    )
    assert result.text == "Revenues were $11.7 billion [1]. They were $99 billion in 2015."
    assert [u["text"] for u in result.unsupported] == ["They were $99 billion in 2015."]
    assert [d["reason"] for d in result.dropped] == ["claim_not_in_evidence"]


def test_the_span_pointed_at_states_the_facts_and_speaks_of_the_same_thing() -> None:
    spans = [
        _span("Section 3: travel and expenses."),  # states 3, shares no word with the sentence
        _span("Employees may work remotely up to three days per week."),
        _span("Remote access uses the VPN; 2 factors."),  # shares words, lacks the figure
    ]
    assert stating("Employees work remotely 3 days a week.", spans) == [2]
    assert stating("The VPN is required.", spans) == []  # no fact to look up: nothing to point at
    assert stating("Employees work remotely 4 days a week.", spans) == []
