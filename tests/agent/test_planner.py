"""The offline planner and the extractive synthesizer over the compiled sample corpus (spec/runtime.md §10).

A tiny private driver plays the agent loop: the planner's `run_python` code runs in a real sandbox,
the observation goes back as a `tool` message, and `final` ends the turn. The answers are then
written by `extractive_answer` from the spans the final step named.
"""

from __future__ import annotations

import re
import sqlite3
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from sleuth.agent.extractive import (
    asked_quantity,
    asked_year,
    asks_computation,
    caption_words,
    content_words,
    extractive_answer,
    identifier_tokens,
    named_tables,
    normalize_word,
    pointer_words,
)
from sleuth.agent.planner import OfflinePlanner
from sleuth.agent.planner_figures import figure_sentence
from sleuth.agent.planner_plans import read_plan
from sleuth.agent.planner_scope import PlannerScope, classify, planner_scope
from sleuth.agent.spans import EvidenceSpan, SpanResolver
from sleuth.models.base import CompletionParams, Message, ToolCall
from sleuth.sandbox import Limits, SandboxHost
from sleuth.sandbox.host import SandboxUnavailable
from sleuth.store.contexts.home import Home
from sleuth.store.version.search import VersionReader
from tests.support import compiled_version, make_pdf

QUOTE = re.compile(
    r'^According to (?P<source>.+?) \(p\. (?P<page>\d+)\)(?:, under "[^"\n]*")?: '
    r'"(?P<text>.*)" \[(?P<n>\d+)\]$',
    re.S,
)


@pytest.fixture(scope="module")
def planner_host() -> Iterator[SandboxHost]:
    with SandboxHost(Limits(step_timeout_s=30, hard_kill_grace_s=3)) as host:
        yield host


@pytest.fixture(scope="module")
def scope(sample_version: Path) -> PlannerScope:
    return planner_scope({"acme": sample_version})


@dataclass
class _Turn:
    planner: OfflinePlanner
    codes: list[str] = field(default_factory=list)
    observations: list[str] = field(default_factory=list)
    spans: dict[str, EvidenceSpan] = field(default_factory=dict)
    final: dict[str, Any] = field(default_factory=dict)
    evidence: list[EvidenceSpan] = field(default_factory=list)
    answer: str = ""


def _drive(
    host: SandboxHost,
    version: Path,
    scope: PlannerScope,
    ask: str,
    previous: str | None = None,
    max_output: int | None = None,
    general_only: bool = False,
) -> _Turn:
    """The agent loop in miniature: run each step in a sandbox until the planner calls `final`."""
    planner = OfflinePlanner(ask, scope, previous, general_only=general_only)
    turn = _Turn(planner)
    messages = [Message("user", f"{ask}\n\nYou have at most 8 steps.")]
    try:
        sandbox = host.start_turn({"acme": version})
        resolver = SpanResolver({"acme": VersionReader(version)})
    except SandboxUnavailable as exc:  # pragma: no cover - depends on the machine
        pytest.skip(f"no sandbox on this machine: {exc}")
    with sandbox:
        for _step in range(8):
            reply = planner.complete(messages, [], CompletionParams())
            assert reply.usage.input_tokens == 0 and reply.usage.output_tokens == 0
            assert len(reply.tool_calls) == 1
            call = reply.tool_calls[0]
            if call.name == "final":
                turn.final = call.arguments
                break
            assert call.name == "run_python" and len(call.arguments["commentary"]) <= 200
            code = call.arguments["code"]
            result = sandbox.exec(code, max_output=max_output)
            assert result.final is None
            turn.codes.append(code)
            turn.observations.append(result.output)
            for report in result.spans:
                span = resolver.resolve(report)
                assert span is not None, f"the SDK reported a span the host cannot resolve: {report}"
                turn.spans[span.ref] = span
            messages.append(Message("assistant", "", [call]))
            messages.append(Message("tool", result.output, tool_call_id=call.id))
        else:  # pragma: no cover - a failure, reported by the assertion below
            pytest.fail("the planner never called final")
    assert len(turn.codes) <= 4
    turn.evidence = [turn.spans[label] for label in turn.final.get("evidence", [])]
    turn.answer = extractive_answer(ask, turn.evidence, turn.final.get("answer"), ["acme"])
    return turn


