"""Tricky cases for the eval's matcher (issue 11, 6): an answer is correct for what it claims, never for
a year it shares with the gold, a number inside a cited file name, or a page reference."""

from __future__ import annotations

import pytest

from sleuth.agent.evaluation import numeric_match, score_answer
from sleuth.agent.evaluation.report import summarize
from sleuth.agent.evaluation.runner import QuestionResult


@pytest.mark.parametrize(
    ("predicted", "gold", "expected"),
    [
        # Years frame a statement: sharing one is not being right.
        ("Revenue fell in 2022 and 2023.", "Yes, dividends were paid in 2022 and 2023.", None),
        ("In 2023 it grew.", "The decline in 2023 was driven by lower volumes.", None),
        ("The filing for fiscal 2022 says $5.1 billion.", "$4.2 billion in fiscal 2022", False),
        # ... unless the gold is nothing but a date.
        ("It happened in 2015 [1].", "2015", True),
        ("In fiscal 2019.", "In fiscal 2019.", True),
        ("The year ended on March 31, 2023.", "The fiscal year ended March 31, 2023", True),
        ("It was 2016.", "2015", False),
        # Units and scales.
        ("$1.577 billion", "$1,577 million", True),
        ("1,577", "$1,577 million", True),  # a table "in millions"
        ("$1,577 thousand", "$1,577 million", False),
        ("12.5%", "0.125", True),
        ("12.5 percentage points", "12.5%", True),
        ("up 3%", "3.4%", False),
        # Negatives.
        ("a loss of $(12.3) million", "-$12.3 million", True),
        ("net income of $12.3 million", "-$12.3 million", False),
        ("cash flow decreased by 12.3 million", "-12.3 million", True),
        # Percentages against fractions and ratios.
        ("0.45", "45%", True),
        ("45", "45%", True),
    ],
)
def test_numeric_cases(predicted: str, gold: str, expected: bool | None) -> None:
    assert numeric_match(predicted, gold) is expected


def test_cited_file_names_are_not_figures_even_with_spaces() -> None:
    path = "uploads/financebench/AMD 2022 10K.pdf"
    answer = f"According to {path} p. 47 [1], see AMD 2022 10K.pdf."
    assert numeric_match(answer, "2022") is True  # the bare pattern sees `10K.pdf`, not the year
    assert numeric_match(answer, "2022", [path]) is False  # the cited path, spaces and all, is gone
    assert numeric_match(answer, "47 employees", [path]) is False  # a page reference is not a figure
    right = score_answer(
        f"Revenue was $23.6 billion [1].\n\nSources: [1] {path} p.47", "$23.6 billion", [path]
    )
    assert right.numeric is True and right.correct


@pytest.mark.parametrize(
    ("predicted", "gold", "expected"),
    [
        ("The company did not disclose it.", "Not disclosed", True),
        ("It was $5 million.", "Not disclosed", False),
        ("No, it did not.", "Yes, it did.", False),
        ("Yes [1].", "Yes", True),
    ],
)
def test_not_disclosed_and_yes_no_answers(predicted: str, gold: str, expected: bool) -> None:
    assert score_answer(predicted, gold).correct is expected


def _result(system: str, numeric: bool | None, page_hit: bool | None) -> QuestionResult:
    return QuestionResult(
        system=system, id="q", question="?", gold="g", answer="a", status="completed", error=None,
        correct=bool(numeric), match=bool(numeric), numeric=numeric, text=None, judge=None, steps=1,
        input_tokens=0, output_tokens=0, evidence_tokens=0, latency_s=0.1, citations=1, citations_valid=1,
        citation_validity=1.0, evidence_page_hit=page_hit,
    )  # fmt: skip


def test_figure_match_and_page_hit_are_reported_apart() -> None:
    [row] = summarize(
        [
            _result("s", True, False),
            _result("s", False, True),
            _result("s", None, True),
            _result("s", None, None),
        ]
    )
    assert (row.figure_match_rate, row.with_gold_figures) == (0.5, 2)
    assert row.evidence_page_hit_rate == pytest.approx(2 / 3) and row.with_gold_evidence == 3
