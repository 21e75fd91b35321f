"""Computations over several periods that a question defines, worked out offline (issue 45, item 2).

Each over cells the planner read and each operand cited:
- an average or a sum over the years a question spans ("the FY2017 - FY2019 3 year average of capex as
  a % of revenue", "the three year average net profit margin", "… average unadjusted EBITDA % margin");
- a compound annual growth rate between two years ("2 year total revenue CAGR from FY2020 to FY2022");
- a formula the question spells out, and quantities built on the terms it defines (`definitions`).

A question of one of these kinds is never handed to the one-period arithmetic (`arithmetic.worked`):
an average read as its last year would be a confident wrong figure. Whatever the cells do not hold is
declined, and the planner lists the figures it found instead.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from sleuth.agent.arithmetic import (
    OWNER,
    Operand,
    Worked,
    asked_period_operands,
    capitalised,
    operand_words,
    printed,
    reconciled,
    worked,
)
from sleuth.agent.definitions import (
    builds_on,
    defined,
    definition_words,
    evaluate,
    formula,
    formula_text,
    margin_of,
    term_key,
    terms,
)
from sleuth.agent.extractive import asked_years
from sleuth.agent.named_rows import pair, resolve
from sleuth.agent.planner_figures import UNIT_SCALES
from sleuth.agent.statement_names import (
    ABBREVIATIONS,
    ALSO_LABELLED,
    MARGIN_PROFITS,
    REVENUE_NAMES,
    other_names,
    spelled_out,
)

#: A run of years: "FY2017 - FY2019", "from FY2020 to FY2022", "between FY2018 and FY2019", "2017–2019".
_SPAN = re.compile(
    r"\b(?:FY\s?)?(?P<a>(?:19|20)\d\d)\s*(?:-|–|—|\bto\b|\bthrough\b|\band\b)\s*(?:FY\s?)?(?P<b>(?:19|20)\d\d)\b",
    re.IGNORECASE,
)
MAX_SPAN = 6  # years a span may hold: a longer one is no question a filing's tables answer
_AVERAGE = re.compile(r"\baverage\b", re.IGNORECASE)
_SUM = re.compile(r"\b(?:sum|combined|cumulative|in\s+total)\b", re.IGNORECASE)
_CAGR = re.compile(r"\bCAGR\b|\bcompound(?:ed)?\s+annual\s+growth(?:\s+rate)?", re.IGNORECASE)
#: "… CAGR": the quantity before it, after "N year" and a possessive; "CAGR of X": the one after it.
_CAGR_BEFORE = re.compile(
    r"(?:^|['’]s\s+|\b(?:the|a|an|year|years)\s+)(?P<q>[^?.;,]+?)\s+(?:CAGR|compound(?:ed)?\s+annual)",
    re.IGNORECASE,
)
_CAGR_OF = re.compile(
    r"(?:CAGR|compound(?:ed)?\s+annual\s+growth(?:\s+rate)?)\s+(?:of|in|for)\s+(?:the\s+)?(?P<q>.+?)"
    r"(?=\s*(?:[?.;,]|\b(?:from|between|over|during)\b|$))",
    re.IGNORECASE,
)
_END = r"(?=\s*(?:[?.;,]|\(|\b(?:for|in|during|from|between|over|across|of\s+fy)\b|$))"
#: What an average is of: "average of A as a % of B", "average net profit margin", "average revenue".
_AVERAGED = re.compile(rf"\baverage\s+(?:of\s+)?(?:the\s+)?(?P<what>.+?){_END}", re.IGNORECASE)
_SUMMED = re.compile(
    rf"\b(?:sum|total)\s+of\s+(?:the\s+)?(?P<what>.+?){_END}|\b(?:combined|cumulative)\s+(?P<what2>.+?){_END}",
    re.IGNORECASE,
)
_SHARE = re.compile(r"^(?P<a>.+?)\s+as\s+a\s+(?:%|percent(?:age)?|share)\s+of\s+(?P<b>.+)$", re.IGNORECASE)
#: A margin as an average names it: also "operating income % margin" (`arithmetic`'s reads "… profit margin").
_MARGIN = re.compile(
    r"\b(?P<kind>gross|operating|net)\s+(?:profit\s+|income\s+)?(?:%\s+)?margins?\b", re.IGNORECASE
)
_PERCENT = re.compile(r"%|\bpercent", re.IGNORECASE)


def row_words(ask: str) -> list[str]:
    """Words a row the computation reads may be labelled with, beyond the question's own: its
    abbreviations spelled out and their other names, and the qualifiers statements put on their rows
    (`Net revenues`, `Property and equipment, net`, `Total assets`)."""
    spelled = spelled_out(ask)
    also = [name for full, names in ALSO_LABELLED.items() if full in spelled.lower() for name in names]
    for margin in _MARGIN.finditer(spelled):  # a margin reads its profit's rows and revenue's
        also += [*MARGIN_PROFITS[margin.group("kind").lower()], *REVENUE_NAMES]
    return sorted(operand_words(" ".join([spelled, *also])) | {"net", "total"})


def spanned_years(ask: str) -> tuple[int, ...]:
    """Every year of the runs of years a question names ("FY2017 - FY2019" → 2017, 2018, 2019), in
    order; () when it names no run."""
    years: set[int] = set()
    for match in _SPAN.finditer(ask):
        first, last = sorted((int(match.group("a")), int(match.group("b"))))
        if 0 < last - first <= MAX_SPAN:
            years.update(range(first, last + 1))
    return tuple(sorted(years))


def over_periods(ask: str) -> bool:
    """A question this module answers (or declines): an average, a sum or a CAGR over a run of years,
    or a formula spelled with symbols."""
    if formula_text(ask) is not None:
        return True
    if _CAGR.search(ask):
        return True
    return bool(len(spanned_years(ask)) >= 2 and (_AVERAGE.search(ask) or _SUM.search(ask)))


def read_years(ask: str) -> tuple[int, ...]:
    """The years whose cells such a question reads: every year of its runs and the years it names."""
    return tuple(sorted(set(spanned_years(ask)) | set(asked_years(ask))))


def _over_what(ask: str) -> tuple[bool, str] | None:
    """(an average?, what it is of, as the question says it) for an average or sum over years; None
    for a question that names neither."""
    averaging = _AVERAGE.search(ask) is not None
    match = _AVERAGED.search(ask) if averaging else _SUMMED.search(ask)
    if match is None:
        return None
    return averaging, (
        match.group("what") if averaging else match.group("what") or match.group("what2")
    ) or ""


def averaged_words(ask: str) -> list[str]:
    """The content words of what an average or sum over years is of ("capex as a % of revenue"):
    the quantity such a question asks for, which names no single row."""
    over = _over_what(ask)
    return [] if over is None else sorted(operand_words(spelled_out(over[1])) - {"year", "average"})


def worked_out(ask: str, rows: list[Any]) -> Worked | None:
    """The computation the question defines over the plan's cell rows: this module's kinds first (and
    only them, when the question is of one), else the one-period arithmetic (`arithmetic.worked`)."""
    found = asked_period_operands(ask, rows)
    if not over_periods(ask):
        return worked(ask, rows) or defined(ask, found)
    spelled = formula_text(ask)
    if spelled is not None:
        return formula(ask, *spelled, found)
    if _CAGR.search(ask):
        return _cagr(ask, found)
    return _over_span(ask, found)


# ---------------------------------------------------------------------------------------------- CAGR
def _cagr(ask: str, found: list[Operand]) -> Worked | None:
    years = spanned_years(ask) or asked_years(ask)
    if len(years) < 2:
        return None
    first, last = years[0], years[-1]
    named = _CAGR_OF.search(ask) or _CAGR_BEFORE.search(ask)
    if named is None:
        return None
    said = re.sub(
        r"^(?:what|how\s+much)\s+(?:is|was|were)\s+(?:the\s+)?", "", named.group("q").strip(), flags=re.I
    )
    said = OWNER.sub("", said)  # "… Lockheed Martin's 2 year total revenue": whose it is, not what
    quantity = re.sub(r"^(?:\d+|two|three|four|five)[\s-]+years?\s+", "", said, flags=re.I)
    both = pair(quantity, found, first, last)
    if both is None:
        return None
    a, b = both
    if a.value <= 0 or b.value <= 0:
        return None  # a growth rate of a loss or a sign change is no rate
    n = last - first
    rate = (b.value / a.value) ** (1 / n) - 1
    verb = "grew" if rate > 0 else "fell" if rate < 0 else "did not change"
    return Worked(
        f"{a.label} {verb} at a compound annual rate of {rate * 100:.1f} % from {first} to {last}: "
        f"{rate * 100:.1f} % = ({printed(b)} [{b.ref}] / {printed(a)} [{a.ref}])^(1/{n}) − 1.",
        [a.ref, b.ref],
    )


# ------------------------------------------------------------------------------- averages and sums
def _over_span(ask: str, found: list[Operand]) -> Worked | None:
    """An average (or sum) over the run of years the question names of a quantity, a ratio of two, or
    a margin: each year's value from that year's cells, then their mean (or sum)."""
    years = spanned_years(ask)
    over = _over_what(ask)
    if over is None or len(years) < 2:
        return None
    averaging, what = over
    what = re.sub(r"^(?:\d+|two|three|four|five)[\s-]+years?\s+(?:average\s+)?(?:of\s+)?", "", what.strip())
    what = re.sub(r"^(?:the\s+)?(?:un)?adjusted\s+", "", what, flags=re.IGNORECASE)
    name, per_year, percent = _yearly(what, terms(ask))
    values: list[tuple[int, float, str, list[str]]] = []
    for year in years:
        value = per_year([o for o in found if o.year == year])
        if value is None:
            return None  # a year the cells do not hold: no average of the others
        values.append((year, *value))
    total = sum(v for _y, v, _s, _r in values)
    result = total / len(values) if averaging else total
    places = 1 if percent else max(_places(s.split(" [")[0]) for _y, _v, s, _r in values)
    shown = _shown(result, percent, places + (0 if percent or not averaging else 1))
    refs = [ref for _y, _v, _s, r in values for ref in r]
    units = {o.unit for o in found if o.ref in refs}
    if not percent and len(units) > 1:
        return None  # one year in thousands, another in millions: no sum of the figures as printed
    if not percent:
        shown += _unit(next(o for o in found if o.ref in refs))
    parts = "; ".join(f"{y}: {s}" for y, _v, s, _r in values)
    each = " + ".join(_shown(v, percent, places) for _y, v, _s, _r in values)
    working = f"({each}) / {len(values)}" if averaging else each
    kind = "average" if averaging else "sum"
    return Worked(
        f"{name}, {kind} over {years[0]}–{years[-1]}: {shown} = {working} ({parts}).",
        list(dict.fromkeys(refs)),
    )


#: One year's value read from that year's cells: (value, its working, the refs it cites), or None.
Yearly = Callable[[list[Operand]], tuple[float, str, list[str]] | None]


def _yearly(what: str, known: dict[str, str]) -> tuple[str, Yearly, bool]:
    """What one year's value is, read from that year's cells: (name, reader, a percentage?). A term the
    question defines ("unadjusted EBITDA") is worked out from its definition, and a margin of it is it
    over revenue."""
    share = _SHARE.match(what)
    margin = _MARGIN.search(what)
    of_term = margin_of(what, known)
    if share is None and margin is None and (term_key(what) in known or of_term is not None):
        text = what if of_term is None else f"({of_term}) / revenue"

        def by_definition(pool: list[Operand]) -> tuple[float, str, list[str]] | None:
            result = evaluate(text, pool, pool[0].year if pool else None, known)
            if result is None:
                return None
            shown = _shown(result.value, of_term is not None)
            return result.value, f"{shown} = {result.shown}", list(result.refs)

        return capitalised(what), by_definition, of_term is not None
    if share is not None:
        tops, bottoms = [share.group("a")], [share.group("b")]
        name = f"{capitalised(share.group('a'))} as a percentage of {share.group('b')}"
    elif margin is not None:
        kind = margin.group("kind").lower()
        tops, bottoms, name = list(MARGIN_PROFITS[kind]), list(REVENUE_NAMES), f"{kind.capitalize()} margin"
    else:
        quantity = what

        def one(pool: list[Operand]) -> tuple[float, str, list[str]] | None:
            cell = resolve(quantity, pool)
            if cell is None:
                return None
            return cell.value, f"{cell.label} {printed(cell)}{_unit(cell)} [{cell.ref}]", [cell.ref]

        return capitalised(what), one, False

    def ratio(pool: list[Operand]) -> tuple[float, str, list[str]] | None:
        a = next((c for c in (resolve(top, pool) for top in tops) if c is not None), None)
        if a is None:
            return None
        same = [o for o in pool if o.path == a.path and o.ref != a.ref]
        b = next((c for c in (resolve(name, same) for name in bottoms) if c is not None), None)
        if b is None or b.value == 0 or (scale := reconciled(a, b)) is None:
            return None
        # an outflow in brackets (capital expenditures) is a share of revenue by its size
        value = abs(a.value) * scale / b.value
        return (
            value,
            f"{_shown(value, True)} = {a.label} {printed(a)} [{a.ref}] / {printed(b)} [{b.ref}]",
            [
                a.ref,
                b.ref,
            ],
        )

    return name, ratio, True


# ------------------------------------------------------------------------------------------ shared
def _shown(value: float, percent: bool, places: int = 2) -> str:
    return f"{value * 100:,.1f} %" if percent else f"{value:,.{places}f}"


def _places(text: str) -> int:
    """Decimal places of the last figure in `text` (`Net income 1,813.5 million` → 1)."""
    figures = re.findall(r"\d[\d,]*(?:\.(\d+))?", text)
    return len(figures[-1]) if figures else 0


def _unit(cell: Operand) -> str:
    """` million` for a cell of a table in millions; '' where its unit is no scale."""
    return f" {cell.unit.removesuffix('s')}" if cell.unit in UNIT_SCALES else ""


__all__ = [
    "ABBREVIATIONS",
    "averaged_words",
    "builds_on",
    "definition_words",
    "other_names",
    "over_periods",
    "read_years",
    "row_words",
    "spanned_years",
    "spelled_out",
    "worked_out",
]
