"""Computations over several periods that a question defines, worked out offline (issue 45, item 2).

Three kinds, each over cells the planner read and each operand cited:
- an average or a sum over the years a question spans ("the FY2017 - FY2019 3 year average of capex as
  a % of revenue", "the three year average net profit margin");
- a compound annual growth rate between two years ("2 year total revenue CAGR from FY2020 to FY2022");
- a formula the question spells out with symbols ("defined as: FY2019 revenue / (average PP&E between
  FY2018 and FY2019)"): numbers, `+ - * /`, brackets, and terms that name a quantity in a year, its
  average between two years, or its change between them.

A question of one of these kinds is never handed to the one-period arithmetic (`arithmetic.worked`):
an average read as its last year would be a confident wrong figure. Whatever the cells do not hold, or
a definition outside this grammar (a term defined by another definition), is declined, and the planner
lists the figures it found instead.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from sleuth.agent.arithmetic import (
    MARGIN_PROFITS,
    REVENUE_NAMES,
    Operand,
    Worked,
    asked_period_operands,
    capitalised,
    head_nouns,
    operand_words,
    printed,
    reconciled,
    worked,
)
from sleuth.agent.extractive import asked_months, asked_quantity, asked_years, content_words
from sleuth.agent.planner_figures import UNIT_SCALES

#: Standard abbreviations of financial statements, spelled as statements label their rows: a question's
#: "PP&E" must meet `Property and equipment, net`. Not a benchmark's word list: these are the field's.
ABBREVIATIONS = {
    "pp&e": "property plant and equipment",
    "ppe": "property plant and equipment",
    "cogs": "cost of goods sold",
    "capex": "capital expenditures",
    "sg&a": "selling general and administrative",
    "r&d": "research and development",
    "d&a": "depreciation and amortization",
}
#: Other names statements give a spelled-out quantity (a row search reads them all).
_OPERATING_CASH = ("net cash provided by operating activities", "net cash from operating activities")
_CAPITAL_SPENDING = (
    "purchases of property and equipment",
    "purchases of property plant and equipment",
    "additions to property and equipment",
    "payments for property and equipment",
    "capital spending",
)
_ALSO_LABELLED = {
    "cost of goods sold": ("cost of sales", "cost of revenues"),
    "cash from operations": _OPERATING_CASH,
    "cash flow from operating activities": _OPERATING_CASH,
    "operating cash flow": _OPERATING_CASH,
    "capital expenditure": _CAPITAL_SPENDING,
}
_ABBREVIATED = re.compile(
    r"(?<![\w&])(" + "|".join(re.escape(a) for a in ABBREVIATIONS) + r")(?![\w&])", re.IGNORECASE
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
#: A formula the question spells out: what follows "defined as" up to the sentence's end.
_DEFINITION = re.compile(r"\bdefined\s+as\s*:?\s*(?P<f>.+?)(?=\.\s|\.$|\?|$)", re.IGNORECASE)
#: "Define net working capital as total current assets less total current liabilities": the name and
#: the formula, whose words for `+` and `-` are read as the symbols.
_DEFINE = re.compile(
    r"\bdefine\s+(?P<name>[^.?:]{1,80}?)\s+as\s*:?\s*(?P<f>.+?)(?=\.\s|\.$|\?|$)", re.IGNORECASE
)
_WORDED = {"less": " - ", "minus": " - ", "plus": " + "}
_WORDED_OPERATOR = re.compile(r"\s+(less|minus|plus)\s+", re.IGNORECASE)
_NOTE = re.compile(r"\s*\[[^\]]*\]")  # "[from cash flow statement]": where to read it, no term
_TOKEN = re.compile(r"(\(|\)|\*|×|/|÷|\+|\s[-−–]\s)")
_NUMBER = re.compile(r"^\d[\d,]*(?:\.\d+)?$")
_YEAR = r"(?:FY\s?)?(?P<{}>(?:19|20)\d\d)"
_AVERAGE_TERM = re.compile(
    rf"^(?:the\s+)?average\s+(?:of\s+)?(?P<q>.+?)\s+between\s+{_YEAR.format('a')}\s+and\s+{_YEAR.format('b')}$",
    re.IGNORECASE,
)
_CHANGE_TERM = re.compile(
    rf"^(?:the\s+)?change\s+in\s+(?P<q>.+?)\s+between\s+{_YEAR.format('a')}\s+and\s+{_YEAR.format('b')}$",
    re.IGNORECASE,
)
_YEAR_BEFORE = re.compile(rf"^{_YEAR.format('y')}\s+(?P<q>.+)$", re.IGNORECASE)
_YEAR_AFTER = re.compile(rf"^(?P<q>.+?)\s+(?:in|for|of)\s+{_YEAR.format('y')}$", re.IGNORECASE)
#: Where a term says where to read it, not what: "… from the cash flow statement".
_WHERE = re.compile(r"\s+(?:from|in|on|per)\s+the\s+[\w\s]*?(?:statement|sheet)s?\b.*$", re.IGNORECASE)


def spelled_out(text: str) -> str:
    """`text` with the field's abbreviations written as statements label them (`ABBREVIATIONS`)."""
    return _ABBREVIATED.sub(lambda m: ABBREVIATIONS[m.group(1).lower()], text)