def _quotes(turn: _Turn) -> list[tuple[EvidenceSpan, str]]:
    """Each `According to … "sentence" [n]` line of an answer, with the span it cites."""
    out = []
    for part in re.split(r"\n(?=According to )", turn.answer):
        match = QUOTE.match(part)
        assert match, part
        span = turn.evidence[int(match["n"]) - 1]
        assert match["source"] == span.source_path and int(match["page"]) == span.page
        out.append((span, match["text"]))
    return out


def _assert_verbatim(turn: _Turn, version: Path) -> None:
    """Quoted sentences are slices of their spans, and spans are slices of the stored page text."""
    reader = VersionReader(version)
    found = _quotes(turn)
    assert found
    for span, text in found:
        assert text in span.text
        page = reader.page_text(span.source_path, span.page)
        assert page is not None and page[span.start : span.end] == span.text


# ------------------------------------------------------------------------------ pure parts
def test_classes_in_order() -> None:
    assert classify("How many products are in the catalog?") == "count"
    assert classify("What is the total number of attendees?") == "count"
    assert classify("How often did the council meet?") == "count"
    assert classify("List all products") == "list"
    assert classify("Which products are sold in Europe?") == "list"
    assert classify("What are the expense limits?") == "list"
    assert classify("What does ERR-4012 mean?") == "exact_id"
    assert classify("Where is parse_config defined?") == "exact_id"
    assert classify("What is in travel-policy.md?") == "exact_id"
    assert classify('Who wrote "the byte order mark"?') == "exact_id"
    assert classify("What is the hotel limit per night?") == "general"
    assert classify("How many errors does ERR-4012 cause?") == "count"  # count is checked first


@pytest.mark.parametrize(
    ("ask", "quantity", "year"),
    [
        (
            "What is the FY2018 capital expenditure amount (in USD millions) for 3M?",
            ["capital", "expenditure"],
            2018,
        ),
        (
            "What is Netflix's year end FY2017 total current liabilities?",
            ["total", "current", "liability"],
            2017,
        ),
        (
            "Basing your judgments off the balance sheet, what is the year end FY18 amount of "
            "accounts payable for MGM Resorts?",
            ["account", "payable"],
            2018,
        ),
        ("How many employees did Netflix have at the end of 2015?", ["employee"], 2015),
        # the quantity after the verb that moves money (issue 45: Block's "generate in cash flow from …")
        ("How much did Acme pay in dividends in 2020?", ["dividend"], 2020),
        ("How much did Acme pay in 2020?", [], 2020),  # no quantity named
        ("What drove revenue growth between 2021 and 2022?", [], None),  # not a what-was question; two years
        ("Is the company capital-intensive?", [], None),
        (
            "What is the FY2017 return on assets (ROA)? ROA is defined as net income / total assets.",
            ["return", "asset"],
            2017,
        ),
        ("What is Amazon's year-over-year change in revenue from FY2016 to FY2017?", ["change"], None),
        ("Roughly how many times has JnJ sold its inventory in FY2022?", [], 2022),
    ],
)
def test_asked_quantity_and_year(ask: str, quantity: list[str], year: int | None) -> None:
    assert asked_quantity(ask) == quantity and asked_year(ask) == year
    computed = any(w in ask for w in ("defined as", "change", "growth"))
    assert asks_computation(ask) == computed


