"""Text that can always be stored: Python strings may hold lone surrogates (`"\\ud800"`, from a JSON
escape or model code), which UTF-8, SQLite and gzip'd JSON lines cannot. Everything Sleuth writes goes
through `clean_text` (or `clean` for nested values) first, so one bad character never wedges a write."""

from __future__ import annotations

import re
from typing import Any

_SURROGATE = re.compile("[\ud800-\udfff]")


def clean_text(text: str) -> str:
    """`text` with every lone surrogate replaced by U+FFFD: always encodable as UTF-8."""
    return _SURROGATE.sub("\ufffd", text) if _SURROGATE.search(text) else text


def clean(value: Any) -> Any:
    """`value` with `clean_text` applied to every string in it, keys included."""
    if isinstance(value, str):
        return clean_text(value)
    if isinstance(value, list | tuple):
        return [clean(v) for v in value]
    if isinstance(value, dict):
        return {clean_text(str(k)): clean(v) for k, v in value.items()}
    return value


_WORD = re.compile(r"[a-z0-9]+")


def stem(word: str) -> str:
    """Lower-case and strip a plural ending, so "products" meets `product` and "flows" meets "flow".
    Deliberately light: it must agree with itself, not with a linguist."""
    word = word.lower()
    if len(word) <= 3 or word.isdigit():
        return word
    if word.endswith("ies") and len(word) > 4:
        return word[:-3] + "y"
    if word.endswith(("sses", "xes", "zes", "ches", "shes")):
        return word[:-2]
    if word.endswith("s") and not word.endswith(("ss", "us", "is")):
        return word[:-1]
    return word


def words(text: str) -> list[str]:
    """Lower-cased alphanumeric words, in order (underscores and hyphens split words)."""
    return _WORD.findall(text.lower())