def other_names(ask: str, quantity: Sequence[str] | None = None) -> list[str]:
    """The names statements give a quantity the question names otherwise: its abbreviation spelled
    out (`COGS`: cost of goods sold) and the other labels of the field's spelled-out quantities
    (capital expenditures: `Purchases of property, plant and equipment`) — the vocabulary of financial
    statements, not of one corpus. With `quantity` (the asked quantity's words), only the names of a
    quantity it is wholly: "EBITDA less capex" is not capex."""
    names: list[str] = []
    for m in _ABBREVIATED.finditer(ask):
        full = ABBREVIATIONS[m.group(1).lower()]
        names += [n for n in (full, *_ALSO_LABELLED.get(full, ())) if _wholly(quantity, full, m.group(1))]
    spelled = spelled_out(ask).lower()
    for full, also in _ALSO_LABELLED.items():
        if full in spelled and _wholly(quantity, full, full):
            names += also
    return list(dict.fromkeys(names))


def _wholly(quantity: Sequence[str] | None, full: str, said: str) -> bool:
    """Whether the asked quantity's words are all the field quantity's (`full`, or as `said`)."""
    return quantity is None or set(quantity) <= set(content_words(full)) | set(content_words(said)) | {
        "amount"
    }


def row_words(ask: str) -> list[str]:
    """Words a row the computation reads may be labelled with, beyond the question's own: its
    abbreviations spelled out and their other names, and the qualifiers statements put on their rows
    (`Net revenues`, `Property and equipment, net`, `Total assets`)."""
    spelled = spelled_out(ask)
    also = [name for full, names in _ALSO_LABELLED.items() if full in spelled.lower() for name in names]
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
    if _formula_text(ask) is not None:
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
    if not over_periods(ask):
        return worked(ask, rows)
    found = asked_period_operands(ask, rows)
    formula = _formula_text(ask)
    if formula is not None:
        return _formula(ask, *formula, found)
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
    quantity = re.sub(
        r"^(?:\d+|two|three|four|five)[\s-]+years?\s+", "", named.group("q").strip(), flags=re.I
    )
    pair = _pair(quantity, found, first, last)
    if pair is None:
        return None
    a, b = pair
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


def _pair(quantity: str, found: list[Operand], first: int, last: int) -> tuple[Operand, Operand] | None:
    """The quantity's cells in the two years, from one row of one document."""
    a = _resolve(quantity, [o for o in found if o.year == first])
    if a is None:
        return None
    b = next(
        (
            o
            for o in found
            if o.year == last and o.path == a.path and o.label.casefold() == a.label.casefold()
        ),
        None,
    )
    return None if b is None or a.unit != b.unit else (a, b)


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
    name, per_year, percent = _yearly(what)
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


def _yearly(what: str) -> tuple[str, Yearly, bool]:
    """What one year's value is, read from that year's cells: (name, reader, a percentage?)."""
    share = _SHARE.match(what)
    margin = _MARGIN.search(what)
    if share is not None:
        tops, bottoms = [share.group("a")], [share.group("b")]
        name = f"{capitalised(share.group('a'))} as a percentage of {share.group('b')}"
    elif margin is not None:
        kind = margin.group("kind").lower()
        tops, bottoms, name = list(MARGIN_PROFITS[kind]), list(REVENUE_NAMES), f"{kind.capitalize()} margin"
    else:
        quantity = what

        def one(pool: list[Operand]) -> tuple[float, str, list[str]] | None:
            cell = _resolve(quantity, pool)
            if cell is None:
                return None
            return cell.value, f"{cell.label} {printed(cell)}{_unit(cell)} [{cell.ref}]", [cell.ref]

        return capitalised(what), one, False

    def ratio(pool: list[Operand]) -> tuple[float, str, list[str]] | None:
        a = next((c for c in (_resolve(top, pool) for top in tops) if c is not None), None)
        if a is None:
            return None
        same = [o for o in pool if o.path == a.path and o.ref != a.ref]
        b = next((c for c in (_resolve(name, same) for name in bottoms) if c is not None), None)
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