def test_figure_sentence_states_unit_period_and_scale() -> None:
    """Issue 39, item 5: the cell reads as its row, period and printed figure."""
    assert (
        figure_sentence("Revenues", "Years ended December 31 2015", "$ 6,779,511", "thousands", 6779511.0)
        == "Revenues, year ended Dec 31, 2015: $6,779,511 thousand ($6.78 billion)"
    )
    # in parentheses: paid out, not "-1.58 billion"
    assert figure_sentence("Purchases of property", "MAY 31 2019", "(1,577)", "millions", -1577.0) == (
        "Purchases of property, May 31, 2019: (1,577) million (1.58 billion, in parentheses: an outflow or a"
        " deduction)"
    )
    assert figure_sentence("Operating income", "2025", "6.9", "millions", 6.9) == (
        "Operating income, 2025: 6.9 million"
    )
    assert figure_sentence("Margin", "", "12.5%", "millions", 12.5) == "Margin: 12.5%"
    # `(in millions, except per share amounts)`: a per-share amount or a head count is not scaled, and a
    # row named by its group reads under it
    assert figure_sentence(
        "Diluted", "Years ended December 31 2018", "$ 8.89", "millions", 8.89, "Earnings per share"
    ) == ("Earnings per share — Diluted, year ended Dec 31, 2018: $8.89")
    assert figure_sentence("Number of employees", "2018", "1,500", "millions", 1500.0) == (
        "Number of employees, 2018: 1,500"
    )


def test_words_and_identifiers() -> None:
    assert content_words("How many products are in the catalog?") == ["product", "catalog"]
    assert [normalize_word(w) for w in ("attendees", "categories", "boxes", "process", "days")] == [
        "attendee",
        "category",
        "box",
        "process",
        "day",
    ]
    assert identifier_tokens('Is ERR-4012 in config_loader or "the parser" (see notes.md, fooBar)?') == [
        "ERR-4012",
        "config_loader",
        "the parser",
        "notes.md",
        "fooBar",
    ]


def test_scope_reads_tables_types_and_sources(scope: PlannerScope) -> None:
    assert scope.slugs == ("acme",)
    tables = {t.name: t for t in scope.tables}
    assert tables["product"].row_count == 10 and tables["product"].natural_key == ("sku",)
    assert tables["product"].type == "Product" and ("price_usd", "REAL") in tables["product"].columns
    assert tables["meeting_attendance"].row_count == 26
    assert scope.has_table("acme", "_sources")
    types = {t.name: t for t in scope.types}
    assert types["Document"].has_roster and types["Document"].count == 21
    assert not types["Product"].has_roster and types["Product"].table == "product"
    assert types["Person"].count == 0


def test_count_without_a_matching_table_is_general(scope: PlannerScope) -> None:
    planner = OfflinePlanner("How many days a week can employees work remotely?", scope)
    assert planner.detected_class == "count" and planner.question_class == "general"


def test_year_and_quoted_phrase_become_bound_parameters(scope: PlannerScope) -> None:
    planner = OfflinePlanner("How many products launched in 2026?", scope)
    code = planner.complete([Message("user", "q")], [], CompletionParams()).tool_calls[0].arguments["code"]
    assert (
        "query_db('SELECT COUNT(*) AS n FROM \"product\" WHERE substr(\"launch_year\", 1, 4) = ?', ['2026'])"
        in code
    )
    planner = OfflinePlanner('How many products are named "Pressure"?', scope)
    code = planner.complete([Message("user", "q")], [], CompletionParams()).tool_calls[0].arguments["code"]
    assert "LIKE ?', ['%Pressure%'])" in code and "Pressure'" not in code.split("LIKE")[0]


def test_failed_sql_step_is_refined_once_as_a_search(scope: PlannerScope) -> None:
    planner = OfflinePlanner("How many products are in the catalog?", scope)
    messages = [Message("user", "How many products are in the catalog?")]
    first = planner.complete(messages, [], CompletionParams()).tool_calls[0]
    messages += [
        Message("assistant", "", [first]),
        Message(
            "tool", "Traceback (most recent call last):\nQueryError: no such table", tool_call_id=first.id
        ),
    ]
    second = planner.complete(messages, [], CompletionParams()).tool_calls[0]
    assert second.name == "run_python" and "search_knowledge(ask, top_k=5)" in second.arguments["code"]
    assert planner.question_class == "general"


