"""Arithmetic a question defines, worked out offline with every operand cited (issue 45, item 2): the
sample annual report's income table (2025 and 2024, in millions) through the offline planner."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from sleuth.agent.arithmetic import Operand, names_quantity, operands, read_words, worked
from sleuth.agent.extractive import asked_quantity
from sleuth.agent.request import TurnRequest
from tests.agent.support import RuntimeFactory
from tests.agent.test_offline import _check_citations


@pytest.mark.parametrize(
    ("ask", "answer", "cells"),
    [
        (
            "What is the 2025 operating margin, defined as operating income divided by revenue?",
            "Operating margin for 2025: 14.3 % = Operating income 6.9 million [1] / Revenue 48.2 million"
            " [2].",
            ["Operating income, 2025: 6.9", "Revenue, 2025: 48.2"],
        ),
        (
            "By how much did operating income change from 2024 to 2025?",
            "Operating income grew by 1.5 million (+27.8 %), from 5.4 million in 2024 [1] to 6.9 million in"
            " 2025 [2] (6.9 − 5.4 = 1.5; 1.5 / 5.4 = +27.8 %).",
            ["Operating income, 2024: 5.4", "Operating income, 2025: 6.9"],
        ),
        (
            "What was research and development as a percentage of revenue in 2025?",
            "Research and development as a percentage of revenue for 2025: 16.0 % = Research and"
            " development 7.7 million [1] / Revenue 48.2 million [2].",
            ["Research and development, 2025: 7.7", "Revenue, 2025: 48.2"],
        ),
        (  # a definition in brackets is its own phrase (Netflix's "operating margin in 2017 (operating
            # income as a share of revenues)" was stated as the rounded 7 % row, not worked out: 7.2 %)
            "What was the operating margin in 2025 (operating income as a percentage of revenue)?",
            "Operating income as a percentage of revenue for 2025: 14.3 % = Operating income 6.9 million [1]"
            " / Revenue 48.2 million [2].",
            ["Operating income, 2025: 6.9", "Revenue, 2025: 48.2"],
        ),
        (
            "What was the gross margin in 2024?",
            "Gross margin for 2024: 57.2 % = Gross profit 24.6 million [1] / Revenue 43.0 million [2].",
            ["Gross profit, 2024: 24.6", "Revenue, 2024: 43.0"],
        ),
    ],
)
def test_a_computation_the_question_defines_is_worked_out_and_each_operand_cited(
    make_runtime: RuntimeFactory, sample_version: Path, ask: str, answer: str, cells: list[str]
) -> None:
    """The figures were listed with "working out the answer needs a model"; now the result, its
    formula and each operand's cell (the table's own change column agrees: +28 %)."""
    query = make_runtime().ask(TurnRequest(ask=ask, scope=["acme"]))
    assert query.status == "completed"
    assert query.answer == answer
    _check_citations(query, sample_version)
    assert [c.cell for c in query.citations] == cells
    assert query.synthesis is not None and query.synthesis.assurance == "computed"


def test_a_computation_without_its_operands_is_not_guessed() -> None:
    """An operand the cells do not hold, two rows the question could mean, units that do not
    reconcile: no result (the planner lists the figures it found instead)."""
    income = Operand("E1", "Operating income", "a.pdf", 2025, "6.9", 6.9, "millions")
    revenue = Operand("E2", "Revenue", "a.pdf", 2025, "48.2", 48.2, "millions")
    shares = Operand("E3", "Revenue", "a.pdf", 2025, "48.2", 48.2, None)
    elsewhere = Operand("E5", "Revenue", "b.pdf", 2025, "46,298", 46298.0, "millions")
    ask = "What is the 2025 operating margin, defined as operating income divided by revenue?"
    rows = [[o.ref, o.label, "2025", o.text, o.unit, "a.pdf", 3, o.value, "", o.year] for o in (income,)]
    assert worked(ask, rows) is None  # no revenue
    mixed = [
        [o.ref, o.label, "2025", o.text, o.unit, "a.pdf", 3, o.value, "", o.year] for o in (income, shares)
    ]
    assert worked(ask, mixed) is None  # millions over a figure without a unit
    both = [
        [o.ref, o.label, "2025", o.text, o.unit, "a.pdf", 3, o.value, "", o.year] for o in (income, revenue)
    ]
    assert worked(ask, both) is not None
    other = [
        [o.ref, o.label, "2025", o.text, o.unit, o.path, 3, o.value, "", o.year] for o in (income, elsewhere)
    ]
    assert worked(ask, other) is None  # another document's revenue (Ulta's income over Best Buy's sales)
    change = [["E4", "Revenue", "Change", "+12%", "millions", "a.pdf", 3, 12.0, "", 2025]]
    assert operands(change) == []  # a change column's cell is no operand
    assert worked("How did revenue change?", both) is None  # no two years named


def test_a_change_of_a_rate_is_in_percentage_points() -> None:
    """Corning's effective tax rate, 20.2 % in 2021 and 22.9 % in 2022: 2.7 points, not "2.7" nor
    a relative change that reads like the rate."""
    rows = [
        ["E1", "Effective tax rate", "2021", "20.2%", "millions", "c.pdf", 32, 20.2, "", 2021],
        ["E2", "Effective tax rate", "2022", "22.9%", "millions", "c.pdf", 32, 22.9, "", 2022],
    ]
    done = worked("How has the effective tax rate changed from 2021 to 2022?", rows)
    assert done is not None and done.sentence == (
        "Effective tax rate grew by 2.7 percentage points, from 20.2% in 2021 [E1] to 22.9% in 2022 [E2]"
        " (22.9 − 20.2 = 2.7)."
    )


@pytest.mark.parametrize(
    ("ask", "label", "named"),
    [
        ("How many employees did 3M have at the end of 2018?", "Employee benefits", False),
        ("What was revenue in 2017?", "Cost of revenue", False),
        ("What was revenue in 2017?", "Net revenues", True),
        ("What was revenue in 2017?", "Revenues, net", True),
        ("What were net sales in 2019?", "Total net sales", True),
        ("What was net income in 2017?", "Net income attributable to Pfizer Inc.", True),
        ("How much cash did Acme have at the end of 2020?", "Cash and cash equivalents", True),
    ],
)
def test_a_row_names_the_asked_quantity_by_its_head_noun(ask: str, label: str, named: bool) -> None:
    """Issue 45, item 1: a head count is not a benefits liability (3M's `Employee benefits 299` was
    stated as its head count), nor is the cost of revenue revenue."""
    assert names_quantity(label, asked_quantity(ask)) is named


def test_a_share_of_a_quantity_and_the_company_name_are_not_the_quantity() -> None:
    """Two rows that share the quantity's words but are something else, read once operands were
    looked up across a whole filing: Best Buy's `% of revenue` (3.6 %) tied with `Revenue` and the
    margin was declined; American Express's `American Express` row (a share price) was read as "the
    effective tax rate of American Express"."""
    quarter = "Three months ended Jul 29, 2023"
    rows = [
        ["E1", "Gross profit", quarter, "2,220", "millions", "b.pdf", 4, 2220.0, "", 2023],
        ["E2", "Revenue", quarter, "$9,583", "millions", "b.pdf", 4, 9583.0, "", 2023],
        ["E3", "% of revenue", quarter, "3.6%", "millions", "b.pdf", 20, 3.6, "", 2023],
    ]
    done = worked("What was Best Buy's gross margin (gross profit over revenue) in 2023?", rows)
    assert done is not None and done.refs == ["E1", "E2"]
    price = [
        ["E1", "American Express", "2021", "$174.60", None, "a.pdf", 40, 174.6, "", 2021],
        ["E2", "American Express", "2022", "$159.71", None, "a.pdf", 40, 159.71, "", 2022],
    ]
    ask = "How much has the effective tax rate of American Express changed between FY2021 and FY2022?"
    assert worked(ask, price) is None


