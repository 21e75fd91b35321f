"""Is a value a model extracted really in the quote it gave? (issue 22, item 2)

A model can copy a real sentence as its quote and still make the value up: the quote verifies, the
value does not. Every model-made value is therefore checked against its verified quote before it is
kept, normalised the way writers vary a figure without changing it:

- **numbers**: thousands separators (`1,234.5`), currency signs, parentheses for negatives, a sign
  the text states in words ("decreased 5%" for -5), percent (`18.2%` for 18.2 or 0.182), scale words
  (`$10.2 billion` for 10.2 or 10,200,000,000; thousand, million, billion, trillion, k, m, bn) and
  small number words ("three days" for 3);
- **dates**: an ISO value (`2024`, `2024-03`, `2024-03-15`) against numeric or written dates ("March
  15, 2024", "15 Mar 2024", "3/15/2024");
- **text**: case, whitespace, quotation marks and dashes folded (`format.text.TYPOGRAPHIC`); a name
  may stand in its source rather than in the one sentence quoted (a table's subject is often named in
  a heading), so `text_in` is called with the source's text where that is the rule.
"""

from __future__ import annotations

import functools
import math
import re
import unicodedata

from sleuth.format.dates import MONTHS
from sleuth.format.text import TYPOGRAPHIC

__all__ = ["date_in", "number_in", "text_in"]

_SCALES = {
    "thousand": 1e3,
    "k": 1e3,
    "million": 1e6,
    "mn": 1e6,
    "m": 1e6,
    "mm": 1e6,
    "billion": 1e9,
    "bn": 1e9,
    "b": 1e9,
    "trillion": 1e12,
    "tn": 1e12,
}
_ONES = "zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen"
_TEENS = "sixteen seventeen eighteen nineteen twenty"
_WORDS: dict[str, float] = {w: n for n, w in enumerate(f"{_ONES} {_TEENS}".split())}
_WORDS.update({"thirty": 30, "forty": 40, "fifty": 50, "sixty": 60, "seventy": 70, "eighty": 80})
_WORDS.update({"ninety": 90, "hundred": 100, "dozen": 12, "half": 0.5})
_NUMBER = re.compile(
    r"(?<![\d.,])\(?[-−–]?[$€£¥]?\s?(\d{1,3}(?:[,\u00a0\u202f ]\d{3})+(?:\.\d+)?|\d+(?:\.\d+)?)\)?"
    r"\s?(%|percent\b|per cent\b|(?:thousand|million|billion|trillion|k|mn|mm|m|bn|b|tn)\b)?",
    re.IGNORECASE,
)
_WORD_NUMBER = re.compile(r"\b(" + "|".join(sorted(_WORDS, key=len, reverse=True)) + r")\b", re.IGNORECASE)
_ISO = re.compile(r"^(\d{4})(?:-(\d{1,2})(?:-(\d{1,2}))?)?")


def _candidates(text: str) -> set[float]:
    """Every value `text` states a number as (absolute values: the sign is often said in words)."""
    out: set[float] = set()
    for m in _NUMBER.finditer(text):
        digits = re.sub(r"[,\u00a0\u202f ]", "", m.group(1))
        try:
            number = float(digits)
        except ValueError:
            continue
        out.add(number)
        unit = (m.group(2) or "").lower()
        if unit in ("%", "percent", "per cent"):
            out.add(number / 100)
        elif unit:
            out.add(number * _SCALES[unit])
    for m in _WORD_NUMBER.finditer(text):
        out.add(float(_WORDS[m.group(1).lower()]))
    return out


def _close(a: float, b: float) -> bool:
    return math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-9)


def number_in(value: float, text: str) -> bool:
    """Does `text` state `value` (in any of the forms in the module docstring)?"""
    if not math.isfinite(value):
        return False
    wanted = abs(value)
    return any(_close(wanted, c) for c in _candidates(text))


@functools.lru_cache(maxsize=32)
def _fold(text: str) -> str:
    """The matching form of a text. Cached: a row's text values are each looked for in their whole
    source, which is the same string for every row of that source and so is folded once."""
    text = unicodedata.normalize("NFKC", text).translate(TYPOGRAPHIC).casefold()
    return " ".join(re.sub(r"[^\w%$€£.,'\"&/-]+", " ", text).split())


def text_in(value: str, text: str) -> bool:
    """Is `value` in `text`, case, spacing, quotation marks and dashes folded?"""
    wanted = _fold(value).strip(" .,")
    return bool(wanted) and wanted in _fold(text)


def date_in(value: str, text: str) -> bool:
    """Is the ISO date `value` (`2024`, `2024-03`, `2024-03-15`) stated in `text`, numerically or in
    words? A value that is not an ISO date is looked up as text."""
    m = _ISO.match(value.strip())
    if m is None:
        return text_in(value, text)
    year, month, day = m.group(1), m.group(2), m.group(3)
    folded = _fold(text)
    if not re.search(rf"(?<!\d){year}(?!\d)|'{year[2:]}(?!\d)", folded):
        return False
    if month is None:
        return True
    mo = int(month)
    names = [name for name, number in MONTHS.items() if number == mo]
    written = any(re.search(rf"\b{name}\b", folded) for name in names)
    numeric = re.search(rf"(?<!\d)0?{mo}[/.-]", folded) or re.search(rf"{year}-0?{mo}(?!\d)", folded)
    if not (written or numeric):
        return False
    if day is None:
        return True
    d = int(day)
    return bool(re.search(rf"(?<!\d)0?{d}(?:st|nd|rd|th)?(?!\d)", folded))
