"""A model-made value is kept only where its quote states it (issue 22, item 2): the forms a writer
may give one figure or date, and the near misses a made-up value is."""

from __future__ import annotations

import pytest

from sleuth.compile.extraction.values import date_in, number_in, text_in

SALES = "Net sales increased 18.2% to $10.2 billion compared to $8,630,929 thousand in fiscal 2021."


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (10.2e9, SALES),
        (10.2, SALES),
        (18.2, SALES),
        (0.182, SALES),
        (8_630_929, SALES),
        (8_630_929_000, SALES),
        (2021, SALES),
        (-370, "an operating loss of (370)"),
        (5, "revenue decreased 5% in the year"),
        (1234.5, "a total of 1,234.5 units"),
        (3, "employees may work remotely three days per week"),
        (2022, "results for FY2022"),
        (12_500, "Globex Inc. shall pay Acme Corp 12,500 USD"),
    ],
)
def test_numbers_stated_in_other_forms_are_found(value: float, text: str) -> None:
    assert number_in(value, text)


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (11.5e9, SALES),
        (18.3, SALES),
        (99_999, "Globex Inc. shall pay Acme Corp 12,500 USD"),
        (1_250, "Globex Inc. shall pay Acme Corp 12,500 USD"),
        (float("inf"), SALES),
        (float("nan"), SALES),
    ],
)
def test_made_up_numbers_are_not(value: float, text: str) -> None:
    assert not number_in(value, text)


def test_dates_in_words_and_figures() -> None:
    assert date_in("2024-03-15", "The board met on March 15, 2024.")
    assert date_in("2024-03-15", "The board met on 15th Mar 2024.")
    assert date_in("2024-03-15", "signed 3/15/2024")
    assert date_in("2024-03", "in March 2024")
    assert date_in("2024", "since 2024")
    assert not date_in("2024-04-15", "The board met on March 15, 2024.")
    assert not date_in("2024-03-16", "The board met on March 15, 2024.")
    assert not date_in("2023-03-15", "The board met on March 15, 2024.")
    assert not date_in("2025-01-01", "Globex Inc. shall pay Acme Corp 13,000 USD by 2024-06-30.")


def test_text_folds_case_spacing_and_marks() -> None:
    assert text_in("Ulta Beauty", "ULTA  BEAUTY, INC. reported")
    assert text_in("O’Neil-Smith", "signed by o'neil–smith")
    assert not text_in("Sephora", "ULTA BEAUTY, INC. reported")
    assert not text_in("  ", "anything")
