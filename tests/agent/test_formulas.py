"""Computations over several periods a question defines (issue 45, item 2): averages and sums over a run
of years, compound growth, and formulas spelled with symbols, each operand a cited cell — through the
offline planner on a small annual report with three years of statements — and declined, never guessed,
when the cells do not hold an operand or the definition leans on another definition."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from sleuth.agent.arithmetic import changed_quantity
from sleuth.agent.formulas import other_names, over_periods, row_words, spanned_years, spelled_out, worked_out
from sleuth.agent.turn import Runtime, TurnRequest
from sleuth.sandbox import SandboxHost
from sleuth.store.contexts.home import Home
from tests.agent.support import report_home, report_runtime

YEARS = "Year ended December 31, 2019 | Year ended December 31, 2018 | Year ended December 31, 2017"
REPORT = f"""# Contoso Games annual report 2019

## Consolidated statements of operations

| (Amounts in millions) | {YEARS} |
|---|---|---|---|
| Net revenues | 6,489 | 7,500 | 7,017 |
| Cost of revenues | 2,000 | 2,517 | 2,501 |
| Operating income | 1,607 | 1,988 | 1,309 |
| Net income | 1,503 | 1,813 | 273 |

## Consolidated balance sheets

| (Amounts in millions) | December 31, 2019 | December 31, 2018 |
|---|---|---|
| Inventories | 120 | 100 |
| Property and equipment, net | 253 | 282 |
| Accounts payable | 292 | 253 |

## Key metrics

| (Amounts in days) | December 31, 2019 | December 31, 2018 |
|---|---|---|
| Days payable outstanding | 44 | 40 |

## Consolidated statements of cash flows

| (Amounts in millions) | {YEARS} |
|---|---|---|---|
| Capital expenditures | (116) | (131) | (155) |
"""


def _row(
    ref: str, label: str, year: int, text: str, value: float, unit: str | None = "millions"
) -> list[Any]:
    """A plan's cell entry as `StepCode._figure_lines` prints it."""
    header = f"Year ended December 31, {year}"
    return [ref, label, header, text, unit, "report.md", 1, value, "", year]


ROWS = [
    _row("E1", "Net revenues", 2017, "7,017", 7017),
    _row("E2", "Net revenues", 2018, "7,500", 7500),
    _row("E3", "Net revenues", 2019, "6,489", 6489),
    _row("E4", "Property and equipment, net", 2018, "282", 282),
    _row("E5", "Property and equipment, net", 2019, "253", 253),
    _row("E6", "Net income", 2017, "273", 273),
    _row("E7", "Net income", 2019, "1,503", 1503),
]


def test_runs_of_years_and_the_questions_this_module_answers() -> None:
    assert spanned_years("the FY2017 - FY2019 3 year average") == (2017, 2018, 2019)
    assert spanned_years("from FY2020 to FY2022") == (2020, 2021, 2022)
    assert spanned_years("average PP&E between FY2018 and FY2019") == (2018, 2019)
    assert spanned_years("revenue in 2019") == ()
    assert spanned_years("from 1990 to 2019") == ()  # longer than a filing's tables go
    assert (
        spelled_out("average PP&E and COGS") == "average property plant and equipment and cost of goods sold"
    )
    assert over_periods("What is the FY2017 - FY2019 3 year average net profit margin?")
    assert over_periods("What is the 2 year revenue CAGR from FY2020 to FY2022?")
    assert over_periods(
        "ROA is defined as: FY2017 net income / (average total assets between FY2016 and FY2017)"
    )
    # one period's arithmetic, and a definition in words, are `arithmetic.worked`'s
    assert not over_periods("By how much did net income grow from 2018 to 2019?")
    assert not over_periods(
        "What is the 2025 operating margin, defined as operating income divided by revenue?"
    )


