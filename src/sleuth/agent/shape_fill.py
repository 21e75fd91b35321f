"""The offline planner's filler (spec/runtime.md §10.3): a `shape` filled from what its count or list
step computed, without a model; a field it cannot fill fails the turn with `OfflineShapeError`.
"""

from __future__ import annotations

import copy
from collections.abc import Iterator
from typing import Any

from jsonschema import Draft202012Validator

from sleuth.agent.shape import FORMAT_CHECKER, make_pointer
from sleuth.errors import Failed


class OfflineShapeError(Failed, ValueError):
    """The offline planner cannot fill a required field; the turn fails and asks for a model."""

    def __init__(self, pointer: str) -> None:
        self.pointer = pointer
        shown = pointer or "/"
        super().__init__(f"the offline planner cannot fill field {shown} of this shape; configure a model")


class _Unfillable(Exception):
    def __init__(self, pointer: str) -> None:
        super().__init__(pointer)
        self.pointer = pointer


def _types(schema: dict[str, Any]) -> list[str] | None:
    value = schema.get("type")
    if value is None:
        return None
    return list(value) if isinstance(value, list) else [value]


def _implied_types(schema: dict[str, Any]) -> list[str]:
    """What an untyped schema describes: an object if it has properties, an array if it has items,
    otherwise a plain leaf that takes the answer text."""
    if "properties" in schema or "required" in schema:
        return ["object"]
    if "items" in schema:
        return ["array"]
    return ["string"]


def _numeric_capable(schema: dict[str, Any]) -> bool:
    types = _types(schema) or []
    if "integer" in types or "number" in types:
        return True
    return any(isinstance(b, dict) and _numeric_capable(b) for b in schema.get("anyOf") or [])


def _numeric_leaves(schema: dict[str, Any], parts: list[str]) -> Iterator[str]:
    """Numeric fields reachable through object properties (array items cannot take one count)."""
    branches = [schema, *(b for b in schema.get("anyOf") or [] if isinstance(b, dict))]
    seen: set[str] = set()
    for branch in branches:
        for name, sub in (branch.get("properties") or {}).items():
            if name in seen or not isinstance(sub, dict):
                continue
            seen.add(name)
            if _numeric_capable(sub):
                yield make_pointer([*parts, name])
            else:
                yield from _numeric_leaves(sub, [*parts, name])


class _Filler:
    def __init__(
        self, answer_text: str, count: int | None, items: list[str] | None, count_at: str | None
    ) -> None:
        self.answer_text = answer_text
        self.count = count
        self.items = items
        self.count_at = count_at

    @staticmethod
    def _valid(value: object, schema: dict[str, Any]) -> bool:
        return Draft202012Validator(schema, format_checker=FORMAT_CHECKER).is_valid(value)

    def fill(self, schema: dict[str, Any], pointer: str) -> object:
        if "const" in schema:
            return copy.deepcopy(schema["const"])
        branches = schema.get("anyOf")
        if isinstance(branches, list) and branches:
            base = {k: v for k, v in schema.items() if k != "anyOf"}
            first: _Unfillable | None = None
            for branch in branches:
                try:
                    value = self.fill({**base, **branch}, pointer)
                except _Unfillable as exc:
                    first = first or exc
                    continue
                if self._valid(value, schema):
                    return value
            raise first or _Unfillable(pointer)
        types = _types(schema) or _implied_types(schema)
        deeper: _Unfillable | None = None
        candidates: list[object] = []
        if "object" in types:
            try:
                candidates.append(self.fill_object(schema, pointer))
            except _Unfillable as exc:
                deeper = exc
        if "array" in types and self.items is not None:
            candidates.append(list(self.items))
        if ("integer" in types or "number" in types) and pointer == self.count_at and self.count is not None:
            candidates.append(self.count)
        if "string" in types:
            candidates.append(self.answer_text)
        if "null" in types:
            candidates.append(None)
        for candidate in candidates:
            if self._valid(candidate, schema):
                return candidate
        raise deeper or _Unfillable(pointer)

    def fill_object(self, schema: dict[str, Any], pointer: str) -> dict[str, Any]:
        properties = schema.get("properties") or {}
        required = set(schema.get("required") or [])
        result: dict[str, Any] = {}
        for name, sub in properties.items():
            child = f"{pointer}{make_pointer([name])}"
            try:
                value = self.fill(sub, child)
            except _Unfillable:
                if name in required:
                    raise
                continue
            if name not in required and isinstance(value, dict) and not value:
                continue  # an optional object with nothing in it says nothing
            result[name] = value
        missing = sorted(required - set(properties))
        if missing:  # required but never described: nothing says what it should hold
            raise _Unfillable(f"{pointer}{make_pointer([missing[0]])}")
        return result


def offline_fill(
    shape: dict[str, Any], answer_text: str, count: int | None, items: list[str] | None
) -> dict[str, Any]:
    """The offline planner's structured output: string leaves take the answer text, the shape's only
    numeric field takes the computed count, string arrays take the list items; optional fields that
    cannot be filled are omitted, a required one raises `OfflineShapeError` (spec/runtime.md §10.3)."""
    numeric = list(_numeric_leaves(shape, []))
    filler = _Filler(answer_text, count, items, numeric[0] if len(numeric) == 1 else None)
    try:
        return filler.fill_object(shape, "")
    except _Unfillable as exc:
        raise OfflineShapeError(exc.pointer) from None