def test_read_plan_needs_a_whole_line() -> None:
    assert read_plan('noise\n#PLAN {"step":"count","n":3}\nmore') == {"step": "count", "n": 3}
    assert read_plan('#PLAN {"step":"count","n\n[truncated: showing 20 of 90 chars]') is None
    assert read_plan("no plan here") is None


def _span(ref: str, text: str, source: str = "a.md", start: int = 0) -> EvidenceSpan:
    return EvidenceSpan(
        ref=ref, context="acme", source_path=source, page=1, start=start, end=start + len(text), text=text
    )


def test_extractive_translates_draft_markers() -> None:
    evidence = [_span("E3", "row three"), _span("E7", "row seven")]
    draft = "There are 2 things (counted in table `t`). [E7][E3][E9]\n- one [E9]\n- two [E3]"
    assert extractive_answer("how many", evidence, draft, ["acme"]) == (
        "There are 2 things (counted in table `t`). [2][1]\n- one\n- two [1]"
    )


def test_extractive_quotes_best_sentences_from_distinct_spans() -> None:
    evidence = [
        _span("E1", "## Hotels\n\nHotel costs are capped at $220 per night. Friends are welcome."),
        _span("E2", "Meals are paid up to $75 per day. Hotel bookings use the\nportal at night.", "b.md"),
    ]
    answer = extractive_answer("What is the hotel limit per night?", evidence, None, ["acme"])
    assert answer == (
        'According to a.md (p. 1): "Hotel costs are capped at $220 per night." [1]\n'
        'According to b.md (p. 1): "Hotel bookings use the\nportal at night." [2]'
    )
    assert extractive_answer("Why?", [], None, ["acme", "beta"]) == (
        "No evidence for this question was found in acme, beta."
    )


# ------------------------------------------------------------------------------ whole turns
def test_count_question(planner_host: SandboxHost, sample_version: Path, scope: PlannerScope) -> None:
    turn = _drive(planner_host, sample_version, scope, "How many products are in the catalog?")
    assert turn.planner.question_class == "count" and turn.planner.count == 10
    assert len(turn.codes) == 1 and "query_db('SELECT COUNT(*) AS n FROM \"product\"', [])" in turn.codes[0]
    assert turn.observations[0].startswith('#PLAN {"step":"count","class":"count","n":10,')
    assert turn.answer == "There are 10 products (counted in table `product`). [1][2][3]"
    assert all(s.via == "table" and "products.csv" in s.source_path for s in turn.evidence)


def test_count_with_a_year(planner_host: SandboxHost, sample_version: Path, scope: PlannerScope) -> None:
    with sqlite3.connect(f"file:{sample_version / 'tables.sqlite'}?mode=ro", uri=True) as db:
        (expected,) = db.execute("SELECT COUNT(*) FROM product WHERE launch_year = 2026").fetchone()
    turn = _drive(planner_host, sample_version, scope, "How many products launched in 2026?")
    assert turn.planner.count == expected > 0
    assert turn.answer.startswith(f"There are {expected} products with launch_year in 2026 (counted in")


def test_list_question(planner_host: SandboxHost, sample_version: Path, scope: PlannerScope) -> None:
    turn = _drive(planner_host, sample_version, scope, "List all products")
    skus = ["AX-220", "AX-240", "BX-2", "BX-5", "CAL-KIT-1", "DL-100", "GW-10", "HX-3", "TX-4", "TX-9"]
    assert turn.planner.question_class == "list" and turn.planner.items == skus
    lines = turn.answer.split("\n")
    assert lines[0] == "The products are:"
    assert [re.sub(r" \[\d+\]$", "", line) for line in lines[1:]] == [f"- {s}" for s in skus]
    tx9 = next(line for line in lines if line.startswith("- TX-9 "))
    cited = turn.evidence[int(tx9.rsplit("[", 1)[1].rstrip("]")) - 1]
    assert "TX-9" in cited.text and "689" in cited.text


def test_list_documents_uses_the_roster(
    planner_host: SandboxHost, sample_version: Path, scope: PlannerScope
) -> None:
    turn = _drive(planner_host, sample_version, scope, "List all documents")
    assert "read_rosters(type='Document')" in turn.codes[0]
    assert turn.planner.items is not None and len(turn.planner.items) == 21
    assert "- Travel Policy" in turn.answer.split("\n")


