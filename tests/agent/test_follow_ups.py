"""What a follow-up means (issue 45, item 5): the previous question's computation moved to the period the
follow-up names, or declined when its years do not line up."""

from __future__ import annotations

from sleuth.agent.follow_ups import moved_to, resolve

DPO = "What is the FY2019 DPO? DPO is 365 * (average payables between FY2018 and FY2019) / FY2019 COGS."


def test_one_year_moves_every_year_of_the_definition_by_the_same_step() -> None:
    assert moved_to(DPO, "And in FY2018?") == (
        "What is the FY2018 DPO? DPO is 365 * (average payables between FY2017 and FY2018) / FY2018 COGS."
    )
    assert moved_to("Revenue growth from 2016 to 2017?", "And from 2017 to 2018?") == (
        "Revenue growth from 2017 to 2018?"
    )


def test_years_that_do_not_line_up_are_not_guessed() -> None:
    three = "What were revenues in 2017, 2018 and 2019?"
    assert moved_to(three, "And in 2020 and 2021?") is None
    # a run's two ends move to the two years named
    span = "What is the FY2017 - FY2019 3 year average net margin?"
    assert moved_to(span, "And for 2018 to 2020?") == "What is the FY2018 - FY2020 3 year average net margin?"
    # a question with no years, or a follow-up naming none, is read as it is
    assert moved_to("What is the gross margin?", "And in 2019?") == "What is the gross margin?"
    assert moved_to(DPO, DPO) == DPO


def test_a_chain_keeps_the_quantitys_question_and_the_last_period() -> None:
    chain = resolve([DPO, "And in FY2018?", "And in FY2017?"])
    assert chain is not None and chain.what == DPO and chain.when == "And in FY2017?"
    assert moved_to(chain.what, chain.when) is not None
    assert "FY2016 and FY2017" in (moved_to(chain.what, chain.when) or "")
