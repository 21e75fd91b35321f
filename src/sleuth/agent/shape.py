"""Structured output: the `shape` subset, validation, JSON extraction, per-field grounding and the
offline planner's filler (spec/api.md §8.3, spec/runtime.md §8.5 and §10.3).

Everything here is pure (no I/O, no model calls) so the HTTP layer, synthesis and the offline planner
can share one definition of what a shape may say and what a grounded field is.
"""

from __future__ import annotations

import datetime as _dt
import json
import math
import re
import urllib.parse
from collections.abc import Iterable, Iterator
from typing import Any, TypeGuard

from jsonschema import Draft202012Validator, FormatChecker

from sleuth.errors import Invalid

__all__ = [
    "FORMAT_CHECKER",
    "MAX_DEPTH",
    "MAX_ERRORS",
    "MAX_PROPERTIES",
    "MAX_SHAPE_BYTES",
    "ShapeError",
    "check_shape",
    "extract_json_object",
    "is_leaf",
    "is_number",
    "leaf_pointers",
    "make_pointer",
    "resolve_pointer",
    "validate",
]

MAX_DEPTH = 8  # schema levels through `properties`/`items`, the root counting as level 1
MAX_PROPERTIES = 200  # entries of every `properties` map, added up over the whole shape
MAX_SHAPE_BYTES = 32 * 1024  # compact UTF-8 JSON serialization
MAX_ERRORS = 20  # validation errors reported (to the model for repair, and in the failure message)
_MAX_SCHEMA_NESTING = 64  # hard recursion guard for anyOf-inside-anyOf chains (depth ignores anyOf)
_MAX_VALUE_NESTING = 32  # const/enum/default values; jsonschema compares them recursively
_MAX_MESSAGE_CHARS = 200  # one validation message; jsonschema quotes whole instances
_MAX_JSON_ATTEMPTS = 1000  # '{' positions tried by extract_json_object

_TYPES = frozenset({"object", "array", "string", "number", "integer", "boolean", "null"})
_FORMATS = frozenset({"date", "date-time", "uri", "email"})
_SCHEMA_KEYWORDS = frozenset(
    {
        "type",
        "properties",
        "required",
        "items",
        "additionalProperties",
        "enum",
        "const",
        "description",
        "title",
        "minItems",
        "maxItems",
        "minimum",
        "maximum",
        "minLength",
        "maxLength",
        "pattern",
        "format",
        "anyOf",
        "default",
    }
)
_COUNT_KEYWORDS = ("minItems", "maxItems", "minLength", "maxLength")
_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")


class ShapeError(Invalid, ValueError):
    """A shape outside the supported subset (→ `400 invalid_shape`); names the keyword and its path."""

    def __init__(self, keyword: str, path: str, message: str | None = None) -> None:
        self.keyword = keyword
        self.path = path
        super().__init__(message or f"unsupported keyword '{keyword}' at {path}")


# --------------------------------------------------------------------------------------------------
# The subset (spec/api.md §8.3)
# --------------------------------------------------------------------------------------------------


def check_shape(shape: object) -> None:
    """Raise `ShapeError` unless `shape` is an object schema within the documented subset and limits.

    Checked before a turn starts so a bad shape is a `400`, never a failed turn after spending a model.
    """
    if not isinstance(shape, dict):
        raise ShapeError("type", "$", "invalid shape at $: the root must be a JSON object schema")
    if shape.get("type") != "object":
        raise ShapeError("type", "$", "invalid keyword 'type' at $: the root must have type \"object\"")
    try:
        size = len(json.dumps(shape, separators=(",", ":"), ensure_ascii=False, allow_nan=False).encode())
    except (TypeError, ValueError, RecursionError) as exc:
        raise ShapeError("shape", "$", "invalid shape at $: not serializable as JSON") from exc
    if size > MAX_SHAPE_BYTES:
        raise ShapeError(
            "shape", "$", f"shape is {size} bytes at $; the limit is {MAX_SHAPE_BYTES} (keyword 'shape')"
        )
    _ShapeChecker().check(shape, "$", depth=1, nesting=1)