# ---------------------------------------------------------------------------------------- formulas
def _formula_text(ask: str) -> tuple[int, str] | None:
    """(where it is defined, the formula) of a formula the question spells out with symbols after
    "defined as", or after "define X as" with `less`, `minus` or `plus` for symbols where X is the
    quantity asked; None for none (a definition in words, "operating income divided by revenue", is
    `arithmetic.worked`'s)."""
    found = _definition(ask)
    if found is None:
        return None
    text = found[1]
    return found if _TOKEN.search(text) and re.search(r"[/*+×÷]|\s[-−–]\s", text) else None


def _definition(ask: str) -> tuple[int, str] | None:
    """(where the definition starts, its formula) of the question's definition; None for none, and
    for a "define X as" whose X is not what the question asks ("EBITDA less capex", defining EBITDA:
    a definition the asked quantity only leans on)."""
    match = _DEFINITION.search(ask)
    if match is not None:
        return match.start(), match.group("f").strip()
    match = _DEFINE.search(ask)
    if match is None:
        return None
    head = ask[: match.start()]
    if set(content_words(match.group("name"))) != set(asked_quantity(head) or ["?"]):
        return None
    formula = _WORDED_OPERATOR.sub(lambda m: _WORDED[m.group(1).lower()], _NOTE.sub("", match.group("f")))
    return match.start(), formula.strip()


@dataclass(frozen=True)
class _Value:
    """A formula's value so far, the working that shows it, and the cells it read."""

    value: float
    shown: str
    refs: tuple[str, ...]
    unit: str | None  # the scale of its cells (a product or quotient of scaled figures: None)


class _Declined(Exception):
    """A formula this module cannot work out from the cells: the planner lists the figures instead."""


def _formula(ask: str, at: int, text: str, found: list[Operand]) -> Worked | None:
    """The formula `text`, defined at `at` in the ask (a term's year is the one named before it)."""
    head = ask[:at]
    main = asked_years(head) or asked_years(ask)
    tokens = [t.strip() for t in _TOKEN.split(text) if t.strip()]
    try:
        parser = _Parser(tokens, found, main[0] if main else None)
        result = parser.expression()
        if parser.rest:
            raise _Declined
    except (_Declined, ZeroDivisionError):
        return None
    if not result.refs:
        return None
    named = re.search(r"\b(?:what\s+(?:is|was)\s+(?:the\s+)?)(?P<n>[^?]+?)\?", ask, re.IGNORECASE)
    name = capitalised(named.group("n").strip()) if named else "The result"
    return Worked(f"{name}: {result.value:,.2f} = {result.shown}.", list(dict.fromkeys(result.refs)))


