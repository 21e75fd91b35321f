"""What a follow-up means (spec/runtime.md §10.1, issue 45 item 5): the previous question with what the
follow-up names in its place — its quantity ("what about net income?") or its period ("and in 2016?").

A chain resolves turn by turn, oldest first: "What was Netflix's net income in 2017?", "And in 2016?",
"And in 2015?" asks for net income in 2015, though the turn before it named no quantity; "What about
revenues?" next keeps 2015. The planner reads the quantity from `Previous.what` and the period from
`Previous.when`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from sleuth.agent.extractive import (
    PRONOUNS,
    asked_months,
    asked_years,
    content_words,
    follow_up_quantity,
    raw_words,
)
from sleuth.format.periods import named_quarter

#: Earlier questions a chain is resolved over: a conversation's last few turns, not its whole history.
MAX_CHAIN = 8


@dataclass(frozen=True)
class Previous:
    """The previous question, its follow-ups resolved: the ask its quantity comes from, and the ask its
    period comes from (the same ask unless a follow-up changed one of them)."""

    what: str
    when: str

    @property
    def text(self) -> str:
        """Both asks, for the words a follow-up's search borrows."""
        return self.what if self.what == self.when else f"{self.what} {self.when}"


def follows_on(ask: str) -> bool:
    """Whether an ask continues the one before it: it goes on from it ("and in 2024?", "what about its
    margin?"), points back (a pronoun), or is too short to stand alone ("gross profit?")."""
    words = raw_words(ask)
    continues = words[:1] in (["and"], ["also"], ["then"]) or words[:2] in (
        ["what", "about"],
        ["how", "about"],
    )
    return continues or any(w in PRONOUNS for w in words) or len(content_words(ask)) <= 2


def names_period(ask: str) -> bool:
    """The ask names a period of its own: a year, a length (`six months`) or a quarter."""
    return bool(asked_years(ask) or asked_months(ask) or named_quarter(ask))


def resolve(asks: Sequence[str]) -> Previous | None:
    """The last of `asks` (oldest first) with every follow-up in the chain resolved; None for none."""
    out: Previous | None = None
    for ask in asks[-MAX_CHAIN:]:
        if out is None or not follows_on(ask):
            out = Previous(ask, ask)
            continue
        what = ask if follow_up_quantity(ask) else out.what
        when = ask if names_period(ask) else out.when
        out = Previous(what, when)
    return out
