"""A table cell said as a person reads it (issue 39, item 5)."""

from __future__ import annotations

import pytest

from sleuth.format.figures import cell_caption, period_phrase, printed_figure, row_name


@pytest.mark.parametrize(
    ("header", "said"),
    [
        ("Years ended December 31 2018", "year ended Dec 31, 2018"),
        ("MAY 31 2019", "May 31, 2019"),
        ("Three Months Ended\nSept. 30, 2024", "Three months ended Sep 30, 2024"),
        ("2025", "2025"),
        ("", ""),
        (None, ""),
    ],
)
def test_periods(header: str | None, said: str) -> None:
    assert period_phrase(header) == said


def test_figures_rows_and_captions() -> None:
    assert printed_figure("$ 8.89") == "$8.89" and printed_figure("$ (1,577)") == "$(1,577)"
    assert printed_figure("12.5 %") == "12.5 %"
    assert row_name("Diluted", "Earnings per share:") == "Earnings per share — Diluted"
    assert row_name("Net income", "Results") == "Net income"  # a label of two words names itself
    assert row_name("Total revenue", "Revenue") == "Total revenue"  # the group is in the label already
    assert (
        cell_caption("Diluted", "Earnings per share", "Years ended December 31 2018", "$ 8.89")
        == "Earnings per share — Diluted, year ended Dec 31, 2018: $8.89"
    )
    assert cell_caption("Revenue", None, None, "48.2") == "Revenue: 48.2"