def test_a_margin_reads_its_profit_by_each_name_statements_give_it() -> None:
    """Lockheed Martin's operating margin: its statement says `Operating profit`, and the filing's own
    `Operating margin` row (a segment's) had been stated instead of the computed 12.7 %."""
    rows = [
        ["E1", "Operating profit", "Year ended Dec 31, 2022", "8,348", "millions", "p", 63, 8348.0, "", 2022],
        [
            "E2",
            "Total net sales",
            "Year ended Dec 31, 2022",
            "65,984",
            "millions",
            "p",
            63,
            65984.0,
            "",
            2022,
        ],
    ]
    done = worked(
        "What was Lockheed Martin's operating margin in 2022, operating profit divided by total net sales?",
        rows,
    )
    assert done is not None and done.sentence.startswith(
        "Operating margin for 2022: 12.7 % = Operating profit"
    ), done


def _cells(*cells: tuple[str, str, int, str]) -> list[list[Any]]:
    return [
        [ref, label, f"Year ended {year}", text, "millions", "p", 1, float(text.replace(",", "")), "", year]
        for ref, label, year, text in cells
    ]


@pytest.mark.parametrize(
    ("ask", "cells", "answer"),
    [
        (  # Best Buy: the definition in brackets, without "defined as"
            "What was Best Buy's current ratio (total current assets divided by total current liabilities) at"
            " January 28, 2023?",
            _cells(
                ("E1", "Total current assets", 2023, "8,802"),
                ("E2", "Total current liabilities", 2023, "8,979"),
            ),
            "Best Buy's current ratio for 2023: 0.98 = Total current assets",
        ),
        (  # Verizon: "over" in brackets; the name without its dangling "in"
            "What was Verizon's operating margin in 2022 (operating income over total operating revenues)?",
            _cells(
                ("E1", "Operating Income", 2022, "30,467"),
                ("E2", "Total Operating Revenues", 2022, "136,835"),
            ),
            "Verizon's operating margin for 2022: 22.3 % = Operating Income",
        ),
        (  # Microsoft: "by what percentage did X increase in 2023 over 2022"
            "By what percentage did Microsoft's research and development expense increase in fiscal 2023 over"
            " fiscal 2022?",
            _cells(
                ("E1", "Research and development", 2022, "24,512"),
                ("E2", "Research and development", 2023, "27,195"),
            ),
            "Research and development grew by 2,683 million (+10.9 %)",
        ),
        (  # Walmart: one year "compared with the prior fiscal year"; its own words over revenue's other name
            "By how much did Walmart's total revenues grow in the fiscal year ended January 31, 2020 compared"
            " with the prior fiscal year?",
            _cells(
                ("E1", "Net sales", 2020, "519,926"),
                ("E2", "Net sales", 2019, "510,329"),
                ("E3", "Total revenues", 2020, "523,964"),
                ("E4", "Total revenues", 2019, "514,405"),
            ),
            "Total revenues grew by 9,559 million (+1.9 %), from 514,405 million in 2019",
        ),
    ],
)
def test_a_computation_in_the_analysts_own_phrasing(ask: str, cells: list[list[Any]], answer: str) -> None:
    """The analyst set's misses: each of these was quoted or listed, its operands on one statement."""
    done = worked(ask, cells)
    assert done is not None and done.sentence.startswith(answer), done


