"""Arithmetic a question defines, worked out offline from the table cells the planner read (issue 45).

"By how much did revenue grow from 2024 to 2025?", "What is the 2025 operating margin, defined as
operating income divided by revenue?": each operand is a cell the planner found (a row the question
names, in a year it names), cited; the answer states the result and the formula, so a reader checks it
against the cited figures. Nothing is guessed: an operand the cells do not hold, units that do not
reconcile, or a question whose computation is not one of these, and the planner lists the figures it
found instead (`planner._figure_final`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from sleuth.agent.extractive import asked_months, asked_years, normalize_word
from sleuth.agent.planner_figures import UNIT_SCALES
from sleuth.agent.statement_names import MARGIN_PROFITS, REVENUE_NAMES, also_labelled
from sleuth.format.figures import CHANGE_COLUMN
from sleuth.format.periods import period_length
from sleuth.store.text import words
from sleuth.store.version.stop_words import STOP_WORDS

_UNIT_WORD = {unit: unit.removesuffix("s") for unit in UNIT_SCALES}  # "millions" -> "million"
_END = r"(?=\s*(?:[?.;,]|\b(?:for|in|during|as of|at|from|between|of fy|over the)\b|$))"
#: "defined as A divided by B", "define X as A divided by B", "calculated as A / B", "ratio of A to B",
#: "A as a percentage of B".
_DIVIDED = re.compile(
    r"\b(?:defined|calculated|computed|measured|define\s+[^.?:]{1,80}?)\s+as\s+(?:the\s+)?(?P<a>.+?)"
    r"\s+(?:divided\s+by|over|/|÷)\s+"
    rf"(?:the\s+)?(?P<b>.+?){_END}",
    re.IGNORECASE,
)
#: "… current ratio (total current assets divided by total current liabilities)": a definition in brackets.
_BRACKETED_RATIO = re.compile(
    r"\((?:the\s+|i\.e\.,?\s+)?(?P<a>[^()]+?)\s+(?:divided\s+by|over|/|÷)\s+(?:the\s+)?(?P<b>[^()]+?)\)",
    re.IGNORECASE,
)
_RATIO_OF = re.compile(
    rf"\bratio\s+of\s+(?:the\s+)?(?P<a>.+?)\s+to\s+(?:the\s+)?(?P<b>.+?){_END}", re.IGNORECASE
)
_AS_SHARE = re.compile(
    r"\b(?:what|how much)\s+(?:is|was|were)\s+(?:the\s+)?(?P<a>.+?)\s+"
    rf"as\s+a\s+(?:percent(?:age)?|share|%)\s+of\s+(?:the\s+)?(?P<b>.+?){_END}",
    re.IGNORECASE,
)
#: "What share of net sales did 3M spend on research, development and related expenses": A over B.
_SPENT_SHARE = re.compile(
    r"\bwhat\s+(?:share|percent(?:age)?|proportion|portion)\s+of\s+(?:its\s+|the\s+)?(?P<b>[^?]+?)\s+"
    r"(?:did|does|do)\s+.+?\s+(?:spend|pay|invest|use)\s+on\s+(?:the\s+)?(?P<a>[^?]+?)"
    r"(?=\s+(?:in|for|during)\b|[?.;]|$)",
    re.IGNORECASE,
)
#: A margin is its profit over revenue.
_MARGIN = re.compile(r"\b(?P<kind>gross|operating|net)\s+(?:profit\s+)?margins?\b", re.IGNORECASE)
#: A change between two periods of one quantity.
_CHANGE = re.compile(
    r"\b(?:by\s+how\s+much|chang\w*|grow\w*|grew|increas\w*|decreas\w*|declin\w*|differen\w*|rise|rose|fell)\b",
    re.IGNORECASE,
)
#: "By how much did operating income grow …", "How did revenue change …": the quantity it names.
_CHANGED = re.compile(
    r"\b(?:by\s+how\s+much|by\s+what\s+(?:percentage|percent|amount|rate)|how\s+much|how)\s+"
    r"(?:did|has|have|had)\s+(?:the\s+)?(?P<q>.+?)\s+"
    r"(?:chang|grow|grew|increas|decreas|declin|rise|rose|fall|fell)\w*",
    re.IGNORECASE,
)
#: "(year-over-year) change in revenue from FY2016 to FY2017", "growth of X between …": the quantity.
_CHANGE_IN = re.compile(
    r"\b(?:chang|grow|increas|decreas|declin)\w*\s+(?:rate\s+)?(?:in|of)\s+(?:the\s+)?(?P<q>[^?.;,()]+?)"
    r"\s+(?:from|between)\b",
    re.IGNORECASE,
)
#: "the FY2019 - FY2020 total revenue growth rate": the lower-case words before "growth rate".
_GROWTH_RATE = re.compile(r"(?P<q>\b[a-z&]+(?:\s+[a-z&]+){0,3}?)\s+(?:growth|change)\s+rate\b")
_PERCENT = re.compile(r"\bpercent\w*|%|\brate\b", re.IGNORECASE)
_NAMED = re.compile(
    r"^\s*(?:what|how\s+much)\s+(?:is|was|were)\s+(?:the\s+)?(?P<name>.+?)\s*,?\s*"
    r"(?:(?:defined|calculated|computed|measured)\b|\((?=[^()]+\s(?:divided\s+by|over)\s))",
    re.IGNORECASE,
)
#: A possessive before the quantity (`Best Buy's revenue`): whose it is, not what.
OWNER = re.compile(r"^.*['’]s\s+")
#: "… the effective tax rate of American Express": the owner after the quantity, a name in capitals.
_OWNED_BY = re.compile(r"\s+of\s+(?:the\s+)?(?:[A-Z][\w&.'’-]*\s*)+$")
_SIGN_GAP = re.compile(r"([$€£¥])\s+")
_YEARS = re.compile(r"\b(?:fy\s?)?(?:19|20)\d\d\b|\bfy\d\d\b", re.IGNORECASE)


@dataclass(frozen=True)
class Operand:
    """A cell the planner read: its evidence label, row, year, value as printed and as a number."""

    ref: str
    label: str
    path: str
    year: int | None
    text: str
    value: float
    unit: str | None
    months: int | None = None  # the column's period length, as its header says
    titled: bool = True  # its table's title names a statement the question points at (or it names none)


@dataclass(frozen=True)
class Worked:
    """The answer's sentence (the result, then the formula over the cited operands) and its refs."""

    sentence: str
    refs: list[str]