def test_exact_id_question(planner_host: SandboxHost, sample_version: Path, scope: PlannerScope) -> None:
    turn = _drive(planner_host, sample_version, scope, "What does ERR-4012 mean?")
    assert turn.planner.question_class == "exact_id" and len(turn.codes) == 1
    assert "search_source_by_keyword(t, top_k=5) for t in tokens[:3]" in turn.codes[0]
    assert "tokens = ['ERR-4012']" in turn.codes[0]
    assert turn.final.get("answer") is None and 1 <= len(turn.final["evidence"]) <= 8
    assert any("Configuration file could not be parsed" in text for _cited, text in _quotes(turn))
    _assert_verbatim(turn, sample_version)


def test_unknown_identifier_falls_back_to_search(
    planner_host: SandboxHost, sample_version: Path, scope: PlannerScope
) -> None:
    turn = _drive(planner_host, sample_version, scope, "What is QQ-98765?")
    assert read_plan(turn.observations[0]) is not None
    assert "search_knowledge(ask, top_k=5)" in turn.codes[1]
    assert turn.planner.question_class == "general" and len(turn.codes) <= 3


def test_general_question(planner_host: SandboxHost, sample_version: Path, scope: PlannerScope) -> None:
    turn = _drive(planner_host, sample_version, scope, "What is the hotel limit per night when travelling?")
    assert turn.planner.question_class == "general" and len(turn.codes) == 2
    assert "search_source(ask, top_k=10)," in turn.codes[0]
    assert "search_knowledge(ask, top_k=5)," in turn.codes[0]
    assert "search_in_sources(sources, ask, max_total=12)" in turn.codes[1]
    assert len(turn.final["evidence"]) == 8
    first = _quotes(turn)[0]
    assert first[1] == "Hotel costs are capped at $220 per night, before tax, in most cities."
    assert first[0].source_path.endswith("policies/travel-policy.md")
    _assert_verbatim(turn, sample_version)
    for observation in turn.observations:
        assert len(observation.split("\n", 1)[0]) <= 2000


def test_how_many_without_a_table_answers_from_the_text(
    planner_host: SandboxHost, sample_version: Path, scope: PlannerScope
) -> None:
    turn = _drive(planner_host, sample_version, scope, "How many days a week can employees work remotely?")
    assert turn.planner.question_class == "general" and turn.planner.count is None
    assert "up to three days per week" in turn.answer
    _assert_verbatim(turn, sample_version)


def test_follow_up_borrows_the_previous_words(
    planner_host: SandboxHost, sample_version: Path, scope: PlannerScope
) -> None:
    turn = _drive(
        planner_host,
        sample_version,
        scope,
        "Does it apply abroad?",
        previous="What is the hotel limit per night when travelling?",
    )
    assert "query = 'Does it apply abroad? hotel limit night travelling'" in turn.codes[0]
    assert "search_source(query, top_k=10)" in turn.codes[0]


def test_general_only_runs_search_and_drill(
    planner_host: SandboxHost, sample_version: Path, scope: PlannerScope
) -> None:
    turn = _drive(
        planner_host, sample_version, scope, "How many products are in the catalog?", general_only=True
    )
    assert turn.planner.question_class == "general" and turn.planner.count is None
    assert "search_knowledge" in turn.codes[0] and len(turn.codes) == 2


def test_deterministic(planner_host: SandboxHost, sample_version: Path, scope: PlannerScope) -> None:
    for ask in ("What is the hotel limit per night when travelling?", "List all products"):
        one = _drive(planner_host, sample_version, scope, ask)
        two = _drive(planner_host, sample_version, scope, ask)
        assert one.codes == two.codes
        assert one.observations == two.observations
        assert one.final == two.final and one.answer == two.answer