class _Parser:
    """Recursive descent over `expression := term (± term)*`, `term := factor (×/÷ factor)*`,
    `factor := number | ( expression ) | a quantity term`, each quantity read from the cells."""

    def __init__(self, tokens: list[str], found: list[Operand], year: int | None) -> None:
        self.rest = tokens
        self.found = found
        self.year = year

    def _take(self) -> str:
        if not self.rest:
            raise _Declined
        token, self.rest = self.rest[0], self.rest[1:]
        return token

    def expression(self) -> _Value:
        left = self.term()
        while self.rest and self.rest[0] in ("+", "-", "−", "–"):
            sign = "+" if self._take() == "+" else "−"
            right = self.term()
            if left.unit != right.unit:
                raise _Declined  # millions plus thousands, or a count plus an amount
            value = left.value + right.value if sign == "+" else left.value - right.value
            left = _Value(value, f"{left.shown} {sign} {right.shown}", left.refs + right.refs, left.unit)
        return left

    def term(self) -> _Value:
        left = self.factor()
        while self.rest and self.rest[0] in ("*", "×", "/", "÷"):
            times = self._take() in ("*", "×")
            right = self.factor()
            if times:
                unit = left.unit or right.unit if None in (left.unit, right.unit) else None
                value = left.value * right.value
            else:
                scale = _scale(left.unit, right.unit)
                unit = left.unit if right.unit is None else None
                value = left.value * scale / right.value
            left = _Value(
                value, f"{left.shown} {'×' if times else '/'} {right.shown}", left.refs + right.refs, unit
            )
        return left

    def factor(self) -> _Value:
        token = self._take()
        if token == "(":
            inner = self.expression()
            if self._take() != ")":
                raise _Declined
            return _Value(inner.value, f"({inner.shown})", inner.refs, inner.unit)
        if _NUMBER.match(token):
            return _Value(float(token.replace(",", "")), token, (), None)
        return self._quantity(token)

    def _quantity(self, term: str) -> _Value:
        for pattern, combine in ((_AVERAGE_TERM, "average"), (_CHANGE_TERM, "change")):
            match = pattern.match(term)
            if match:
                first, last = int(match.group("a")), int(match.group("b"))
                pair = _pair(_WHERE.sub("", match.group("q")), self.found, first, last)
                if pair is None:
                    raise _Declined
                a, b = pair
                refs = (a.ref, b.ref)
                if combine == "average":
                    shown = f"({a.label} {printed(a)} [{a.ref}] + {printed(b)} [{b.ref}]) / 2"
                    return _Value((a.value + b.value) / 2, shown, refs, a.unit)
                shown = f"({a.label} {printed(b)} [{b.ref}] − {printed(a)} [{a.ref}])"
                return _Value(b.value - a.value, shown, refs, a.unit)
        dated = _YEAR_BEFORE.match(term) or _YEAR_AFTER.match(term)
        year = int(dated.group("y")) if dated else self.year
        quantity = _WHERE.sub("", dated.group("q") if dated else term)
        cell = _resolve(quantity, [o for o in self.found if o.year == year])
        if cell is None:
            raise _Declined
        return _Value(cell.value, f"{cell.label} {printed(cell)} [{cell.ref}]", (cell.ref,), cell.unit)


def _scale(top: str | None, bottom: str | None) -> float:
    """What a quotient's numerator is multiplied by to put it in its denominator's scale."""
    if top == bottom or top is None or bottom is None:
        return 1.0
    if top in UNIT_SCALES and bottom in UNIT_SCALES:
        return UNIT_SCALES[top] / UNIT_SCALES[bottom]
    raise _Declined


# ------------------------------------------------------------------------------------------ shared
#: Words a row adds to say how much of a quantity it holds: `Total revenues` and `Net revenues` are
#: revenue; where two such rows differ, the net one (what the balance sheet carries) is read.
_QUALIFIERS = frozenset({"total", "net"})


def _resolve(phrase: str, pool: list[Operand]) -> Operand | None:
    """The cell whose row the phrase names: the row's head noun among the phrase's words (`Cost of
    sales` for cost of goods sold, `Property and equipment, net` for PP&E) and the most of their words
    in common; None when none does or two different figures tie."""
    spelled = " ".join(spelled_out(phrase).lower().split())
    names = [spelled, *_ALSO_LABELLED.get(spelled, ())]  # "cash from operations": `Net cash provided by …`
    scored: list[tuple[float, Operand]] = []
    for operand in pool:
        label = operand_words(operand.label) - _QUALIFIERS
        score = 0.0
        for name in names:
            wanted = operand_words(name)
            if not label or not wanted or not head_nouns(operand.label) & head_nouns(name):
                continue
            common = len(label & wanted)
            if common * 2 >= len(label):  # most of the row's words are the name's
                score = max(score, common / len(label | wanted))
        if score:
            scored.append((score, operand))
    scored.sort(key=lambda pair: -pair[0])
    if not scored:
        return None
    best = [o for s, o in scored if s == scored[0][0]]
    carried = [o for o in best if "net" in operand_words(o.label)]
    if len({o.value for o in best}) > 1 and len({o.value for o in carried}) == 1:
        return carried[0]  # `Property and equipment, net` over the gross `Total property and equipment`
    if len({o.value for o in best}) > 1:
        want = asked_months(phrase)
        said = [o for o in best if want is not None and o.months == want]
        return said[0] if len(said) == 1 else None
    return best[0]


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
    "other_names",
    "over_periods",
    "read_years",
    "row_words",
    "spanned_years",
    "spelled_out",
    "worked_out",
]