def test_a_missing_year_or_an_undefined_term_is_declined_not_guessed() -> None:
    # 2018's net income is not among the cells: no average of the other two years
    assert worked_out("What is the FY2017 - FY2019 3 year average net profit margin?", ROWS) is None
    # a term defined by another definition (DSO, DPO) is outside the grammar
    ccc = "What is the FY2019 CCC? CCC is defined as: DIO + DSO - DPO. DIO is defined as: 365 * inventory."
    assert worked_out(ccc, ROWS) is None
    # a growth rate needs the same row in both years
    assert (
        worked_out("What is the 2 year net income CAGR from FY2017 to FY2019?", ROWS[:1] + ROWS[5:6]) is None
    )
    # one year's figure in thousands and another's in millions are not averaged as printed
    thousands = [_row("T1", "Net income", 2018, "1,813,000", 1813000, "thousands"), *ROWS[6:]]
    assert worked_out("What was the average net income from 2018 to 2019?", thousands) is None
    same = [_row("T1", "Net income", 2018, "1,813", 1813), *ROWS[6:]]
    assert worked_out("What was the average net income from 2018 to 2019?", same) is not None
    # millions and a figure with no unit are not added
    mixed = [*ROWS, _row("E9", "Employees", 2019, "9,500", 9500, None)]
    sum_ask = "What is the 2019 total? Total is defined as: FY2019 net revenues + FY2019 employees."
    assert worked_out(sum_ask, mixed) is None


def test_a_margin_reads_the_names_statements_give_its_profit_and_revenue() -> None:
    """Best Buy's statement says `Net earnings` and Corning's `Net sales`: a net margin is still net
    income over revenue, and the step reads those rows (`row_words`)."""
    rows = [
        _row("E1", "Net earnings", 2015, "1,233", 1233),
        _row("E2", "Net earnings", 2016, "897", 897),
        _row("E3", "Revenue", 2015, "40,339", 40339),
        _row("E4", "Revenue", 2016, "39,528", 39528),
    ]
    done = worked_out("What is the FY2015 - FY2016 2 year average net profit margin for Best Buy?", rows)
    assert done is not None and done.sentence.startswith("Net margin, average over 2015–2016: 2.7 %")
    assert {"earning", "sale"} <= set(row_words("What is the average operating margin and net margin?"))


def test_a_term_reads_the_row_statements_label_it_with() -> None:
    """Adobe's "operating cash flow ratio … defined as: cash from operations / total current liabilities":
    the cash flow statement labels it `Net cash provided by operating activities`."""
    rows = [
        _row("E1", "Net cash provided by operating activities", 2017, "2,912,853", 2912853, "thousands"),
        _row("E2", "Total current liabilities", 2017, "3,527,457", 3527457, "thousands"),
        _row("E3", "Total liabilities", 2017, "6,075,687", 6075687, "thousands"),
    ]
    ask = (
        "What is the FY2017 operating cash flow ratio for Adobe? Operating cash flow ratio is defined as:"
        " cash from operations / total current liabilities."
    )
    done = worked_out(ask, rows)
    assert done is not None and done.sentence.startswith(
        "FY2017 operating cash flow ratio for Adobe: 0.83 = "
    )
    assert done.refs == ["E1", "E2"]
    assert "activity" in row_words(ask)


def test_a_formula_reads_each_term_in_its_year_and_shows_the_working() -> None:
    ask = (
        "What is the FY2019 fixed asset turnover ratio? Fixed asset turnover ratio is defined as: FY2019 "
        "revenue / (average PP&E between FY2018 and FY2019). Round your answer to two decimal places."
    )
    done = worked_out(ask, ROWS)
    assert done is not None
    assert done.sentence == (
        "FY2019 fixed asset turnover ratio: 24.26 = Net revenues 6,489 [E3] / ((Property and equipment, net"
        " 282 [E4] + 253 [E5]) / 2)."
    )
    assert done.refs == ["E3", "E4", "E5"]


@pytest.fixture(scope="module")
def contoso(tmp_path_factory: pytest.TempPathFactory) -> Home:
    """The report compiled once for the module (the tests only read it)."""
    return report_home(tmp_path_factory.mktemp("contoso"), "contoso", REPORT)


@pytest.fixture
def runtime(
    contoso: Home, tmp_path: Path, agent_host: SandboxHost, monkeypatch: pytest.MonkeyPatch
) -> Iterator[Runtime]:
    with report_runtime(contoso, tmp_path, agent_host, monkeypatch) as rt:
        yield rt


