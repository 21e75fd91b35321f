"""A validation error as one sentence a person reads: the field and what it needs, never the validator's
wording ("String should have at most 20000 characters") or its documentation URL.

The CLI, the API's error envelope and the console (which shows the envelope's message) all say it this
way (issue 26, item 4).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from pydantic import ValidationError

#: Where a value came from (FastAPI's first `loc` part), not its name.
_ORIGINS = ("body", "query", "path", "header", "cookie")


def field_of(loc: Sequence[Any]) -> str:
    """`("body", "scope", 0)` → `scope[0]`; an empty location is the whole request."""
    parts = list(loc)
    if parts and parts[0] in _ORIGINS:
        parts = parts[1:]
    out = ""
    for part in parts:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out or "the request"


def sentence(error: Mapping[str, Any]) -> str:
    """One pydantic error (`ValidationError.errors()` item) as a sentence that names its field."""
    field = field_of(error.get("loc", ()))
    kind = str(error.get("type", ""))
    ctx = error.get("ctx") or {}
    limits = {
        "string_too_long": f"{field} is too long: at most {_count(ctx.get('max_length'), 'character')}",
        "string_too_short": (
            f"{field} must not be empty"
            if ctx.get("min_length") == 1
            else f"{field} is too short: at least {_count(ctx.get('min_length'), 'character')}"
        ),
        "too_long": f"{field} has too many items: at most {ctx.get('max_length')}",
        "too_short": f"{field} needs at least {_count(ctx.get('min_length'), 'item')}",
        "greater_than_equal": f"{field} must be at least {ctx.get('ge')}",
        "less_than_equal": f"{field} must be at most {ctx.get('le')}",
        "greater_than": f"{field} must be more than {ctx.get('gt')}",
        "less_than": f"{field} must be less than {ctx.get('lt')}",
        "missing": f"{field} is required",
        "extra_forbidden": f"unknown field {field!r}",
        "json_invalid": "malformed JSON body",
        "literal_error": f"{field} must be one of {ctx.get('expected')}",
        "enum": f"{field} must be one of {ctx.get('expected')}",
        "string_type": f"{field} must be text (a string)",
        "bool_type": f"{field} must be true or false",
        "bool_parsing": f"{field} must be true or false",
        "int_type": f"{field} must be a whole number",
        "int_parsing": f"{field} must be a whole number",
        "int_from_float": f"{field} must be a whole number",
        "float_type": f"{field} must be a number",
        "float_parsing": f"{field} must be a number",
        "list_type": f"{field} must be a list",
        "dict_type": f"{field} must be an object",
        "model_type": f"{field} must be an object",
    }
    if kind in limits:
        return limits[kind]
    message = str(error.get("msg") or "invalid value")
    message = message.removeprefix("Value error, ").removeprefix("Assertion failed, ")
    return f"{field}: {message[:1].lower()}{message[1:]}"


def _count(n: object, noun: str) -> str:
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"


def first_problem(exc: ValidationError) -> str:
    """The first error of `exc` as a sentence; the number of others, if any."""
    errors = exc.errors(include_url=False)
    if not errors:
        return "the request is not valid"
    more = f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""
    return sentence(errors[0]) + more
