"""What a task stores is bounded whatever its job returns (`bound_output`): every string is cut to
`MAX_OUTPUT_CHARS`, every list and mapping below the top level to `MAX_OUTPUT_ITEMS` entries, and the
whole JSON to `MAX_OUTPUT_BYTES` (lists are cut further until it fits); a cut output says
`truncated: true`. A task's error is cut to `MAX_OUTPUT_CHARS` too (`bound_error`).

The task store bounds what it writes; the API bounds a listing's outputs further with the same rule.
"""

from __future__ import annotations

from typing import Any

from sleuth.store.database import dumps

MAX_OUTPUT_CHARS = 2000
MAX_OUTPUT_ITEMS = 1000
MAX_OUTPUT_BYTES = 256 * 1024
_MIN_ITEMS, _MIN_CHARS = 1, 64
_MIN_MAPPING = 32  # a mapping keeps this many entries while lists are cut further (`counts` stay whole)


def _cut(value: Any, items: int, chars: int, top: bool = True) -> tuple[Any, bool]:
    """`value` with strings cut to `chars`, lists to `items` entries and mappings below the top to
    `items` (at least `_MIN_MAPPING`); and whether anything was cut."""
    if isinstance(value, str):
        return (value, False) if len(value) <= chars else (value[:chars] + "…", True)
    if isinstance(value, dict):
        entries = list(value.items())
        keep = len(entries) if top else max(items, _MIN_MAPPING)
        cut = len(entries) > keep
        out: dict[str, Any] = {}
        for key, item in entries[:keep]:
            name, cut_key = _cut(str(key), items, chars, top=False)
            out[name], cut_item = _cut(item, items, chars, top=False)
            cut = cut or cut_key or cut_item
        return out, cut
    if isinstance(value, list | tuple):
        cut = len(value) > items
        kept = []
        for item in value[:items]:
            bounded, cut_item = _cut(item, items, chars, top=False)
            kept.append(bounded)
            cut = cut or cut_item
        return kept, cut
    return value, False


def bound_output(value: Any, max_bytes: int = MAX_OUTPUT_BYTES) -> Any:
    """A task output that fits in `max_bytes` of JSON: cut as the module says, then with ever fewer
    list entries and shorter strings until it fits; past that, only a few of its scalar top-level
    fields (None for a list). A cut mapping gets `truncated: true`."""
    if value is None:
        return None
    items, chars = MAX_OUTPUT_ITEMS, MAX_OUTPUT_CHARS
    while True:
        bounded, cut = _cut(value, items, chars)
        if len(dumps(bounded).encode("utf-8")) <= max_bytes:
            break
        cut = True
        if items == _MIN_ITEMS and chars == _MIN_CHARS:  # still too big: a few scalar fields only
            if not isinstance(bounded, dict):
                return None
            scalars = [(k, v) for k, v in bounded.items() if not isinstance(v, dict | list)]
            bounded = {k[:_MIN_CHARS]: v for k, v in scalars[:_MIN_MAPPING]}
            break
        items, chars = max(_MIN_ITEMS, items // 4), max(_MIN_CHARS, chars // 2)
    if cut and isinstance(bounded, dict):
        bounded["truncated"] = True
    return bounded


def bound_error(error: str | None) -> str | None:
    return error if error is None or len(error) <= MAX_OUTPUT_CHARS else error[:MAX_OUTPUT_CHARS] + "…"