def test_a_cut_plan_line_still_finishes(
    planner_host: SandboxHost, sample_version: Path, scope: PlannerScope
) -> None:
    for ask in (
        "How many products are in the catalog?",
        "What is the hotel limit per night when travelling?",
    ):
        turn = _drive(planner_host, sample_version, scope, ask, max_output=30)
        assert len(turn.codes) == 1 and "[truncated: showing 30 of" in turn.observations[0]
        assert turn.final == {"evidence": []}
        assert turn.answer == "No evidence for this question was found in acme."


def test_final_reply_shape(scope: PlannerScope) -> None:
    planner = OfflinePlanner("How many products are in the catalog?", scope)
    assert planner.config.id == "sleuth/offline" and planner.config.tool_protocol == "native"
    first = planner.complete([Message("user", "q")], [], CompletionParams()).tool_calls[0]
    observation = '#PLAN {"step":"count","class":"count","n":10,"refs":["E1","E2"],"table":"product"}\n'
    reply = planner.complete(
        [
            Message("user", "q"),
            Message("assistant", "", [first]),
            Message("tool", observation, tool_call_id="x"),
        ],
        [],
        CompletionParams(),
    )
    assert reply.tool_calls == [
        ToolCall(
            "offline_2",
            "final",
            {
                "answer": "There are 10 products (counted in table `product`). [E1][E2]",
                "evidence": ["E1", "E2"],
            },
        )
    ]
    assert planner.count == 10 and planner.draft is not None


def test_a_named_document_is_searched_inside(planner_host: SandboxHost, home: Home, filings: Path) -> None:
    """Issue 11, 4: the planner resolves the document the question names (from `_sources`, through
    the SDK) and searches inside it, so its page leads the evidence even where other filings say the
    same words."""
    version = compiled_version("acme", [filings], home)
    scope = planner_scope({"acme": version})
    ask = "What was Alder's revenue in FY2022?"
    assert scope.named_documents(ask) == [("acme", "uploads/filings/alder-2022.pdf")]
    assert scope.named_documents("What was revenue driven by?") == []

    turn = _drive(planner_host, version, scope, ask)
    assert "named = ['uploads/filings/alder-2022.pdf']" in turn.codes[0]
    assert "search_in_sources(named, ask, max_total=10)" in turn.codes[0]
    assert turn.evidence[0].source_path == "uploads/filings/alder-2022.pdf"
    assert "$11.0 million" in turn.answer and "$12.5 million" not in turn.answer.split("\n")[0]
    # a question that names no document keeps the plain search
    plain = OfflinePlanner("What drives revenue?", scope)
    code = plain.complete([Message("user", "What drives revenue?")], [], CompletionParams()).tool_calls[0]
    assert "search_in_sources" not in code.arguments["code"] and "inside_named = []" in code.arguments["code"]


@pytest.mark.parametrize(
    ("ask", "tables"),
    [
        ("… by relying on the details shown in the cash flow statement.", [["cash", "flow"]]),
        ("Based on the balance sheet and the statement of income, what", [["balance", "sheet"], ["income"]]),
        ("primarily in the statement of financial position", [["financial", "position"]]),
        ("What is the revenue in the segment table?", [["segment"]]),
        ("What did the statement say about pensions?", []),  # no table named
        ("the largest liability in American Express's Balance Sheet", [["balance", "sheet"]]),  # not "s"
        ("as the P&L statement shows", []),  # one-letter words name nothing
    ],
)
def test_named_tables(ask: str, tables: list[list[str]]) -> None:
    assert named_tables(ask) == tables


def test_the_words_that_point_at_a_table() -> None:
    """A caption must hold the name and the kind (`statement`, `sheet`); the pointing words are not
    what a quote is scored on."""
    ask = "Using the cash flow statement, how much cash came from operations?"
    assert caption_words(ask) == [["cash", "flow", "statement"]]
    assert pointer_words(ask) == {"cash", "flow", "statement"}
    assert caption_words("What is the revenue in the segment table?") == [["segment"]]
    assert pointer_words("What drives revenue?") == frozenset()


