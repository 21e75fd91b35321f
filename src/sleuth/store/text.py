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