def asks_change(ask: str) -> bool:
    """A question about how one quantity changed between the two years it names."""
    return changed_quantity(ask) is not None and len(asked_years(ask)) == 2


def changed_quantity(ask: str) -> str | None:
    """What a change question asks about, as it says it: "how did X change", "the change in X from …",
    "the X growth rate" (the owner's name left out); None for none."""
    for pattern in (_CHANGED, _CHANGE_IN, _GROWTH_RATE):
        match = pattern.search(ask)
        if match is not None:
            said = _OWNED_BY.sub("", OWNER.sub("", match.group("q")))
            said = re.sub(
                r"^(?:(?:year[\s-]+over[\s-]+year|annual|the|what|is|was)\s+)+", "", said, flags=re.I
            )
            # a name in a sentence-case question is whose the quantity is ("the number of Best Buy
            # stores"), not what it is: a row called `Best Buy` is no store count
            kept = [w for w in said.split() if ask.istitle() or not (w[:1].isupper() and not w.isupper())]
            return " ".join(kept) or None
    return None


def read_words(ask: str) -> tuple[list[str], list[str]] | None:
    """What a computation the question defines reads, for the planner's search of the cells: the
    quantity's words (`operating income` of "by how much did operating income change …") and the
    words of rows it implies without naming them (a margin's profit and revenue); None for a
    question that defines no computation here."""
    margin = _MARGIN.search(ask)
    if margin:
        implied = [*MARGIN_PROFITS[margin.group("kind").lower()], *REVENUE_NAMES]  # each, as `worked` tries
        return [], sorted({w for name in implied for w in operand_words(name)})
    spent = _SPENT_SHARE.search(ask)  # "what share of net sales did X spend on R&D": both rows
    if spent:
        return sorted(operand_words(spent.group("a"))), sorted(operand_words(spent.group("b")))
    changed = changed_quantity(ask)
    if changed and len(asked_years(ask)) == 2:
        return sorted(operand_words(changed)), sorted(operand_words(" ".join(also_labelled(changed))))
    return None