def test_a_figure_comes_from_the_statement_the_question_names(
    planner_host: SandboxHost, home: Home, tmp_path: Path
) -> None:
    """The same row in a note's table and in the balance sheet: a question that points at the balance
    sheet is answered from the balance sheet, and `total` need not be in the row's label."""
    note = "\n".join(
        [
            "Note 7. Supplier finance programs",
            "The amount of accounts payable and merchandise inventories in the balance sheet in",
            "FY2022 includes the supplier finance amounts below (balance sheet accounts payable).",
            "SUPPLIER FINANCE OBLIGATIONS",
            "(in millions)",
            "2022 2021",
            "Merchandise inventories 12 10",
            "Accounts payable 31 29",
            "Other obligations 4 3",
        ]
    )
    sheet = "\n".join(
        [
            "CONSOLIDATED BALANCE SHEETS",
            "(in millions)",
            "December 31, 2022 December 31, 2021",
            "Cash and cash equivalents 140 120",
            "Merchandise inventories 410 388",
            "Accounts payable 275 251",
            "Total current liabilities 690 655",
        ]
    )
    make_pdf(tmp_path / "docs" / "alder-2022.pdf", ["Alder Pumps, Inc. annual report 2022", note, sheet])
    version = compiled_version("acme", [tmp_path / "docs"], home)
    scope = planner_scope({"acme": version})
    for ask, figure in (
        ("Using the balance sheet, what was the FY2022 amount of accounts payable?", "275"),
        ("What was the total amount of merchandise inventories in FY2022 in the balance sheet?", "410"),
    ):
        turn = _drive(planner_host, version, scope, ask)
        assert f": {figure} million" in turn.answer.split("\n")[0], turn.answer
        assert turn.evidence[0].text == figure


def test_the_table_a_question_names_is_quoted_whatever_the_search_ranks_first(
    planner_host: SandboxHost, home: Home, tmp_path: Path
) -> None:
    """A question that points at a table by its caption ("using the balance sheet") gets that table's
    page among its first evidence, read whole, even where another page says the question's words more
    often; the words that point at the table do not make its caption the quote."""
    prose = "\n".join(
        [
            "Liquidity and capital resources",
            "Our liquidity in FY2022 remained strong. Liquidity is discussed with the balance sheet,",
            "and we believe our liquidity and the balance sheet support our plans for FY2022 and beyond.",
        ]
    )
    sheet = "\n".join(
        [
            "CONSOLIDATED BALANCE SHEETS",
            "(in millions)",
            "December 31, 2022 December 31, 2021",
            "Cash and cash equivalents 140 120",
            "Short-term investments 75 60",
            "Accounts payable 275 251",
            "Total current liabilities 690 655",
        ]
    )
    cover = "FORM 10-K\nAnnual report for the fiscal year ended December 31, 2022\nAlder Pumps, Inc."
    make_pdf(tmp_path / "docs" / "alder-2022.pdf", [cover, prose, sheet])
    other = cover.replace("Alder Pumps, Inc.", "Birch Valves Corporation")  # resolution needs two issuers
    make_pdf(tmp_path / "docs" / "birch-2022.pdf", [other, "Birch sells valves."])
    version = compiled_version("acme", [tmp_path / "docs"], home)
    scope = planner_scope({"acme": version})
    ask = "Using the balance sheet, how much cash and short-term investments did Alder have in FY2022?"
    assert scope.named_documents(ask) == [("acme", "uploads/docs/alder-2022.pdf")]
    turn = _drive(planner_host, version, scope, ask)
    assert "table_words = [['balance', 'sheet']]" in turn.codes[0] and "read_page(path, page" in turn.codes[0]
    assert turn.evidence[0].page == 3  # the sheet's page leads the evidence
    quotes = turn.answer.split("According to ")
    assert "(p. 3)" in quotes[1] and "Cash and cash equivalents 140 120" in quotes[1], turn.answer
    assert "CONSOLIDATED BALANCE SHEETS" not in turn.answer  # the caption says where, not what
    # a question that names no table reads no table's page
    plain = _drive(planner_host, version, scope, "How much cash did Alder have in FY2022?")
    assert "tabled = []" in plain.codes[0]