@pytest.mark.parametrize(
    ("ask", "answer", "cells"),
    [
        (
            "What is the FY2017 - FY2019 3 year average of capex as a % of revenue for Contoso?",
            "Capex as a percentage of revenue, average over 2017–2019: 1.9 % = (2.2 % + 1.7 %"
            " + 1.8 %) / 3 (2017: 2.2 % = Capital expenditures (155) [1] / 7,017 [2]; 2018: 1.7 % = Capital"
            " expenditures (131) [3] / 7,500 [4]; 2019: 1.8 % = Capital expenditures (116) [5] / 6,489 [6]).",
            ["(155)", "7,017", "(131)", "7,500", "(116)", "6,489"],
        ),
        (
            "What is the FY2017 - FY2019 3 year average net profit margin (as a %) for Contoso?",
            "Net margin, average over 2017–2019: 17.1 % = (3.9 % + 24.2 % + 23.2 %) / 3 (2017: 3.9 % = Net"
            " income 273 [1] / 7,017 [2]; 2018: 24.2 % = Net income 1,813 [3] / 7,500 [4]; 2019: 23.2 % = Net"
            " income 1,503 [5] / 6,489 [6]).",
            ["273", "7,017", "1,813", "7,500", "1,503", "6,489"],
        ),
        (
            "What is Contoso's 2 year net revenues CAGR from FY2017 to FY2019?",
            "Net revenues fell at a compound annual rate of -3.8 % from 2017 to 2019: -3.8 % = (6,489 [1] /"
            " 7,017 [2])^(1/2) − 1.",
            ["6,489", "7,017"],
        ),
        (
            "What is Contoso's FY2019 days payable outstanding (DPO)? DPO is defined as: 365 * (average"
            " accounts payable between FY2018 and FY2019) / (FY2019 COGS + change in inventory between"
            " FY2018 and FY2019).",
            "Contoso's FY2019 days payable outstanding (DPO): 49.24 = 365 × ((Accounts payable 253 [1] + 292"
            " [2]) / 2) / (Cost of revenues 2,000 [3] + (Inventories 120 [4] − 100 [5])).",
            ["253", "292", "2,000", "120", "100"],
        ),
    ],
)
def test_a_computation_over_periods_is_worked_out_from_cited_cells(
    runtime: Runtime, ask: str, answer: str, cells: list[str]
) -> None:
    query = runtime.ask(TurnRequest(ask=ask, scope=["contoso"]))
    assert query.status == "completed", query.error
    assert query.answer == answer
    assert query.synthesis is not None and query.synthesis.assurance == "computed"
    # each operand's citation is its cell, in the order the working reads them
    assert [c.cell.rsplit(": ", 1)[1] if c.cell else None for c in query.citations[: len(cells)]] == cells


def test_a_definition_it_cannot_work_out_lists_the_figures(runtime: Runtime) -> None:
    ask = (
        "What is Contoso's FY2019 cash conversion cycle? CCC is defined as: DIO + DSO - DPO. DIO is defined"
        " as: 365 * (average inventory between FY2018 and FY2019) / (FY2019 COGS)."
    )
    query = runtime.ask(TurnRequest(ask=ask, scope=["contoso"]))
    assert query.status == "completed", query.error
    assert query.synthesis is not None and query.synthesis.assurance != "computed"
    assert query.answer is not None and "=" not in query.answer.split("\n")[0]


def test_a_formula_it_cannot_work_out_is_not_answered_by_a_row_of_the_same_name(runtime: Runtime) -> None:
    """FinanceBench's Corning: "DPO is defined as: 365 * (average accounts payable …) / (FY2020 COGS +
    change in inventory …)" was answered with the filing's own `Days payable outstanding` row (44 days,
    its definition, not the asked one: 63.86). With an operand missing (2017's inventory), the figures
    are listed and the row is not stated as the answer."""
    ask = (
        "What is Contoso's FY2019 days payable outstanding? DPO is defined as: 365 * (average accounts"
        " payable between FY2018 and FY2019) / (FY2019 COGS + change in inventory between FY2017 and FY2019)."
    )
    query = runtime.ask(TurnRequest(ask=ask, scope=["contoso"]))
    assert query.status == "completed", query.error
    assert query.answer is not None and query.answer.startswith("The figures the question names"), (
        query.answer
    )
    assert query.synthesis is not None and query.synthesis.assurance == "nearest"


