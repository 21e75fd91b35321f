"""Numbers as prose and tables write them: the value, its sign, scale, currency and percent, and whether
it only frames a statement (a year, a day of a date, a period length), and when two of them agree.

One reading for the two places that compare a stated number with another: the eval matcher (is the
gold figure in the answer?) and the claim check (is the answer's figure in what it cites?).

Signs: `-1,234`, `(1,234)`, `$(1,234)`, `(2.1)%` and `−1.2` are negative (`(3.4%)` and a bullet dash
are not). Scales: when both sides state one (`million`, `bn`, `$1.5B`) the full values are compared;
when only one does, the bare number may be in units, thousands, millions or billions (filings state
tables "in millions"). A percentage also agrees with its fraction (`25%` = `0.25`). Numbers glued to
letters (`FY2022`, `Q2`, `10-K`, `3M`, `COVID-19`) are names, not quantities.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass, field
from decimal import ROUND_HALF_UP, Decimal, InvalidOperation

from sleuth.format.dates import MONTH_NAMES

__all__ = ["NEGATIVE_CUE", "REL_TOLERANCE", "Number", "agree", "close", "extract_numbers", "rounds_to"]

#: Two numbers agree within this share of the second (or once rounded to its displayed decimals).
REL_TOLERANCE = 0.01


@dataclass(frozen=True)
class Number:
    """A number as written: signed value before any scale, displayed decimals, stated scale."""

    value: float
    decimals: int
    scale: float | None = None
    percent: bool = False
    currency: bool = False
    plain_integer: bool = False  # no decimals, no thousands separator, no currency, unit or scale
    framing: bool = False  # a year, a day of a date or a period length (`12 months`): not an answer
    shown: str = field(default="", compare=False)  # as written, with its unit or scale (`32.4 %`)


_CORE = re.compile(r"(?<![\w.])(\d{1,3}(?:,\d{3})+(?:\.\d+)?|\d+(?:\.\d+)?|\.\d+)")
_SCALES = {"thousand": 1e3, "million": 1e6, "billion": 1e9, "trillion": 1e12}
_SHORT_SCALES = {"k": 1e3, "m": 1e6, "mm": 1e6, "mn": 1e6, "mln": 1e6, "b": 1e9, "bn": 1e9, "t": 1e12}
_GLUED = re.compile(r"[A-Za-z]+")
#: Units written against their number (`12V`, `150mm`): quantities, unlike names such as `3M` or `10K`.
_GLUED_UNITS = frozenset(
    {"v", "mv", "kv", "ma", "w", "kw", "mw", "hz", "khz", "mhz", "ghz", "mm", "cm", "km", "kg", "mg"}
    | {"ms", "kb", "mb", "gb", "tb", "nm", "psi", "bar", "mbar", "kpa", "mpa"}
)
_SPACED_UNIT = re.compile(
    r"\s*(?:(?P<pct>%|percent\b|per\s+cent\b|percentage\s+points?\b|pp\b)"
    r"|(?P<word>thousand|million|billion|trillion)s?\b|(?P<short>mn|mln|bn|mm)\b)",
    re.IGNORECASE,
)
_CURRENCIES = ("US$", "USD", "EUR", "GBP", "$", "€", "£")
_MINUS = "-−–"  # hyphen-minus, minus sign, en dash (PDF text uses all three)
NEGATIVE_CUE = re.compile(
    r"\b(?:decreas\w*|declin\w*|drop\w*|fell|fall\w*|lower\w*|loss\w*|negative|deficit\w*|down|"
    r"reduc\w*|shr[iau]nk\w*|contract\w*|outflow\w*|less)\b",
    re.IGNORECASE,
)
_MONTH = rf"(?:{MONTH_NAMES})\.?"
_MONTH_BEFORE = re.compile(rf"\b{_MONTH}\s+$", re.IGNORECASE)
_MONTH_AFTER = re.compile(rf"\s+{_MONTH}\b", re.IGNORECASE)
_PERIOD_AFTER = re.compile(r"\s*-?\s*(?:months?|years?|weeks?|quarters?|days?)\b", re.IGNORECASE)


def _is_bullet(text: str, pos: int) -> bool:
    """A dash that opens a line other than the first is a list bullet, not a sign (`\n-100% equity`)."""
    line_start = text.rfind("\n", 0, pos) + 1
    return line_start > 0 and not text[line_start:pos].strip()


def _scan_prefix(text: str, start: int) -> tuple[bool, bool, bool]:
    """Walk back from a number over a sign, a currency and an opening parenthesis, in any order:
    `-$5`, `$-5`, `($5)`, `$(5)`, `USD 5`. Returns (negative, currency, parenthesised)."""
    pos, negative, currency, paren = start, False, False, False
    for _ in range(3):
        if not negative and pos > 0 and text[pos - 1] in _MINUS:
            before = text[pos - 2] if pos >= 2 else " "
            if not before.isalnum() and before not in ".,)" and not _is_bullet(text, pos - 1):
                negative, pos = True, pos - 1
                continue
        if not currency:
            back = pos - 1 if pos > 0 and text[pos - 1] == " " else pos  # one space: `USD 1,577`
            symbol = next((s for s in _CURRENCIES if text[:back].endswith(s)), None)
            if symbol is not None:
                left = back - len(symbol)
                if not (symbol[0].isalpha() and left > 0 and text[left - 1].isalpha()):
                    currency, pos = True, left
                    continue
        if not paren and pos > 0 and text[pos - 1] == "(":
            paren, pos = True, pos - 1
            continue
        break
    return negative, currency, paren


def extract_numbers(text: str) -> list[Number]:
    """Every number in `text` with its sign, currency, percent and scale (see the module rules)."""
    text = unicodedata.normalize("NFKC", text).replace("\u2212", "-")
    out: list[Number] = []
    for m in _CORE.finditer(text):
        core = m.group(1)
        if m.start() >= 2 and text[m.start() - 1] == "-" and text[m.start() - 2].isalpha():
            continue  # `COVID-19`, `Form-10`: part of a name
        negative, currency, paren = _scan_prefix(text, m.start())
        end = m.end()
        scale: float | None = None
        glued = _GLUED.match(text, end)
        if glued:
            suffix = glued.group().lower()
            decimal_or_money = currency or "." in core
            if suffix in ("mn", "mln", "bn", "mm") or (decimal_or_money and suffix in _SHORT_SCALES):
                scale, end = _SHORT_SCALES[suffix], glued.end()
            elif suffix == "x" or suffix in _GLUED_UNITS:
                end = glued.end()  # `2.5x`, `3.00V`, `150mm`: a quantity in its unit
            else:
                continue  # `3M`, `10K`, `2nd`: part of a name, not a quantity
        elif end < len(text) - 1 and text[end] == "-" and text[end + 1].isalpha():
            continue  # `10-K`, `8-K`, `10-year`
        percent = False
        unit = _SPACED_UNIT.match(text, end)
        if unit and scale is None:
            if unit.group("pct"):
                percent = True
            elif unit.group("word"):
                scale = _SCALES[unit.group("word").lower()]
            elif unit.group("short"):
                scale = _SHORT_SCALES[unit.group("short").lower()]
            end = unit.end()
        try:
            value = float(core.replace(",", ""))
        except ValueError:
            continue
        decimals = len(core.split(".", 1)[1]) if "." in core else 0
        plain = decimals == 0 and "," not in core and not (currency or percent or scale)
        if paren and not percent and text[end : end + 2] == ")%":
            negative, percent = True, True  # `(2.1)%`, a table's negative percentage
        elif paren and not percent and text[end : end + 1] == ")" and not (plain and 1900 <= value <= 2100):
            negative = True  # `(1,234)`; `(3.4%)` and `(2018)` stay positive
        framing = plain and (
            1900 <= value <= 2100
            or (
                value <= 31
                and (
                    _MONTH_BEFORE.search(text, max(0, m.start() - 12), m.start())
                    or _MONTH_AFTER.match(text, end)
                )
            )
            or _PERIOD_AFTER.match(text, end) is not None
        )
        signed = -value if negative else value
        shown = text[m.start() : end]
        out.append(Number(signed, decimals, scale, percent, currency, plain, bool(framing), shown))
    return out


def rounds_to(value: float, gold: float, decimals: int) -> bool:
    try:
        quantum = Decimal(1).scaleb(-decimals)
        return Decimal(repr(value)).quantize(quantum, ROUND_HALF_UP) == Decimal(repr(gold)).quantize(
            quantum, ROUND_HALF_UP
        )
    except InvalidOperation:
        return False


def close(value: float, gold: float, decimals: int) -> bool:
    if gold == 0:
        return abs(value) < 0.5 * 10.0**-decimals
    return abs(value - gold) <= REL_TOLERANCE * abs(gold) or rounds_to(value, gold, decimals)


def agree(pred: Number, gold: Number, forgive_sign: bool) -> bool:
    """Does `pred` state `gold`, in the gold's units, under the scale, percent and sign rules?"""
    values = [pred.value]
    if pred.scale and gold.scale:
        values = [pred.value * pred.scale / gold.scale]
    elif pred.scale:
        values += [pred.value * pred.scale / f for f in (1.0, 1e3, 1e6, 1e9)]
    elif gold.scale:
        values += [pred.value * f / gold.scale for f in (1.0, 1e3, 1e6, 1e9)]
    if pred.percent and not gold.percent:
        values += [v / 100 for v in values]
    elif gold.percent and not pred.percent:
        values += [v * 100 for v in values]
    if gold.framing:  # a date is exact: 2016 is not "within 1%" of 2015
        return pred.value == gold.value and not (pred.scale or pred.percent)
    target = abs(gold.value) if forgive_sign else gold.value
    return any(close(abs(v) if forgive_sign else v, target, gold.decimals) for v in values)
