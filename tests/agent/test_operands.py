"""A computation's operands on statement pages the search did not rank (issue 45, item 2): FinanceBench's
Coca-Cola return on assets was listed, not worked out, because its net income sat on a statement page
outside the eight pages the step read. The step now also reads, in the document the question names,
the rows of the asked years whose labels hold the question's words."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from sleuth.agent.turn import Runtime, TurnRequest
from sleuth.sandbox import SandboxHost
from sleuth.store.contexts.home import Home
from tests.agent.support import filing_home, report_runtime
from tests.support import make_pdf, statement_pdf

#: Pages of narrative that name the quantities but state none of the operands, each about its own
#: topic (pages that repeat one another are boilerplate to the compiler, and never searched).
TOPICS = [
    "stores", "pricing", "logistics", "suppliers", "marketing", "research", "hiring", "leases", "taxes",
    "pensions", "currency", "litigation", "insurance", "software", "energy", "water", "packaging",
    "franchises", "warranties", "recalls", "patents", "training", "security", "freight", "rebates",
    "licensing", "dividends", "buybacks", "debt", "credit",
]  # fmt: skip
NARRATIVE = [
    f"Management's discussion of {topic}.\nHow {topic} affected Contoso's FY2019 return on assets (ROA):"
    f" ROA is FY2019 net income over average total assets between FY2018 and FY2019, and {topic} moved"
    f" both net income and total assets. The {topic} programme is reviewed against ROA each quarter by"
    f" the employees who run {topic} at Contoso."
    for topic in TOPICS
] + [
    "Workforce.\nAt December 31, 2019, Contoso employed approximately 12,400 people, most of them in its"
    " stores and warehouses."
]
YEARS = ("Year ended December 31, 2019", "Year ended December 31, 2018")


@pytest.fixture(scope="module")
def contoso(tmp_path_factory: pytest.TempPathFactory) -> Home:
    root = tmp_path_factory.mktemp("operands")
    parts = [
        make_pdf(root / "parts" / "narrative.pdf", NARRATIVE),
        statement_pdf(
            root / "parts" / "income.pdf",
            ["Contoso Corp", "Consolidated Statements of Income", "(in millions)",
             ("", "Years ended December 31,"), ("", "2019", "2018"),
             ("Revenues", "$ 9,120", "$ 8,410"), ("Cost of sales", "5,470", "5,020"),
             ("Operating income", "2,011", "2,230"),
             ("Net income", "$ 1,503", "$ 1,813")],
        ),
        statement_pdf(
            root / "parts" / "balance.pdf",
            ["Contoso Corp", "Consolidated Balance Sheets", "(in millions)", ("", "December 31,"),
             ("", "2019", "2018"), ("Cash", "$ 1,210", "$ 980"),
             ("Total current assets", "$ 6,210", "$ 5,980"),
             ("Total assets", "$ 19,845", "$ 17,890"), ("Accounts payable", "2,210", "1,980"),
             ("Total liabilities", "$ 9,001", "$ 8,700")],
        ),
        statement_pdf(
            root / "parts" / "cash.pdf",
            ["Contoso Corp", "Consolidated Statements of Cash Flows", "(in millions)",
             ("", "Years ended December 31,"), ("", "2019", "2018"),
             ("Net income", "$ 1,503", "$ 1,813"),
             ("Net cash provided by operating activities", "2,104", "2,033"),
             "Changes in operating assets and liabilities",
             ("Accounts payable", "230", "198"), ("Inventories", "(41)", "(12)"),
             "Cash flows from investing activities",
             ("Purchases of property and equipment", "(312)", "(287)")],
        ),
    ]  # fmt: skip
    # another company's filing: a question names its document among several
    other = make_pdf(
        root / "parts" / "FABRIKAM_2019_10K.pdf", ["Fabrikam annual report 2019.\nFabrikam sells paint."]
    )
    return filing_home(root, "contoso", "CONTOSO_2019_10K.pdf", parts, other)


@pytest.fixture
def runtime(
    contoso: Home, tmp_path: Path, agent_host: SandboxHost, monkeypatch: pytest.MonkeyPatch
) -> Iterator[Runtime]:
    with report_runtime(contoso, tmp_path, agent_host, monkeypatch) as rt:
        yield rt


def test_an_operand_on_an_unranked_statement_page_is_read(runtime: Runtime) -> None:
    ask = (
        "What is Contoso's FY2019 return on assets (ROA)? ROA is defined as: FY2019 net income / (average"
        " total assets between FY2018 and FY2019)."
    )
    query = runtime.ask(TurnRequest(ask=ask, scope=["contoso"]))
    assert query.status == "completed", query.error
    assert query.answer is not None and query.answer.startswith(
        "Contoso's FY2019 return on assets (ROA): 0.08 ="
    ), query.answer
    assert query.synthesis is not None and query.synthesis.assurance == "computed"
    pages = {p for c in query.citations[:3] for p in c.pages}
    # the statement pages after thirty-one of narrative: net income (the income or the cash flow
    # statement's, one figure) and the balance sheet's total assets
    assert 33 in pages and pages <= {32, 33, 34}, pages


def test_a_cash_flow_line_of_a_change_is_not_the_balance(runtime: Runtime) -> None:
    """Walmart's DPO read `Accounts payable` 3,942 from the cash flow statement's "Changes in certain
    assets and liabilities" (the year's change) for the balance sheet's 41,433 — and stated 3.92 days."""
    query = runtime.ask(
        TurnRequest(ask="What were Contoso's accounts payable at the end of FY2019?", scope=["contoso"])
    )
    assert query.status == "completed" and query.answer is not None, query.error
    assert "Accounts payable, Dec 31, 2019: 2,210" in query.answer, query.answer
    assert "230" not in query.answer