def test_a_follow_up_moves_the_definition_to_its_year_and_never_states_the_same_name_row(
    runtime: Runtime,
) -> None:
    """ "And in FY2018?" after a formula asks the formula one year earlier. The planner read the
    computation from the raw follow-up, found none, and stated the filing's own `Days payable
    outstanding` for 2018 (40 days), a row of the same name. Now every year of the definition moves by
    one: 2017's payables are not in the report, so the figures are listed and no row is stated."""
    dpo = (
        "What is Contoso's FY2019 days payable outstanding (DPO)? DPO is defined as: 365 * (average"
        " accounts payable between FY2018 and FY2019) / (FY2019 COGS + change in inventory between"
        " FY2018 and FY2019)."
    )
    first = runtime.ask(TurnRequest(ask=dpo, scope=["contoso"]))
    assert first.answer is not None and first.answer.startswith("Contoso's FY2019 days payable outstanding")
    then = runtime.ask(TurnRequest(ask="And in FY2018?", scope=["contoso"], session_id=first.session_id))
    assert then.status == "completed" and then.answer is not None, then.error
    assert then.answer.startswith("The figures the question names"), then.answer
    # the formula was read for 2018: its operands' 2018 cells are among the figures listed
    assert "Accounts payable, Dec 31, 2018: 253" in then.answer and "Dec 31, 2019" not in then.answer
    assert then.synthesis is not None and then.synthesis.assurance == "nearest"


def test_a_follow_up_asks_the_previous_computation_for_the_years_it_names(runtime: Runtime) -> None:
    """A growth rate's follow-up with its own two years is the same computation over those years."""
    first = runtime.ask(
        TurnRequest(
            ask="What is Contoso's 2 year net revenues CAGR from FY2017 to FY2019?", scope=["contoso"]
        )
    )
    assert first.answer is not None and "-3.8 %" in first.answer
    then = runtime.ask(
        TurnRequest(ask="And from FY2018 to FY2019?", scope=["contoso"], session_id=first.session_id)
    )
    assert then.answer is not None, then.error
    assert then.answer.startswith("Net revenues fell at a compound annual rate of -13.5 % from 2018 to 2019")
    assert then.synthesis is not None and then.synthesis.assurance == "computed"


@pytest.mark.parametrize(
    ("ask", "answer"),
    [
        (
            "What is Contoso's FY2019 gross profit? Define gross profit as net revenues less cost of"
            " revenues.",
            "Contoso's FY2019 gross profit: 4,489.00 = Net revenues 6,489 [1] − Cost of revenues 2,000 [2].",
        ),
        (
            "What is Contoso's FY2019 cost ratio? Define cost ratio as cost of revenues divided by net"
            " revenues.",
            "Cost of revenues / net revenues for 2019: 0.31 = Cost of revenues 2,000 [1] / Net revenues"
            " 6,489 [2].",
        ),
    ],
)
def test_a_definition_in_words_is_worked_out(runtime: Runtime, ask: str, answer: str) -> None:
    """FinanceBench's "Define net working capital as total current assets less total current
    liabilities" and "Define working capital ratio as A divided by B" were listed as figures: the
    planner read only "defined as" and symbols."""
    query = runtime.ask(TurnRequest(ask=ask, scope=["contoso"]))
    assert query.status == "completed", query.error
    assert query.synthesis is not None and query.synthesis.assurance == "computed", query.answer
    assert query.answer == answer


def test_a_definition_the_asked_quantity_only_leans_on_is_not_the_answer() -> None:
    """PepsiCo's "unadjusted EBITDA less capex" defines EBITDA only: working out EBITDA would answer
    another question."""
    ask = (
        "What is the FY2019 net revenues less capex for Contoso? Define net revenues as net revenues"
        " + operating income."
    )
    assert not over_periods(ask)


