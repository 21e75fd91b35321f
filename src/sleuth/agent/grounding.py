"""The field check of a shaped answer (spec/runtime.md §8.5): every string and number leaf of the JSON
document must occur in the evidence it cites, numbers compared in one canonical form ("48.20",
"$48.2" and "48.2" are one number).
"""

from __future__ import annotations

import math
import re
import unicodedata
from collections.abc import Mapping
from decimal import Decimal, InvalidOperation

from sleuth.agent.shape import is_leaf, is_number, resolve_pointer
from sleuth.format.text import folded

MAX_GROUNDED_STRING = 200  # longer string leaves are kept without the field check
_SEP = "[,\u00a0\u202f\u2009]"  # thousands separators: comma, no-break and thin spaces
_NUMBER_TEXT_RE = re.compile(rf"[+\-\u2212]?(?:[0-9]{{1,3}}(?:{_SEP}[0-9]{{3}})+|[0-9]+)?(?:\.[0-9]+)?\Z")
_NUMBER_IN_TEXT_RE = re.compile(
    rf"(?<![0-9.])(?:(?:[0-9]{{1,3}}(?:{_SEP}[0-9]{{3}})+(?![0-9])|[0-9]+)(?:\.[0-9]+)?|\.[0-9]+)"
)
_SEP_RE = re.compile(_SEP)


def _canonical(number: Decimal) -> str | None:
    if not number.is_finite():
        return None
    text = format(number, "f")
    if "." in text:
        text = text.rstrip("0").rstrip(".")
    if text in ("-0", "", "-"):
        return "0"
    return text


def normalize_number(value: object) -> str | None:
    """A canonical decimal string (`"$48.20"` → `"48.2"`, `"1,200"` → `"1200"`, `0.50` → `"0.5"`), or
    None for anything that is not exactly one number; lets a value match however the source writes it."""
    if is_number(value):
        if isinstance(value, float) and not math.isfinite(value):
            return None
        return _canonical(Decimal(repr(value)) if isinstance(value, float) else Decimal(int(value)))
    if isinstance(value, Decimal):
        return _canonical(value)
    if not isinstance(value, str):
        return None
    text = "".join(ch for ch in value if unicodedata.category(ch) != "Sc").strip()
    if not _NUMBER_TEXT_RE.match(text) or not any(ch.isdigit() for ch in text):
        return None
    text = _SEP_RE.sub("", text).replace("\u2212", "-")
    try:
        return _canonical(Decimal(text))
    except InvalidOperation:
        return None


def _number_occurs(canonical: str, text: str) -> bool:
    target = canonical.lstrip("-")  # the sign is usually in words: "a loss of $5m", "down 3%"
    for match in _NUMBER_IN_TEXT_RE.finditer(unicodedata.normalize("NFC", text)):
        found = normalize_number(match.group(0))
        if found is not None and found.lstrip("-") == target:
            return True
    return False


def value_occurs(value: object, text: str) -> bool:
    """Whether a leaf value appears in `text`: strings as case-insensitive substrings after NFC and
    whitespace collapsing, numbers as any number token of the same value. Booleans, null and strings
    over 200 chars are not checkable and always pass."""
    if value is None or isinstance(value, bool):
        return True
    if isinstance(value, str):
        if len(value) > MAX_GROUNDED_STRING:
            return True
        if folded(value) in folded(text):
            return True
        canonical = normalize_number(value)  # "48.20" as a string still matches "$48.2"
        return canonical is not None and _number_occurs(canonical, text)
    if is_number(value):
        canonical = normalize_number(value)
        return canonical is not None and _number_occurs(canonical, text)
    return True


def check_grounding(
    data: object,
    grounding: dict[str, list[int]],
    cited_texts: Mapping[int, str],
    computed: str,
) -> tuple[dict[str, list[int]], list[str]]:
    """Apply spec/runtime.md §8.5 to a (renumbered) grounding map.

    Pointers that do not name a leaf of `data` are dropped silently; citation numbers without a text
    are dropped. A checkable leaf (string ≤ 200 chars, number) whose value occurs neither in one of its
    cited texts nor in `computed` loses its entry and is returned in the ungrounded list (the trace's
    `ungrounded_fields`); so does an entry left without any citation.
    """
    kept: dict[str, list[int]] = {}
    ungrounded: list[str] = []
    for pointer, numbers in grounding.items():
        found, value = resolve_pointer(data, pointer)
        if not found or not is_leaf(value) or pointer == "":
            continue
        listed = numbers if isinstance(numbers, list) else []
        cited = list(
            dict.fromkeys(
                n for n in listed if isinstance(n, int) and not isinstance(n, bool) and n in cited_texts
            )
        )
        if not cited:
            ungrounded.append(pointer)
            continue
        checkable = (isinstance(value, str) and len(value) <= MAX_GROUNDED_STRING) or is_number(value)
        if checkable and not (
            any(value_occurs(value, cited_texts[n]) for n in cited) or value_occurs(value, computed)
        ):
            ungrounded.append(pointer)
            continue
        kept[pointer] = cited
    return kept, ungrounded