def operands(rows: list[Any]) -> list[Operand]:
    """The plan's row entries (`[ref, label, header, text, unit, path, page, value, section, year]`)
    that hold a number, as operands; a change column's cell is no operand."""
    out: list[Operand] = []
    for entry in rows:
        if not (isinstance(entry, list) and len(entry) >= 10):
            continue
        ref, label, header, text, unit, path, _page, value, _section, year = entry[:10]
        if not (isinstance(ref, str) and isinstance(label, str) and isinstance(text, str)):
            continue
        if not isinstance(value, int | float) or isinstance(value, bool):
            continue
        if isinstance(header, str) and CHANGE_COLUMN.search(header):
            continue
        out.append(
            Operand(
                ref,
                label,
                str(path),
                year if isinstance(year, int) else None,
                text,
                float(value),
                unit if isinstance(unit, str) else None,
                period_length(header)[0] if isinstance(header, str) else None,
                entry[10] is not False if len(entry) > 10 else True,
            )
        )
    return out


def asked_period_operands(ask: str, rows: list[Any]) -> list[Operand]:
    """The operands of `rows` whose column is as long as the period the question names (of the same
    year, a quarter's column is not the year's), or says no length."""
    found = operands(rows)
    months = period_length(ask)[0]
    return found if months is None else [o for o in found if o.months in (months, None)]


def worked(ask: str, rows: list[Any]) -> Worked | None:
    """The computation the question defines, over the cells in `rows`; None when it defines none of
    these, or an operand is missing or ambiguous, or the units do not reconcile."""
    found = asked_period_operands(ask, rows)
    years = asked_years(ask)
    spent = _SPENT_SHARE.search(ask)  # its own phrase: "research, development and …" holds a comma
    if spent:
        a, b = spent.group("a").strip(), spent.group("b").strip()
        return _ratio(ask, capitalised(f"{a} as a percentage of {b}"), a, [b], found, years)
    for pattern, named in (
        (_DIVIDED, "{a} / {b}"),
        (_BRACKETED_RATIO, "{a} / {b}"),
        (_RATIO_OF, "The ratio of {a} to {b}"),
        (_AS_SHARE, "{a} as a percentage of {b}"),
    ):
        match = pattern.search(ask)
        if match:
            # a definition in brackets or after a comma ("… margin in 2017 (operating income as a share
            # of revenues)", "… in 2022, operating profit divided by …") is its own phrase: what stands
            # before the bracket or comma is not the numerator
            a = re.split(r"[(,]", match.group("a"))[-1].strip()
            b = match.group("b").split(")", 1)[0].strip()
            name = _defined_name(ask) or capitalised(named.format(a=a, b=b))
            return _ratio(ask, name, a, [b], found, years)
    margin = _MARGIN.search(ask)
    if margin:  # its profit by each name statements give it (Lockheed Martin's `Operating profit`)
        kind = margin.group("kind").lower()
        name = _defined_name(ask) or f"{kind.capitalize()} margin"
        tried = (_ratio(ask, name, top, list(REVENUE_NAMES), found, years) for top in MARGIN_PROFITS[kind])
        return next((done for done in tried if done is not None), None)
    if _CHANGE.search(ask) and len(years) == 2:
        return _change(ask, found, years)
    return None


def _ratio(
    ask: str, name: str, top: str, bottoms: list[str], found: list[Operand], years: tuple[int, ...]
) -> Worked | None:
    year = years[-1] if years else None
    pool = [o for o in found if year is None or o.year == year]
    want = asked_months(ask)  # the asked period's length
    a = _named(top, pool, want)
    same = [o for o in pool if a is not None and o.path == a.path]  # both from one document
    b = next((o for o in (_named(name, same, want) for name in bottoms) if o is not None), None)
    if a is None or b is None or a.ref == b.ref or b.value == 0:
        return None
    scale = reconciled(a, b)
    if scale is None:
        return None
    result = a.value * scale / b.value
    percent = bool(_PERCENT.search(ask) or _MARGIN.search(ask) or "share" in ask.lower())
    said = f"{result * 100:,.1f} %" if percent else f"{result:,.2f}"
    when = f" for {year}" if year is not None else ""
    formula = f"{_said(a)} [{a.ref}] / {_said(b)} [{b.ref}]"
    return Worked(f"{name}{when}: {said} = {formula}.", [a.ref, b.ref])


