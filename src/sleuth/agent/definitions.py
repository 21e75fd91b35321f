"""Formulas a question spells out, and the terms it defines on the way (issue 45, item 2), worked out
offline over the cells the planner read, each operand cited.

A formula is numbers, `+ - * /` (or `less`, `minus`, `plus`), brackets, and terms that name a
quantity in a year, its average between two years, or its change between them: "ROA is defined as:
FY2017 net income / (average total assets between FY2016 and FY2017)". A term may be defined in turn —
"CCC is defined as: DIO + DSO - DPO. DIO is defined as: …", "Define unadjusted EBITDA as unadjusted
operating income + depreciation and amortization" — and is then worked out from its own definition;
EBITDA, which analysts use without defining, is the field's (`statement_names.FIELD_DEFINITIONS`).
The asked quantity may be built on such a term: "EBITDA % margin" (over revenue), "EBITDA less capex",
or a sum written in the question itself ("FY2021 operating income + depreciation and amortization").
Whatever the cells do not hold, or a term no definition explains, is declined: the planner lists the
figures it found instead.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from sleuth.agent.arithmetic import Operand, Worked, capitalised, operand_words, printed
from sleuth.agent.extractive import asked_quantity, asked_years, content_words
from sleuth.agent.named_rows import pair, resolve
from sleuth.agent.planner_figures import UNIT_SCALES
from sleuth.agent.statement_names import ABBREVIATIONS, ALSO_LABELLED, FIELD_DEFINITIONS, spelled_out

_SENTENCE_END = r"(?=\.\s|\.$|\?|$)"
#: A formula the question spells out: what follows "defined as" up to the sentence's end.
_DEFINITION = re.compile(rf"\bdefined\s+as\s*:?\s*(?P<f>.+?){_SENTENCE_END}", re.IGNORECASE)
#: "DIO is defined as: …": the name is what the sentence says before it.
_NAMED_DEFINITION = re.compile(
    rf"(?:^|[.?:;]\s+)(?:the\s+)?(?P<name>[A-Za-z][\w&\s'’-]{{0,60}}?)\s+(?:is|are)\s+defined\s+as\s*:?\s*"
    rf"(?P<f>.+?){_SENTENCE_END}",
    re.IGNORECASE,
)
#: "Define net working capital as total current assets less total current liabilities": the name and
#: the formula, whose words for `+` and `-` are read as the symbols.
_DEFINE = re.compile(rf"\bdefine\s+(?P<name>[^.?:]{{1,80}}?)\s+as\s*:?\s*(?P<f>.+?){_SENTENCE_END}", re.I)
_WORDED = {"less": " - ", "minus": " - ", "plus": " + "}
_WORDED_OPERATOR = re.compile(r"\s+(less|minus|plus)\s+", re.IGNORECASE)
_NOTE = re.compile(r"\s*\[[^\]]*\]")  # "[from cash flow statement]": where to read it, no term
_TOKEN = re.compile(r"(\(|\)|\*|×|/|÷|\+|\s[-−–]\s)")
_OPERATOR = re.compile(r"[/*+×÷]|\s[-−–]\s")
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
#: "Unadjusted EBITDA" is EBITDA as the statements give its parts: no adjustment is made here either.
_UNADJUSTED = re.compile(r"\b(?:un)?adjusted\s+", re.IGNORECASE)
#: The quantity a "what is …?" question asks, up to whose it is ("… for PepsiCo") or its unit.
_ASKED = re.compile(r"\b(?:what|how\s+much)\s+(?:is|was|were)\s+(?:the\s+)?(?P<q>[^?]+?)\s*(?:\?|$)", re.I)
_OWNER = re.compile(r"^.*['’]s?\s+(?=\S)")
_WHOSE = re.compile(r"\s+(?:for|of|at)\s+(?:[A-Z][\w&.'’-]*\s*)+$")
_UNIT_SAID = re.compile(r"\s+in\s+(?:USD|US\$|\$)?\s*(?:millions|billions|thousands)\b.*$", re.IGNORECASE)
#: "EBITDA % margin", "D&A margin": the quantity over revenue. A gross, operating or net margin is
#: `arithmetic`'s, which reads each one's profit by the names statements give it.
_MARGIN_OF = re.compile(r"^(?P<t>.+?)\s+(?:%\s+)?margins?$", re.IGNORECASE)
_PROFIT_MARGIN = re.compile(r"^(?:gross|operating|net)(?:\s+(?:profit|income))?$", re.IGNORECASE)
_LESS = re.compile(r"^(?P<a>.+?)\s+(?:less|minus)\s+(?P<b>.+)$", re.IGNORECASE)
MAX_DEPTH = 4  # terms defined by terms: deeper is no definition a question gives
MAX_BRACKETS = 12  # brackets inside brackets: deeper is no formula a question spells out


def formula_text(ask: str) -> tuple[int, str] | None:
    """(where it is defined, the formula) of a formula the question spells out with symbols after
    "defined as", or after "define X as" with `less`, `minus` or `plus` for symbols where X is the
    quantity asked; None for none (a definition in words, "operating income divided by revenue", is
    `arithmetic.worked`'s)."""
    found = _definition(ask)
    if found is None:
        return None
    text = found[1]
    return found if _TOKEN.search(text) and _OPERATOR.search(text) else None


def _definition(ask: str) -> tuple[int, str] | None:
    """(where the definition starts, its formula) of the question's definition; None for none, and
    for a "define X as" whose X is not what the question asks ("EBITDA less capex", defining EBITDA:
    a definition the asked quantity only leans on — `terms` reads it)."""
    match = _DEFINITION.search(ask)
    if match is not None:
        return match.start(), match.group("f").strip()
    match = _DEFINE.search(ask)
    if match is None:
        return None
    head = ask[: match.start()]
    if set(content_words(match.group("name"))) != set(asked_quantity(head) or ["?"]):
        return None
    return match.start(), _symbols(match.group("f"))


def _symbols(formula: str) -> str:
    """A formula with its words for `+` and `-` written as the symbols, its notes left out."""
    return _WORDED_OPERATOR.sub(lambda m: _WORDED[m.group(1).lower()], _NOTE.sub("", formula)).strip()


def term_key(name: str) -> str:
    """A term as `terms` keys it: lower case, spelled out, without "unadjusted" or an article."""
    said = _UNADJUSTED.sub("", spelled_out(name)).lower()
    return " ".join(re.sub(r"^(?:the|an?)\s+", "", said).split())


def terms(ask: str) -> dict[str, str]:
    """The terms the question defines by a formula ("DIO is defined as: …", "Define unadjusted EBITDA
    as …"), keyed by `_key`, and the field's definitions of terms it names but does not define."""
    out: dict[str, str] = {}
    for pattern in (_NAMED_DEFINITION, _DEFINE):
        for match in pattern.finditer(ask):
            formula = _symbols(match.group("f"))
            if _TOKEN.search(formula) and _OPERATOR.search(formula):
                out.setdefault(term_key(match.group("name")), formula)
    said = term_key(ask)
    for name, formula in FIELD_DEFINITIONS.items():
        if re.search(rf"\b{re.escape(name)}\b", said) and name not in out:
            out[name] = formula
    return out


def definition_words(ask: str) -> list[str]:
    """The content words of the rows the question's formulas read (`net income`, `total assets` of
    "ROA is defined as: FY2017 net income / (average total assets …)"; the parts of the EBITDA it
    names; revenue, for a margin of it), and their other names: what the planner looks up."""
    texts = list(terms(ask).values())
    asked = formula_text(ask)
    texts += [asked[1]] if asked is not None else []
    built = _built(ask)
    texts += [built[0]] if built is not None else []
    spelled = spelled_out(" ".join(texts)).lower()
    also = [n for full, names in ALSO_LABELLED.items() if full in spelled for n in names]
    return sorted(operand_words(" ".join([spelled, *also])) - {"average", "change", "fy", "unadjusted"})


@dataclass(frozen=True)
class _Value:
    """A formula's value so far, the working that shows it, and the cells it read."""

    value: float
    shown: str
    refs: tuple[str, ...]
    unit: str | None  # the scale of its cells (a product or quotient of scaled figures: None)
    outflow: bool = False  # one cell printed in brackets: an amount spent, subtracted by its size


class _Declined(Exception):
    """A formula this module cannot work out from the cells: the planner lists the figures instead."""


def formula(ask: str, at: int, text: str, found: list[Operand]) -> Worked | None:
    """The formula `text`, defined at `at` in the ask (a term's year is the one named before it)."""
    main = asked_years(ask[:at]) or asked_years(ask)
    result = evaluate(text, found, main[0] if main else None, terms(ask))
    if result is None:
        return None
    named = re.search(r"\b(?:what\s+(?:is|was)\s+(?:the\s+)?)(?P<n>[^?]+?)\?", ask, re.IGNORECASE)
    name = capitalised(named.group("n").strip()) if named else "The result"
    return Worked(f"{name}: {result.value:,.2f} = {result.shown}.", list(dict.fromkeys(result.refs)))


def evaluate(text: str, found: list[Operand], year: int | None, known: dict[str, str]) -> _Value | None:
    """The formula `text` over the cells `found` (a term without a year is in `year`), the terms in
    `known` worked out from their definitions; None where a cell or a definition is missing."""
    try:
        parser = _Parser(_tokens(text), found, year, known)
        result = parser.expression()
        if parser.rest:
            raise _Declined
    except (_Declined, ZeroDivisionError):
        return None
    return result if result.refs else None


def _tokens(text: str) -> list[str]:
    return [t.strip() for t in _TOKEN.split(text) if t.strip()]


def defined(ask: str, found: list[Operand]) -> Worked | None:
    """A one-year quantity built on defined terms or spelled as a formula in the question itself:
    "the FY2022 unadjusted EBITDA % margin", "EBITDA less capex", "FY2021 unadjusted operating income
    + depreciation and amortization … (unadjusted EBITDA)"; None for any other question."""
    built = _built(ask)
    if built is None:
        return None
    text, year, percent = built
    years = asked_years(ask)
    year = year or (years[0] if len(years) == 1 else None)
    result = evaluate(text, found, year, terms(ask))
    if result is None or year is None:
        return None
    unit = f" {result.unit.removesuffix('s')}" if result.unit in UNIT_SCALES else ""
    said = f"{result.value * 100:,.1f} %" if percent else f"{result.value:,.2f}{unit}"
    name = capitalised(_asked_phrase(ask) or "the result")
    return Worked(f"{name}: {said} = {result.shown}.", list(dict.fromkeys(result.refs)))


def margin_of(what: str, known: dict[str, str]) -> str | None:
    """X of "X % margin" where X is a defined term or a quantity the field names (`D&A`, `capex`): it
    over revenue. A gross, operating or net margin is `arithmetic`'s; a "contribution margin" is no
    contribution over revenue, so a margin of anything else is declined."""
    match = _MARGIN_OF.match(what.strip())
    if match is None or _PROFIT_MARGIN.match(_UNADJUSTED.sub("", match.group("t"))):
        return None
    term = match.group("t")
    spelled = spelled_out(term).lower()
    named = any(full in spelled for full in (*ABBREVIATIONS.values(), *ALSO_LABELLED))
    key = term_key(term)  # "… 3 year average unadjusted EBITDA": EBITDA
    return term if named or any(key == k or key.endswith(f" {k}") for k in known) else None


def _asked_phrase(ask: str) -> str | None:
    """What a "what is …?" question asks, as it says it: without its asides in brackets, its unit
    ("in USD millions"), whose it is ("Contoso's", "for PepsiCo"); None for no such question."""
    match = _ASKED.search(ask)
    if match is None:
        return None
    said = _UNIT_SAID.sub("", re.sub(r"\s*\([^)]*\)", "", match.group("q"))).strip()
    return _WHOSE.sub("", _OWNER.sub("", said))


def builds_on(ask: str) -> bool:
    """Whether the asked quantity is built on a defined term or spelled with operators (`defined`)."""
    return _built(ask) is not None


def _built(ask: str) -> tuple[str, int | None, bool] | None:
    """(the formula of the asked quantity, the year it names, a percentage?) where it is built on a
    defined term or spelled with operators; None otherwise."""
    asked = _asked_phrase(ask)
    if asked is None:
        return None
    dated = _YEAR_BEFORE.match(asked)
    year = int(dated.group("y")) if dated else None
    asked = dated.group("q") if dated else asked
    known = terms(ask)
    margined = margin_of(asked, known)
    if margined is not None:
        return f"({margined}) / revenue", year, True
    less = _LESS.match(asked)
    if less is not None and term_key(less.group("a")) in known:
        return f"({less.group('a')}) - ({less.group('b')})", year, False
    if _OPERATOR.search(f" {asked} ") and re.search(r"\s[+−–-]\s", asked):
        return asked, year, False
    return (asked, year, False) if term_key(asked) in known else None


class _Parser:
    """Recursive descent over `expression := term (± term)*`, `term := factor (×/÷ factor)*`,
    `factor := number | ( expression ) | a quantity term`, each quantity read from the cells or, for a
    defined term, worked out from its definition (at most `MAX_DEPTH` deep)."""

    def __init__(
        self, tokens: list[str], found: list[Operand], year: int | None, known: dict[str, str], depth: int = 0
    ) -> None:
        self.rest = tokens
        self.found = found
        self.year = year
        self.known = known
        self.depth = depth
        self.brackets = 0  # brackets open now

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
            # "EBITDA less capex": capital spending printed `(5,207)` is subtracted by its size
            subtrahend = abs(right.value) if right.outflow else right.value
            value = left.value + right.value if sign == "+" else left.value - subtrahend
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
            self.brackets += 1
            if self.brackets > MAX_BRACKETS:
                raise _Declined  # a question's text is hostile until proven otherwise: no deep recursion
            inner = self.expression()
            if self._take() != ")":
                raise _Declined
            self.brackets -= 1
            return _Value(inner.value, f"({inner.shown})", inner.refs, inner.unit, inner.outflow)
        if _NUMBER.match(token):
            return _Value(float(token.replace(",", "")), token, (), None)
        return self._quantity(token)

    def _quantity(self, term: str) -> _Value:
        for pattern, combine in ((_AVERAGE_TERM, "average"), (_CHANGE_TERM, "change")):
            match = pattern.match(term)
            if match:
                first, last = int(match.group("a")), int(match.group("b"))
                both = pair(_UNADJUSTED.sub("", _WHERE.sub("", match.group("q"))), self.found, first, last)
                if both is None:
                    raise _Declined
                a, b = both
                refs = (a.ref, b.ref)
                if combine == "average":
                    shown = f"({a.label} {printed(a)} [{a.ref}] + {printed(b)} [{b.ref}]) / 2"
                    return _Value((a.value + b.value) / 2, shown, refs, a.unit)
                shown = f"({a.label} {printed(b)} [{b.ref}] − {printed(a)} [{a.ref}])"
                return _Value(b.value - a.value, shown, refs, a.unit)
        dated = _YEAR_BEFORE.match(term) or _YEAR_AFTER.match(term)
        year = int(dated.group("y")) if dated else self.year
        quantity = _WHERE.sub("", dated.group("q") if dated else term)
        key = term_key(quantity)
        if key in self.known:  # a term the question (or the field) defines: its own formula
            if self.depth >= MAX_DEPTH:
                raise _Declined
            inner = _Parser(_tokens(self.known[key]), self.found, year, self.known, self.depth + 1)
            value = inner.expression()
            if inner.rest:
                raise _Declined
            name = capitalised(_UNADJUSTED.sub("", quantity).strip())  # as the question writes it
            return _Value(value.value, f"{name} ({value.shown})", value.refs, value.unit)
        pool = [o for o in self.found if o.year == year]
        if _WHERE.search(dated.group("q") if dated else term):  # "D&A from the cash flow statement"
            pool = [o for o in pool if o.titled]  # only the statements the question points at
        cell = resolve(_UNADJUSTED.sub("", quantity), pool)
        if cell is None:
            raise _Declined
        outflow = cell.value < 0 and "(" in cell.text
        return _Value(
            cell.value, f"{cell.label} {printed(cell)} [{cell.ref}]", (cell.ref,), cell.unit, outflow
        )


def _scale(top: str | None, bottom: str | None) -> float:
    """What a quotient's numerator is multiplied by to put it in its denominator's scale."""
    if top == bottom or top is None or bottom is None:
        return 1.0
    if top in UNIT_SCALES and bottom in UNIT_SCALES:
        return UNIT_SCALES[top] / UNIT_SCALES[bottom]
    raise _Declined


__all__ = [
    "builds_on",
    "defined",
    "definition_words",
    "evaluate",
    "formula",
    "formula_text",
    "margin_of",
    "term_key",
    "terms",
]