def test_a_change_of_an_amount_spent_is_the_change_of_its_size() -> None:
    """Verizon's capital expenditures, printed `(20,286)` and `(23,087)`: the spending grew 13.8 %, and the
    answer had said it "fell"."""
    rows = [
        ["E1", "Capital expenditures", "Year ended 2021", "(20,286)", "millions", "p", 1, -20286.0, "", 2021],
        ["E2", "Capital expenditures", "Year ended 2022", "(23,087)", "millions", "p", 1, -23087.0, "", 2022],
    ]
    done = worked("By how much did Verizon's capital expenditures change from 2021 to 2022?", rows)
    assert done is not None and done.sentence.startswith(
        "Capital expenditures grew (amounts spent, in brackets) by 2,801 million (+13.8 %), from (20,286)"
    ), done
    assert "(23,087 − 20,286 = 2,801; 2,801 / 20,286 = +13.8 %)" in done.sentence


def test_what_share_of_one_quantity_was_spent_on_another() -> None:
    """3M's "What share of net sales did 3M spend on research, development and related expenses": the
    second quantity over the first, its name kept whole (it holds a comma)."""
    rows = _cells(
        ("E1", "Research, development and related expenses", 2022, "1,862"),
        ("E2", "Net sales", 2022, "34,229"),
    )
    ask = "What share of net sales did 3M spend on research, development and related expenses in 2022?"
    done = worked(ask, rows)
    assert done is not None and done.sentence.startswith(
        "Research, development and related expenses as a percentage of net sales for 2022: 5.4 %"
    ), done
    assert read_words(ask) == (["development", "expense", "related", "research"], ["net", "sale"])


def test_a_margin_reads_the_rows_of_each_name_its_profit_has() -> None:
    """The step read only `operating income` rows for "What was Lockheed Martin's operating margin in
    2022?", so the margin could not be worked out and a segment table's own `Operating margin` 10.6 %
    was stated (the consolidated one is 12.7 %): the rows it reads are those `worked` tries."""
    implied = read_words("What was Lockheed Martin's operating margin in 2022?")
    assert implied is not None and {"profit", "operating", "income", "revenue", "sale"} <= set(implied[1])
