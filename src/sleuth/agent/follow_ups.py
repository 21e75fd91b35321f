"""What a follow-up means (spec/runtime.md §10.1, issue 45 item 5): the previous question with what the
follow-up names in its place — its quantity ("what about net income?") or its period ("and in 2016?").

A chain resolves turn by turn, oldest first: "What was Netflix's net income in 2017?", "And in 2016?",
"And in 2015?" asks for net income in 2015, though the turn before it named no quantity; "What about
revenues?" next keeps 2015. The planner reads the quantity from `Previous.what` and the period from
`Previous.when`.
"""

from __future__ import annotations

import re
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

#: A four-digit year inside a question ("FY2019", "fiscal 2018", "2017–2019").
_YEAR = re.compile(r"(?<!\d)(?:19|20)\d\d(?!\d)")

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


def moved_to(what: str, when: str) -> str | None:
    """`what`, the question a follow-up's quantity comes from, asked for the period `when` names — the
    text a computation the question defines is read from. "And in FY2018?" after "What is the FY2019
    DPO? … average accounts payable between FY2018 and FY2019 …" asks the same formula one year earlier,
    so every year in it moves by one; "And from 2017 to 2018?" after "By how much did revenues grow from
    2016 to 2017?" puts its years in place of the previous two. None when the years do not line up (two
    years for a definition over three): the computation is declined rather than read for other years."""
    if what == when:
        return what
    target = sorted(asked_years(when))
    years = sorted({int(y) for y in _YEAR.findall(what)})
    if not target or not years:
        return what
    if len(target) == len(years):
        moved = dict(zip(years, target, strict=True))
    elif len(target) == 1:
        moved = {y: y + target[0] - years[-1] for y in years}
    else:
        return None
    return _YEAR.sub(lambda m: str(moved[int(m.group())]), what)
