"""A quantity in each period a question names, without a model (issue 45, per-period answers): "What
were Costco's membership fees in fiscal 2019, 2020 and 2021?" is the one row's cell for each year, in
period order, each cited, and the direction it moved, not the latest year's figure alone."""

from __future__ import annotations

import re
from dataclasses import dataclass
from itertools import pairwise
from typing import Any

from sleuth.agent.arithmetic import names_quantity
from sleuth.agent.planner_figures import figure_sentence

#: A question about how a quantity moved rather than its value at one time.
_TREND = re.compile(
    r"\b(?:over\s+time|each\s+(?:year|quarter|period)|every\s+year|trend|develop(?:ed)?|evolve[ds]?"
    r"|over\s+the\s+(?:last|past)\s+\w+\s+(?:years|quarters)|how\s+(?:has|have|did)\b.*\bchange[ds]?\b)",
    re.IGNORECASE,
)


#: "How has X changed", "how did X develop": X is the quantity.
_MOVED = re.compile(
    r"\bhow\s+(?:has|have|did|do|does)\s+(?P<what>.+?)\s+(?:changed?|develop(?:ed)?|evolved?|trended|moved?)\b",
    re.IGNORECASE,
)


def trend_quantity(ask: str) -> str | None:
    """What a "how has X changed / developed" question asks about, as a "what were X?" question (so
    `extractive.asked_quantity` reads its quantity); None for other questions."""
    moved = _MOVED.search(ask)
    return None if moved is None else f"What were {moved.group('what')}?"


def asks_trend(ask: str) -> bool:
    """Whether the question asks how a quantity moved ("over time", "each year", "how has … changed")."""
    return _TREND.search(ask) is not None


@dataclass(frozen=True)
class PerPeriod:
    """The answer's text, the evidence labels it cites (in period order), and whether every period the
    question names was found."""

    text: str
    refs: list[str]
    complete: bool


def per_period(rows: list[Any], quantity: tuple[str, ...], years: tuple[int, ...] | None) -> PerPeriod | None:
    """The asked quantity for each of `years` from the plan's `rows` (`StepCode._figure_lines`' cell
    entries: `[ref, label, header, text, unit, path, page, value, section, year]`, one per row label and
    year): the label that names the quantity and covers the most of the years (the first such in the
    rows' order), one line a year, then the direction. None where no label names it for two years.
    `years` None: the question named none ("how has X changed"), so every year the rows hold."""
    by_label: dict[str, dict[int, list[Any]]] = {}
    for entry in rows:
        if not (isinstance(entry, list) and len(entry) >= 10 and isinstance(entry[1], str)):
            continue
        year = entry[9]
        if isinstance(year, int) and (years is None or year in years) and names_quantity(entry[1], quantity):
            by_label.setdefault(entry[1].casefold(), {}).setdefault(year, entry)
    if not by_label:
        return None
    found = max(by_label.values(), key=len)  # `max` keeps the first of the longest
    if len(found) < 2:
        return None
    ordered = [found[year] for year in sorted(found)]
    label = ordered[0][1]
    lines = [f"{label}, in each period {'its tables hold' if years is None else 'the question names'}:"]
    for ref, _label, header, text, unit, path, page, value, section, _year in (e[:10] for e in ordered):
        said = figure_sentence(label, str(header), str(text), unit if isinstance(unit, str) else None,
                               value if isinstance(value, int | float) else None,
                               section if isinstance(section, str) else None)  # fmt: skip
        lines.append(f"- {said} [{ref}] ({path} p. {page})")
    missing = [str(year) for year in sorted(years or ()) if year not in found]
    if missing:
        lines.append(f"No row of it was found for {', '.join(missing)}.")
    direction = _direction([e[7] for e in ordered], [str(e[3]) for e in ordered])
    if direction:
        lines.append(direction)
    return PerPeriod("\n".join(lines), [str(e[0]) for e in ordered], not missing)


def _direction(values: list[Any], texts: list[str]) -> str | None:
    """How the figures moved, first period to last: up or down each period, or not one way, and the
    change over the whole span. None where a figure is not a number."""
    if not all(isinstance(v, int | float) and not isinstance(v, bool) for v in values):
        return None
    steps = [b - a for a, b in pairwise(values)]
    if all(step > 0 for step in steps):
        way = "Up each period"
    elif all(step < 0 for step in steps):
        way = "Down each period"
    else:
        way = "Not in one direction"
    first, last = values[0], values[-1]
    first_text, last_text = (" ".join(t.split()).replace("$ ", "$") for t in (texts[0], texts[-1]))
    span = f"{way}: from {first_text} to {last_text}"
    if first and "%" not in texts[0]:
        span += f" ({(last - first) / abs(first):+.1%})".replace("%", " %")
    return span + "."