class _ShapeChecker:
    """One walk over a shape; carries the running property count."""

    def __init__(self) -> None:
        self.properties = 0

    def check(self, schema: object, path: str, depth: int, nesting: int) -> None:
        if not isinstance(schema, dict):
            raise ShapeError("schema", path, f"invalid schema at {path}: expected a JSON object")
        if nesting > _MAX_SCHEMA_NESTING:
            raise ShapeError("anyOf", path, f"anyOf nested too deeply at {path} (keyword 'anyOf')")
        for keyword in schema:
            if keyword not in _SCHEMA_KEYWORDS:
                raise ShapeError(str(keyword), path)
        for keyword, value in schema.items():
            self._check_keyword(keyword, value, path, depth, nesting)

    def _check_keyword(self, keyword: str, value: object, path: str, depth: int, nesting: int) -> None:
        def bad(reason: str) -> ShapeError:
            return ShapeError(keyword, path, f"invalid value for keyword '{keyword}' at {path}: {reason}")

        if keyword == "type":
            names = value if isinstance(value, list) else [value]
            if not names or not all(isinstance(n, str) and n in _TYPES for n in names):
                raise bad(f"must be one of {', '.join(sorted(_TYPES))} or a non-empty list of them")
            if len(set(names)) != len(names):
                raise bad("type names must be unique")
        elif keyword == "properties":
            if not isinstance(value, dict):
                raise bad("must be an object mapping names to schemas")
            self.properties += len(value)
            if self.properties > MAX_PROPERTIES:
                raise ShapeError(
                    keyword,
                    path,
                    f"shape has more than {MAX_PROPERTIES} properties in total at {path} "
                    "(keyword 'properties')",
                )
            for name, sub in value.items():
                self._child(sub, f"{path}.properties{_path_part(name)}", keyword, depth, nesting)
        elif keyword == "items":
            if not isinstance(value, dict):
                raise bad("must be a single schema object")
            self._child(value, f"{path}.items", keyword, depth, nesting)
        elif keyword == "anyOf":
            if not isinstance(value, list) or not value:
                raise bad("must be a non-empty list of schemas")
            for i, sub in enumerate(value):
                self.check(sub, f"{path}.anyOf[{i}]", depth, nesting + 1)  # alternatives, not nesting
        elif keyword == "required":
            if not isinstance(value, list) or not all(isinstance(n, str) for n in value):
                raise bad("must be a list of strings")
            if len(set(value)) != len(value):
                raise bad("names must be unique")
        elif keyword == "additionalProperties":
            if not isinstance(value, bool):
                raise bad("only true or false is supported")
        elif keyword == "enum":
            if not isinstance(value, list) or not value:
                raise bad("must be a non-empty list")
        elif keyword in ("description", "title"):
            if not isinstance(value, str):
                raise bad("must be a string")
        elif keyword in _COUNT_KEYWORDS:
            if not isinstance(value, int) or isinstance(value, bool) or value < 0:
                raise bad("must be a non-negative integer")
        elif keyword in ("minimum", "maximum"):
            if not is_number(value) or not math.isfinite(value):
                raise bad("must be a finite number")
        elif keyword == "pattern":
            if not isinstance(value, str):
                raise bad("must be a string")
            try:
                re.compile(value)
            except (re.error, OverflowError, RecursionError) as exc:
                raise bad(f"does not compile ({exc})") from exc
        elif keyword == "format" and (not isinstance(value, str) or value not in _FORMATS):
            raise bad(f"must be one of {', '.join(sorted(_FORMATS))}")
        # const and default take any JSON value (default is ignored), but none nested absurdly deep.
        if keyword in ("const", "enum", "default") and _json_depth(value) > _MAX_VALUE_NESTING:
            raise bad(f"value nested deeper than {_MAX_VALUE_NESTING} levels")

    def _child(self, sub: object, path: str, keyword: str, depth: int, nesting: int) -> None:
        if depth + 1 > MAX_DEPTH:
            raise ShapeError(
                keyword, path, f"shape is deeper than {MAX_DEPTH} levels at {path} (keyword '{keyword}')"
            )
        self.check(sub, path, depth + 1, nesting + 1)