def test_a_count_no_table_states_is_read_from_the_named_documents_prose(runtime: Runtime) -> None:
    """Lockheed Martin's and Amazon's head counts: no cell names employees, so the step finished
    with the search's quotes ("Directors Deferred Compensation Plan", exhibit lists). A count in a
    named document is now searched in its prose, by the words of the question's family."""
    query = runtime.ask(
        TurnRequest(ask="How many employees did Contoso have at the end of FY2019?", scope=["contoso"])
    )
    assert query.status == "completed" and query.answer is not None, query.error
    first = query.answer.split("\n")[0]
    assert "employed approximately 12,400 people" in first, query.answer
    # the second step searched the named filing's chunks that hold a word of the `employ` family
    prose = query.steps[-1].code.get("source", "")
    assert "must_contain=['employ*']" in prose and "CONTOSO_2019_10K.pdf" in prose, prose


@pytest.mark.parametrize(
    ("ask", "stated"),
    [
        ("What was Contoso's FY2019 capital expenditure?", "Purchases of property and equipment"),
        ("What was Contoso's FY2019 COGS?", "Cost of sales"),
        (  # Block's: the quantity after the verb, then its statement's name
            "How much did Contoso generate in cash flow from operating activities in FY2019?",
            "Net cash provided by operating activities",
        ),
        (  # General Mills': the amount and where it came from, not the balance sheet's `Cash`
            "How much cash did Contoso generate from operating activities in FY2019?",
            "Net cash provided by operating activities",
        ),
    ],
)
def test_a_quantity_is_read_by_the_names_statements_give_it(runtime: Runtime, ask: str, stated: str) -> None:
    """3M's "capital expenditure" is its cash flow statement's `Purchases of property, plant and
    equipment`, Microsoft's "COGS" its `Total cost of revenue`: the field's other names for a quantity
    (`formulas.other_names`), read after a row of the question's own words."""
    query = runtime.ask(TurnRequest(ask=ask, scope=["contoso"]))
    assert query.status == "completed" and query.answer is not None, query.error
    assert query.answer.startswith("According to uploads/corpus/CONTOSO_2019_10K.pdf"), query.answer
    assert f"{stated}, " in query.answer.split("\n")[0], query.answer
    assert query.synthesis is not None and query.synthesis.assurance == "matched"
