"""Which rows a computation reads (issue 45, item 2), found on FinanceBench's held-back computations:
- Activision Blizzard's "3 year average of capex as a % of revenue" never read `Total net revenues`:
  the operand lookup took the question's first sixteen words in alphabetical order ("activision" …
  "percent"), and "revenue" was the seventeenth;
- MGM's capex row is `Capital expenditures, net of construction payable` (what it nets, not another
  quantity), and its 2020 revenue was read from a guarantor's one-year summary instead of the
  statement's three-year row the other years came from;
- Amazon's and Lockheed Martin's revenue is `Total net sales`: "revenue growth", "change in revenue"
  and "revenue CAGR" found no row of theirs;
- PepsiCo's "EBITDA % margin" leans on a term (EBITDA) whose parts no word of the asked quantity names.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from sleuth.agent.turn import Runtime, TurnRequest
from sleuth.sandbox import SandboxHost
from sleuth.store.contexts.home import Home
from tests.agent.support import filing_home, report_runtime
from tests.support import make_pdf, statement_pdf

TOPICS = [
    "stores", "pricing", "logistics", "suppliers", "marketing", "research", "hiring", "leases", "taxes",
    "pensions", "currency", "litigation", "insurance", "software", "energy", "water", "packaging",
    "franchises", "warranties", "recalls", "patents", "training", "security", "freight", "rebates",
]  # fmt: skip
#: Narrative that names every quantity the questions ask and states none of them: the search ranks it
#: above the statements, so the operands are found only by the lookup in the named filing.
NARRATIVE = [
    f"Management's discussion of {topic}.\nHow {topic} affected Contoso's capital expenditures, its"
    f" revenue and its net sales: {topic} drove capital expenditures as a share of revenue, and the"
    f" {topic} programme is reviewed against revenue growth, net sales and the statement of income and"
    f" the cash flow statement each quarter by the people who run {topic} at Contoso."
    for topic in TOPICS
]
THREE_YEARS = ("", "2019", "2018", "2017")


@pytest.fixture(scope="module")
def contoso(tmp_path_factory: pytest.TempPathFactory) -> Home:
    root = tmp_path_factory.mktemp("operand_rows")
    parts = [
        make_pdf(root / "parts" / "narrative.pdf", NARRATIVE),
        statement_pdf(  # a guarantor's one-year summary, in a table titled as a statement
            root / "parts" / "guarantor.pdf",
            ["Summarized financial information of the guarantor subsidiaries: revenue and net sales",
             "Income Statement (in millions)", ("", "Year ended December 31, 2019"),
             ("Net sales", "$ 3,586"), ("Net income", "$ 410")],
        ),
        statement_pdf(  # a year's quarters, each column dated as a year's would be
            root / "parts" / "quarters.pdf",
            ["Supplementary financial information (unaudited): quarterly revenue and net sales",
             "(in millions)", ("", "2019 Mar. 30", "2019 Jun. 29", "2019 Sep. 28", "2019 Dec. 31"),
             ("Net sales", "2,100", "2,250", "2,300", "2,470")],
        ),
        statement_pdf(
            root / "parts" / "income.pdf",
            ["Contoso Corp", "Consolidated Statements of Income", "(in millions)",
             ("", "Years ended December 31,"), THREE_YEARS,
             ("Product sales", "$ 6,020", "$ 5,610", "$ 5,300"),
             ("Service sales", "3,100", "2,800", "2,600"),
             ("Total net sales", "9,120", "8,410", "7,900"),
             ("Cost of sales", "5,470", "5,020", "4,800"),
             ("Operating income", "1,150", "1,020", "900"),
             ("Net income", "$ 1,503", "$ 1,813", "$ 1,200")],
        ),
        statement_pdf(
            root / "parts" / "cash.pdf",
            ["Contoso Corp", "Consolidated Statements of Cash Flows", "(in millions)",
             ("", "Years ended December 31,"), THREE_YEARS,
             ("Net income", "$ 1,503", "$ 1,813", "$ 1,200"),
             ("Depreciation and amortization of property and equipment", "410", "380", "350"),
             ("Net cash provided by operating activities", "2,104", "2,033", "1,950"),
             "Cash flows from investing activities",
             ("Capital expenditures, net of construction payable", "(312)", "(287)", "(250)")],
        ),
    ]  # fmt: skip
    return filing_home(root, "contoso", "CONTOSO_2019_10K.pdf", parts)


@pytest.fixture
def runtime(
    contoso: Home, tmp_path: Path, agent_host: SandboxHost, monkeypatch: pytest.MonkeyPatch
) -> Iterator[Runtime]:
    with report_runtime(contoso, tmp_path, agent_host, monkeypatch) as rt:
        yield rt


def _computed(runtime: Runtime, ask: str) -> str:
    query = runtime.ask(TurnRequest(ask=ask, scope=["contoso"]))
    assert query.status == "completed" and query.answer is not None, query.error
    assert query.synthesis is not None and query.synthesis.assurance == "computed", query.answer
    return query.answer


def test_an_average_of_a_share_reads_every_operand_row_of_one_series(runtime: Runtime) -> None:
    answer = _computed(
        runtime,
        "What is the FY2017 - FY2019 3 year average of capex as a % of revenue for Contoso? Answer in"
        " units of percents and round to one decimal place. Calculate (or extract) the answer from the"
        " statement of income and the cash flow statement.",
    )
    # 250 / 7,900 = 3.16 %, 287 / 8,410 = 3.41 %, 312 / 9,120 = 3.42 %: their mean
    assert answer.startswith("Capex as a percentage of revenue, average over 2017–2019: 3.3 %"), answer
    assert "Capital expenditures, net of construction payable (312)" in answer
    assert "/ 9,120" in answer and "3,586" not in answer  # the statement's row, not the guarantor's


@pytest.mark.parametrize(
    "ask",
    [
        "What is Contoso's year-over-year change in revenue from FY2018 to FY2019 (in units of percents"
        " and round to one decimal place)?",
        "What is the FY2018 - FY2019 total revenue growth rate for Contoso? Answer in units of percents.",
        "By how much did Contoso's revenue grow from FY2018 to FY2019?",
    ],
)
def test_a_change_in_revenue_reads_the_row_statements_call_net_sales(runtime: Runtime, ask: str) -> None:
    answer = _computed(runtime, ask)
    assert answer.startswith("Total net sales grew by 710 million (+8.4 %)"), answer


def test_a_revenue_cagr_reads_net_sales(runtime: Runtime) -> None:
    answer = _computed(
        runtime,
        "What is Contoso's 2 year total revenue CAGR from FY2017 to FY2019 (in units of percents and"
        " round to one decimal place)?",
    )
    # (9,120 / 7,900)^(1/2) − 1 = 7.4 %
    assert answer.startswith("Total net sales grew at a compound annual rate of 7.4 % from 2017 to 2019"), (
        answer
    )


def test_a_margin_of_a_defined_term_reads_the_terms_parts(runtime: Runtime) -> None:
    answer = _computed(
        runtime,
        "What is the FY2019 unadjusted EBITDA % margin for Contoso? Calculate unadjusted EBITDA using"
        " unadjusted operating income and D&A (from cash flow statement).",
    )
    # (1,150 + 410) / 9,120 = 17.1 %, D&A read from the cash flow statement, whose label says what it is of
    assert answer.startswith(
        "FY2019 unadjusted EBITDA % margin: 17.1 % = (EBITDA (Operating income 1,150 [1] + Depreciation and"
        " amortization of property and equipment 410 [2])) / Total net sales 9,120 [3]."
    ), answer