def is_number(value: object) -> TypeGuard[int | float]:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _json_depth(value: object) -> int:
    """Nesting of a JSON value, computed without recursion (values are only bounded by the size)."""
    deepest = 0
    stack: list[tuple[object, int]] = [(value, 1)]
    while stack:
        item, level = stack.pop()
        deepest = max(deepest, level)
        if isinstance(item, dict):
            stack.extend((v, level + 1) for v in item.values())
        elif isinstance(item, list):
            stack.extend((v, level + 1) for v in item)
    return deepest


def _path_part(name: str) -> str:
    """`.name` for identifier-like names, `["odd name"]` otherwise, so paths stay unambiguous."""
    return f".{name}" if _IDENT.match(name) else f"[{json.dumps(name, ensure_ascii=False)}]"


# --------------------------------------------------------------------------------------------------
# Validation
# --------------------------------------------------------------------------------------------------

FORMAT_CHECKER = FormatChecker(formats=())

_DATE_RE = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}\Z")
_DATE_TIME_RE = re.compile(
    r"[0-9]{4}-[0-9]{2}-[0-9]{2}[Tt ][0-9]{2}:[0-9]{2}:[0-9]{2}(?:\.[0-9]+)?(?:[Zz]|[+-][0-9]{2}:[0-9]{2})\Z"
)
_SCHEME_RE = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*\Z")
_EMAIL_RE = re.compile(r"[^@\s]+@[^@\s.]+(?:\.[^@\s.]+)+\Z")


@FORMAT_CHECKER.checks("date")
def _is_date(value: object) -> bool:
    """RFC 3339 full-date; `fromisoformat` alone would also take `20240101` and week dates."""
    if not isinstance(value, str):
        return True
    if not _DATE_RE.match(value):
        return False
    try:
        _dt.date.fromisoformat(value)
    except ValueError:
        return False
    return True


@FORMAT_CHECKER.checks("date-time")
def _is_date_time(value: object) -> bool:
    """RFC 3339 date-time: a date, a time with seconds and a UTC offset (`Z` accepted)."""
    if not isinstance(value, str):
        return True
    if not _DATE_TIME_RE.match(value):
        return False
    text = value[:-1] + "+00:00" if value[-1] in "Zz" else value
    try:
        _dt.datetime.fromisoformat(text)
    except ValueError:
        return False
    return True


@FORMAT_CHECKER.checks("uri")
def _is_uri(value: object) -> bool:
    """An absolute URI: a scheme and either an authority (`https://host/…`) or an opaque part."""
    if not isinstance(value, str):
        return True
    if not value or any(ch.isspace() or ord(ch) < 0x20 for ch in value):
        return False
    try:
        parts = urllib.parse.urlsplit(value)
    except ValueError:
        return False
    if not parts.scheme or not _SCHEME_RE.match(parts.scheme):
        return False
    if value[len(parts.scheme) + 1 :].startswith("//"):
        return bool(parts.netloc)
    return bool(parts.path or parts.query or parts.fragment)


@FORMAT_CHECKER.checks("email")
def _is_email(value: object) -> bool:
    """`local@domain.tld`, no whitespace; deliberately simple, like most mail forms."""
    if not isinstance(value, str):
        return True
    return bool(_EMAIL_RE.match(value))


def validate(data: object, shape: dict[str, Any]) -> list[str]:
    """Validation errors of `data` against a checked shape, as `"/pointer: message"` lines.

    Deterministic (sorted by location, then message) and capped, because the lines are sent back to
    the model for repair and end up in the turn's error message.
    """
    validator = Draft202012Validator(shape, format_checker=FORMAT_CHECKER)
    found: set[tuple[tuple[tuple[int, int, str], ...], str, str]] = set()
    for error in validator.iter_errors(data):
        parts = list(error.absolute_path)
        pointer = make_pointer(parts) or "/"
        message = error.message
        if len(message) > _MAX_MESSAGE_CHARS:
            message = message[: _MAX_MESSAGE_CHARS - 1] + "…"
        key = tuple((0, p, "") if isinstance(p, int) else (1, 0, str(p)) for p in parts)
        found.add((key, message, pointer))
    ordered = sorted(found)
    return [f"{pointer}: {message}" for _, message, pointer in ordered[:MAX_ERRORS]]