def test_pp_and_e_is_the_net_row_where_a_note_also_gives_the_gross_total() -> None:
    """CVS's note gives `Total property and equipment` (gross, 26,869) beside `Property and equipment,
    net` (11,349, the balance sheet's): the turnover was worked out over the gross cost (7.61, not
    17.98). Of rows that name a quantity alike, the net one is read."""
    rows = [
        _row("E1", "Net revenues", 2019, "6,489", 6489),
        _row("E2", "Total property and equipment", 2018, "820", 820),
        _row("E3", "Total property and equipment", 2019, "871", 871),
        _row("E4", "Property and equipment, net", 2018, "282", 282),
        _row("E5", "Property and equipment, net", 2019, "253", 253),
    ]
    ask = (
        "What is the FY2019 fixed asset turnover ratio? Fixed asset turnover ratio is defined as: FY2019"
        " revenue / (average PP&E between FY2018 and FY2019)."
    )
    done = worked_out(ask, rows)
    assert done is not None and done.refs == ["E1", "E4", "E5"], done


def test_a_quantitys_other_names_are_the_fields_not_the_corpus() -> None:
    assert other_names("What is the FY2016 COGS for Microsoft?")[:2] == [
        "cost of goods sold",
        "cost of sales",
    ]
    assert "purchases of property plant and equipment" in other_names("the FY2018 capital expenditure amount")
    assert other_names("What were net sales in 2019?") == []
    # only the names of a quantity the question asks wholly: "EBITDA less capex" is not capex
    assert other_names("What is the FY2022 unadjusted EBITDA less capex?", ["ebitda", "less", "capex"]) == []
    assert other_names("What is the FY2018 capital expenditure amount?", ["capital", "expenditure"])
    assert other_names("What is the FY2016 COGS for Microsoft?", ["cog"])
    # revenue's other name, for revenue asked wholly ("total revenue" is revenue; "deferred revenue" is not)
    assert other_names("What was the total revenue in 2019?", ["total", "revenue"]) == ["net sales"]
    assert other_names("What was deferred revenue in 2019?", ["deferred", "revenue"]) == []


@pytest.mark.parametrize(
    ("ask", "quantity"),
    [
        ("By how much did Contoso's revenue grow from 2018 to 2019?", "revenue"),
        ("What is Amazon's year-over-year change in revenue from FY2016 to FY2017?", "revenue"),
        ("What is the FY2019 - FY2020 total revenue growth rate for Block?", "total revenue"),
        ("What was the change in operating income of Contoso between 2018 and 2019?", "operating income"),
        ("What was revenue in 2019?", None),
    ],
)
def test_a_change_question_names_its_quantity_in_each_phrasing(ask: str, quantity: str | None) -> None:
    assert changed_quantity(ask) == quantity


def test_a_name_inside_a_change_question_is_whose_the_quantity_is() -> None:
    """ "Was there any change in the number of Best Buy stores between …" stated a row called `Best Buy`
    (a share of something) as the store count's change."""
    assert changed_quantity(
        "Was there any change in the number of Best Buy stores between Q2 of FY2024 and FY2023?"
    ) == ("number of stores")


def test_total_assets_is_never_net_assets_and_consolidated_qualifies() -> None:
    """Coca-Cola's ROA read `Net assets` (a subsidiary's, in a table titled after the balance sheet) for
    "average total assets", and its `CONSOLIDATED NET INCOME` was no net income to the step."""
    rows = [
        ["E1", "Net assets", "December 31 2017", "18,977", "millions", "p", 70, 18977.0, "", 2017, True],
        ["E2", "Net assets", "December 31 2016", "23,220", "millions", "p", 70, 23220.0, "", 2016, True],
        ["E3", "Total assets", "December 31 2017", "87,896", "millions", "p", 72, 87896.0, "", 2017, False],
        ["E4", "Total assets", "December 31 2016", "87,270", "millions", "p", 72, 87270.0, "", 2016, False],
        [
            "E5",
            "CONSOLIDATED NET INCOME",
            "Year Ended December 31 2017",
            "1,283",
            "millions",
            "p",
            49,
            1283.0,
            "",
            2017,
        ],
    ]
    ask = (
        "What is the FY2017 return on assets (ROA) for Coca Cola? ROA is defined as: FY2017 net income /"
        " (average total assets between FY2016 and FY2017). Use the balance sheet."
    )
    done = worked_out(ask, rows)
    assert done is not None and "Total assets" in done.sentence and "Net assets" not in done.sentence, done
    assert done.sentence.startswith(
        "FY2017 return on assets (ROA) for Coca Cola: 0.01 = CONSOLIDATED NET INCOME"
    )
    assert spelled_out("net PPNE") == "net property plant and equipment net"
