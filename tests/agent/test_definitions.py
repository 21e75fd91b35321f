"""Terms a question defines on the way to what it asks (issue 45, item 2), found on FinanceBench's held-back
computations: "Define unadjusted EBITDA as … What is the EBITDA less capex", "CCC is defined as: DIO + DSO
- DPO. DIO is defined as: …", "the EBITDA % margin" (EBITDA being the field's own term), and a sum
written into the question itself. Each was listed, not worked out; each is now computed from the cells,
every operand cited — or declined where a cell is missing."""

from __future__ import annotations

from typing import Any

import pytest

from sleuth.agent.definitions import definition_words, terms
from sleuth.agent.formulas import worked_out

PATH = "uploads/CONTOSO_2019_10K.pdf"


def _row(ref: str, label: str, year: int, text: str, title: bool = True, unit: str = "millions") -> list[Any]:
    value = (
        -float(text.strip("()").replace(",", "")) if text.startswith("(") else float(text.replace(",", ""))
    )
    return [ref, label, f"Year ended Dec 31, {year}", text, unit, PATH, 3, value, "", year, title]


ROWS = [
    _row("E1", "Net sales", 2019, "9,120"),
    _row("E2", "Net sales", 2018, "8,410"),
    _row("E3", "Operating profit", 2019, "1,150"),
    _row("E4", "Operating profit", 2018, "1,020"),
    _row("E5", "Depreciation and amortization", 2019, "410"),
    _row("E6", "Depreciation and amortization", 2018, "380"),
    _row("E7", "Capital spending", 2019, "(520)"),
    _row("E8", "Inventories", 2019, "1,559"),
    _row("E9", "Inventories", 2018, "1,642"),
    _row("E10", "Cost of sales", 2019, "5,470"),
    _row("E11", "Receivables", 2019, "1,680"),
    _row("E12", "Receivables", 2018, "1,684"),
    _row("E13", "Accounts payable", 2019, "2,854"),
    _row("E14", "Accounts payable", 2018, "2,746"),
    # a deferred tax table's line of the same name, in a table the question does not point at
    _row("E15", "Inventories", 2019, "39", title=False),
    _row("E16", "Inventories", 2018, "38", title=False),
]


def test_terms_are_the_questions_definitions_then_the_fields() -> None:
    ask = (
        "What is the FY2019 CCC? CCC is defined as: DIO + DSO - DPO. DIO is defined as: 365 * (average"
        " inventory between FY2018 and FY2019) / (FY2019 COGS). Define unadjusted EBITDA as operating income"
        " plus D&A."
    )
    found = terms(ask)
    assert found["ccc"] == "DIO + DSO - DPO"
    assert found["dio"].startswith("365 * (average inventory")
    assert found["ebitda"] == "operating income + D&A"  # the question's own, in symbols, over the field's
    # EBITDA named and not defined: the field's definition
    assert terms("What is the FY2019 EBITDA margin?") == {
        "ebitda": "operating income + depreciation and amortization from the cash flow statement"
    }
    assert terms("What was net income in 2019?") == {}


@pytest.mark.parametrize(
    ("ask", "answer"),
    [
        (
            "What is the FY2019 unadjusted EBITDA % margin for Contoso? Calculate unadjusted EBITDA using"
            " unadjusted operating income and D&A (from cash flow statement).",
            # (1,150 + 410) / 9,120
            "FY2019 unadjusted EBITDA % margin: 17.1 % = (EBITDA (Operating profit 1,150 [E3] + Depreciation"
            " and amortization 410 [E5])) / Net sales 9,120 [E1].",
        ),
        (
            "What is the FY2019 unadjusted EBITDA less capex for Contoso? Define unadjusted EBITDA as"
            " unadjusted operating income + depreciation and amortization [from cash flow statement].",
            # capital spending printed (520) is subtracted by its size: 1,560 − 520
            "FY2019 unadjusted EBITDA less capex: 1,040.00 million = (EBITDA (Operating profit 1,150 [E3] +"
            " Depreciation and amortization 410 [E5])) − (Capital spending (520) [E7]).",
        ),
        (  # whose it is and its unit, in either order: "… for Contoso in USD millions"
            "What is the FY2019 unadjusted EBITDA less capex for Contoso in USD millions? Define unadjusted"
            " EBITDA as unadjusted operating income + depreciation and amortization.",
            "FY2019 unadjusted EBITDA less capex: 1,040.00 million = (EBITDA (Operating profit 1,150 [E3] +"
            " Depreciation and amortization 410 [E5])) − (Capital spending (520) [E7]).",
        ),
        (
            "What is Contoso's FY2019 unadjusted operating income + depreciation and amortization from the"
            " cash flow statement (unadjusted EBITDA) in USD millions?",
            "FY2019 unadjusted operating income + depreciation and amortization from the cash flow statement:"
            " 1,560.00 million = Operating profit 1,150 [E3] + Depreciation and amortization 410 [E5].",
        ),
        (
            "What is the FY2018 - FY2019 2 year average unadjusted EBITDA % margin for Contoso? Define"
            " unadjusted EBITDA as unadjusted operating income + depreciation and amortization.",
            # (1,020 + 380) / 8,410 = 16.6 %; (1,150 + 410) / 9,120 = 17.1 %
            "EBITDA % margin, average over 2018–2019: 16.9 % = (16.6 % + 17.1 %) / 2",
        ),
    ],
)
def test_a_quantity_built_on_a_defined_term_is_worked_out(ask: str, answer: str) -> None:
    done = worked_out(ask, ROWS)
    assert done is not None and done.sentence.startswith(answer), done