# --------------------------------------------------------------------------------------------------
# JSON in model replies
# --------------------------------------------------------------------------------------------------

_FENCE_RE = re.compile(r"```[ \t]*(?:json|JSON|json5)?[ \t]*\r?\n?(.*?)```", re.DOTALL)


def _reject_constant(name: str) -> object:
    raise ValueError(f"{name} is not JSON")


_DECODER = json.JSONDecoder(parse_constant=_reject_constant)


def extract_json_object(text: str) -> dict[str, Any] | None:
    """The first JSON object in a model reply, or None.

    Providers without a JSON mode wrap the object in prose or a ```json fence; fenced blocks are
    preferred, then the text is scanned from each `{`. An object cut off at the end of the reply ends
    the scan, so a truncated envelope is never mistaken for one of its inner objects.
    """
    for match in _FENCE_RE.finditer(text):
        found = _scan(match.group(1))
        if found is not None:
            return found
    return _scan(text)


def _scan(text: str) -> dict[str, Any] | None:
    end = len(text.rstrip().rstrip("`").rstrip())
    start = text.find("{")
    attempts = 0
    while start != -1 and attempts < _MAX_JSON_ATTEMPTS:
        attempts += 1
        try:
            value, _ = _DECODER.raw_decode(text, start)
        except json.JSONDecodeError as exc:
            if exc.pos >= end or exc.msg.startswith("Unterminated string"):
                return None  # truncated: every later '{' lies inside this object
        except (ValueError, RecursionError):
            pass
        else:
            if isinstance(value, dict):
                return value
        start = text.find("{", start + 1)
    return None


# --------------------------------------------------------------------------------------------------
# JSON Pointers (RFC 6901)
# --------------------------------------------------------------------------------------------------


def make_pointer(parts: Iterable[str | int]) -> str:
    """The JSON Pointer of a path (`""` for the root), escaping `~` as `~0` and `/` as `~1`."""
    return "".join("/" + str(p).replace("~", "~0").replace("/", "~1") for p in parts)


def is_leaf(value: object) -> bool:
    return not isinstance(value, dict | list) or not value


def _leaves(data: object, parts: list[str | int]) -> Iterator[str]:
    if isinstance(data, dict) and data:
        for key, value in data.items():
            yield from _leaves(value, [*parts, str(key)])
    elif isinstance(data, list) and data:
        for i, value in enumerate(data):
            yield from _leaves(value, [*parts, i])
    else:
        yield make_pointer(parts)


def leaf_pointers(data: object) -> list[str]:
    """Pointers of every leaf (scalar, empty list or empty object) in document order: what grounding
    entries may name."""
    return list(_leaves(data, []))


_INDEX_RE = re.compile(r"(?:0|[1-9][0-9]*)\Z")


def resolve_pointer(data: object, pointer: str) -> tuple[bool, object]:
    """`(True, value)` when the pointer names a value in `data`, else `(False, None)`; never raises,
    because pointers come from model output."""
    if pointer == "":
        return True, data
    if not pointer.startswith("/"):
        return False, None
    current = data
    for raw in pointer[1:].split("/"):
        if re.search(r"~(?![01])", raw):
            return False, None
        token = raw.replace("~1", "/").replace("~0", "~")
        if isinstance(current, dict):
            if token not in current:
                return False, None
            current = current[token]
        elif isinstance(current, list):
            if not _INDEX_RE.match(token) or int(token) >= len(current):
                return False, None
            current = current[int(token)]
        else:
            return False, None
    return True, current


# --------------------------------------------------------------------------------------------------
# The field check (spec/runtime.md §8.5)
# --------------------------------------------------------------------------------------------------


# --------------------------------------------------------------------------------------------------
# The offline planner's filler (spec/runtime.md §10.3)
# --------------------------------------------------------------------------------------------------