def _change(ask: str, found: list[Operand], years: tuple[int, ...]) -> Worked | None:
    """One quantity in two years: the rows the question names, one label of one document holding
    both years, its head noun the quantity's (`Total sales change` is no net sales)."""
    first, last = sorted(years)
    owned = changed_quantity(ask) or ""
    quantity = sorted(operand_words(owned))
    also = [sorted(operand_words(name)) for name in also_labelled(owned)]  # revenue's `Net sales`
    labels: dict[tuple[str, str], dict[int, Operand]] = {}
    for operand in found:
        if operand.year in (first, last):
            key = (operand.path, operand.label.casefold())
            labels.setdefault(key, {}).setdefault(operand.year, operand)
    both = [pair for pair in labels.values() if len(pair) == 2]
    asked = operand_words(ask).union(*also)
    both = [
        pair
        for pair in both
        if operand_words(pair[first].label) <= asked
        and (not quantity or any(names_quantity(pair[first].label, q) for q in (quantity, *also)))
    ]
    own = [pair for pair in both if names_quantity(pair[first].label, quantity)]
    if len(both) > 1 and len(own) == 1:  # "total revenues": `Total revenues`, not also `Net sales`
        both = own
    if len(both) > 1:  # of rows alike, the one whose columns say they are the asked length
        want = asked_months(ask)
        said = [pair for pair in both if all(o.months == want for o in pair.values())]
        both = said if len(said) == 1 else both
    if len(both) != 1:
        return None  # no row, or several, the question could mean
    a, b = both[0][first], both[0][last]
    if a.unit != b.unit:
        return None
    # amounts spent, printed in brackets on a cash flow statement: the spending grew when its size did
    spent = a.value < 0 and b.value < 0 and "(" in a.text and "(" in b.text
    first_value, last_value = (abs(a.value), abs(b.value)) if spent else (a.value, b.value)
    difference = last_value - first_value
    places = max(_places(a.text), _places(b.text))
    points = a.text.rstrip().endswith("%") and b.text.rstrip().endswith("%")  # a rate's change
    unit = f" {_UNIT_WORD[a.unit]}" if a.unit in _UNIT_WORD and not points else ""
    verb = "grew" if difference > 0 else "fell" if difference < 0 else "did not change"
    sentence = f"{a.label} {verb}" + (" (amounts spent, in brackets)" if spent else "")
    relative = bool(difference and first_value and not points)
    if difference:
        sentence += f" by {abs(difference):,.{places}f}" + (" percentage points" if points else unit)
        if relative:
            sentence += f" ({difference / abs(first_value) * 100:+.1f} %)"
    sentence += (
        f", from {printed(a)}{unit} in {first} [{a.ref}] to {printed(b)}{unit} in {last} [{b.ref}]"
        f" ({_number(last_value, places)} − {_number(first_value, places)} = {_number(difference, places)}"
    )
    if relative:
        sentence += f"; {_number(difference, places)} / {_number(abs(first_value), places)}"
        sentence += f" = {difference / abs(first_value) * 100:+.1f} %"
    return Worked(sentence + ").", [a.ref, b.ref])


def _named(phrase: str, pool: list[Operand], want: int | None = None) -> Operand | None:
    """The operand whose row the phrase names: every word of the row's label in the phrase and most of
    the phrase in the label; None when none does or two rows do as well — but for the one row of them
    whose column says it is `want` months long (Netflix's `Revenues` for the year beside a quarterly
    table's `Total revenues`, whose header says no length)."""
    wanted = operand_words(phrase)
    if not wanted:
        return None
    scored = []
    for operand in pool:
        label = operand_words(operand.label) - {"total"}
        # its head noun the phrase's: `% of revenue` is a share, not revenue
        if label and label <= wanted | {"total"} and head_nouns(operand.label) & wanted:
            scored.append((len(label & wanted) / len(wanted | label), operand))
    scored.sort(key=lambda pair: -pair[0])
    if not scored or scored[0][0] < 0.5:
        return None
    if len(scored) > 1 and scored[1][0] == scored[0][0] and scored[1][1].value != scored[0][1].value:
        tied = [operand for score, operand in scored if score == scored[0][0]]
        said = [operand for operand in tied if want is not None and operand.months == want]
        return said[0] if len(said) == 1 else None
    return scored[0][1]