def test_terms_defined_by_terms_are_worked_out_from_the_statements_the_question_points_at() -> None:
    ask = (
        "What is the FY2019 cash conversion cycle (CCC)? CCC is defined as: DIO + DSO - DPO. DIO is defined"
        " as: 365 * (average inventory between FY2018 and FY2019) / (FY2019 COGS). DSO is defined as: 365 *"
        " (average accounts receivable between FY2018 and FY2019) / (FY2019 Revenue). DPO is defined as:"
        " 365 * (average accounts payable between FY2018 and FY2019) / (FY2019 COGS + change in inventory"
        " between FY2018 and FY2019). Use the income statement and the balance sheet."
    )
    done = worked_out(ask, ROWS)
    assert done is not None, done
    dio = 365 * (1642 + 1559) / 2 / 5470
    dso = 365 * (1684 + 1680) / 2 / 9120
    dpo = 365 * (2746 + 2854) / 2 / (5470 + (1559 - 1642))
    assert done.sentence.startswith(f"FY2019 cash conversion cycle (CCC): {dio + dso - dpo:,.2f} = DIO ("), (
        done
    )
    assert "[E15]" not in done.sentence  # the deferred tax table's `Inventories` 39 is not the balance


def test_a_term_no_cell_explains_is_declined() -> None:
    ask = "What is the FY2019 unadjusted EBITDA % margin? Calculate EBITDA using operating income and D&A."
    assert worked_out(ask, [r for r in ROWS if "Depreciation" not in r[1]]) is None
    # a quantity built on nothing the question or the field defines is not this module's
    assert worked_out("What is the FY2019 working capital less capex?", ROWS) is None


def test_a_margin_of_a_quantity_the_field_does_not_name_is_declined() -> None:
    """A contribution margin is revenue less variable costs, not a `Contributions` row over revenue."""
    rows = [*ROWS, _row("E20", "Contributions", 2019, "310")]
    assert worked_out("What is the FY2019 contribution margin for Contoso?", rows) is None
    done = worked_out("What is the FY2019 D&A % margin for Contoso?", rows)  # D&A: the field's
    assert done is not None and done.sentence.startswith("FY2019 D&A % margin: 4.5 %"), done


def test_a_term_read_from_a_named_statement_reads_what_its_label_says_it_is_of() -> None:
    """Netflix's D&A is `Depreciation and amortization of property, equipment and intangibles` in its cash
    flow statement; a deferred tax table's `Depreciation and amortization` (43,204) had been read."""
    rows = [
        _row("E1", "Revenues", 2015, "6,779,511"),
        _row("E2", "Operating income", 2015, "305,826"),
        _row("E3", "Depreciation and amortization of property, equipment and intangibles", 2015, "62,283"),
        _row("E4", "Depreciation and amortization", 2015, "(43,204)", title=False),
    ]
    ask = (
        "What is the FY2015 unadjusted EBITDA % margin for Netflix? Calculate unadjusted EBITDA using"
        " unadjusted operating income and D&A (from cash flow statement)."
    )
    done = worked_out(ask, rows)
    assert done is not None and done.sentence.startswith("FY2015 unadjusted EBITDA % margin: 5.4 %"), done
    assert "[E4]" not in done.sentence
    # with no row of the cash flow statement the question points at, no D&A: declined, not guessed
    assert worked_out(ask, [r for r in rows if r[0] != "E3"]) is None


@pytest.mark.parametrize(
    "ask",
    [
        "What is the FY2015 depreciation and amortization (D&A from cash flow statement) % margin for AMD?",
        "What is the FY2018 - FY2020 3 year average unadjusted EBITDA % margin for Walmart? Define unadjusted"
        " EBITDA as unadjusted operating income + depreciation and amortization.",
    ],
)
def test_a_margins_rows_are_looked_up_by_its_parts_and_revenue(ask: str) -> None:
    """AMD's D&A margin and Walmart's average EBITDA margin read no revenue row when the margin's term
    was not recognised in the words around it; the planner looks rows up by these words."""
    words = definition_words(ask)
    assert {"revenue", "depreciation", "amortization"} <= set(words), words


def test_a_formula_nested_past_any_statements_depth_is_declined_not_a_crash() -> None:
    """A question is hostile until proven otherwise: 1,500 nested brackets had raised RecursionError in
    the planner (the turn failed); now the formula is declined like any other it cannot work out."""
    nested = "(" * 1500 + "FY2019 net sales * 2" + ")" * 1500
    assert worked_out(f"What is the FY2019 X? X is defined as: {nested}.", ROWS) is None
    # twelve levels still work
    assert worked_out(
        f"What is the FY2019 X? X is defined as: {'(' * 12}FY2019 net sales * 2{')' * 12}.", ROWS
    )