def reconciled(a: Operand, b: Operand) -> float | None:
    """The factor that puts `a` in `b`'s unit: 1 for the same unit, a power of a thousand between two
    scales; None for a scale against no unit (a per-share amount against millions)."""
    if a.unit == b.unit:
        return 1.0
    if a.unit in UNIT_SCALES and b.unit in UNIT_SCALES:
        return UNIT_SCALES[a.unit] / UNIT_SCALES[b.unit]
    return None


def _defined_name(ask: str) -> str | None:
    """The name a question gives what it defines: `operating margin` of "What is the 2025 operating
    margin, defined as …"."""
    named = _NAMED.search(ask)
    if named is None:
        return None
    name = " ".join(_YEARS.sub(" ", named.group("name")).split()).strip(" ,")
    name = re.sub(r"\s+(?:in|for|at|during|of|as\s+of)$", "", name)  # "… margin in 2022": its year is said
    return capitalised(name) if name else None


def capitalised(text: str) -> str:
    """`text` with its first letter upper-cased (a name at the start of a sentence)."""
    return text[:1].upper() + text[1:]


def _said(operand: Operand) -> str:
    unit = f" {_UNIT_WORD[operand.unit]}" if operand.unit in _UNIT_WORD else ""
    return f"{operand.label} {printed(operand)}{unit}"


def printed(operand: Operand) -> str:
    """The figure as printed, its currency sign against it (`$ 8,830,669` → `$8,830,669`)."""
    return _SIGN_GAP.sub(r"\1", operand.text.strip())


def operand_words(text: str) -> set[str]:
    """A label's or phrase's content words, stemmed (no stop words, no bare numbers)."""
    return {normalize_word(w) for w in words(text.casefold()) if w not in STOP_WORDS and not w.isdigit()}


def _places(text: str) -> int:
    digits = re.search(r"\.(\d+)", text)
    return len(digits.group(1)) if digits else 0


def _number(value: float, places: int) -> str:
    return f"{value:,.{places}f}"


#: Words after which a row label's head noun has been said (`Cost of revenue`, `Income from operations`,
#: `Net income attributable to …`).
_HEAD_END = re.compile(
    r"[,(:;]|\b(?:of|from|for|in|on|to|at|by|with|attributable|before|after|per|excluding|including|"
    r"net\s+of|less)\b",
    re.IGNORECASE,
)


def names_quantity(label: str, quantity: tuple[str, ...] | list[str]) -> bool:
    """Whether a row label names the asked quantity: its head noun (the last word before a comma, a
    bracket or a preposition; of either side of an `and`) is one of the quantity's words. `Employee
    benefits` is no head count,
    `Cost of revenue` no revenue; `Net revenues`, `Revenues, net` and `Total net sales` are revenue
    and net sales."""
    return bool(head_nouns(label) & set(quantity)) and not _other_kind(label, quantity)


#: Words that say how much of a quantity a row holds, not which quantity it is.
_GENERIC = frozenset({"total", "consolidated", "reported", "amount"})
_BRACKETED = re.compile(r"\([^)]*\)")


def _other_kind(label: str, quantity: tuple[str, ...] | list[str]) -> bool:
    """The label names another kind of the quantity's head noun: a word of its own before the head
    (`Operating income`) while a word the quantity names is not in it (`net income`). Words in brackets
    qualify, they do not name: `Operating income (as a percentage of net sales)` holds no `net`."""
    label = _BRACKETED.sub(" ", label)
    head = _HEAD_END.split(label, maxsplit=1)[0]
    own = {normalize_word(w) for w in words(head.casefold()) if w not in STOP_WORDS and not w.isdigit()}
    said = {normalize_word(w) for w in words(label.casefold())}
    asked = set(quantity) - _GENERIC
    return bool(own - asked - _GENERIC) and bool(asked - said)


def head_nouns(text: str) -> set[str]:
    """The head nouns of a row label or a phrase (stemmed): the last word before a comma, a bracket or
    a preposition, of either side of an `and` (`Cash and cash equivalents`: cash, equivalent)."""
    head = _HEAD_END.split(text, maxsplit=1)[0]
    out: set[str] = set()
    for part in re.split(r"\band\b|&", head, flags=re.IGNORECASE):
        found = [w for w in words(part.casefold()) if w not in STOP_WORDS and not w.isdigit()]
        if found:
            out.add(normalize_word(found[-1]))
    return out
