"""How the body of `POST /query` (spec/api.md §8.1, `server/admission.py` `QueryRequest`) is read: parsed
in the documented order (unknown fields, extensions, types and ranges, values, option conflicts), each
problem a `400` naming its field.
"""

from __future__ import annotations

import json
from typing import Any, Literal, TypeVar

from fastapi import Request
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from sleuth.agent.request import INT_BOUNDS
from sleuth.api.errors import ApiError
from sleuth.api.versioning import require_unstable
from sleuth.format.problems import sentence
from sleuth.server.admission import QueryRequest

EXTENSION_FIELDS = ("max_tool_output_chars",)  # request fields accepted only under `unstable`


class FeedbackRequest(BaseModel):
    """The body of `POST /queries/{id}/feedback` (spec/api.md §10.3)."""

    model_config = ConfigDict(extra="forbid", strict=True)

    rating: Literal["up", "down"]
    comment: str | None = Field(None, max_length=2_000)


def _body_schema(model: type[BaseModel]) -> dict[str, Any]:
    """The OpenAPI request body of a route that parses its own JSON (so the order of checks is ours)."""
    return {
        "requestBody": {
            "required": True,
            "content": {
                "application/json": {"schema": model.model_json_schema(ref_template="#/$defs/{model}")}
            },
        }
    }


# ---------------------------------------------------------------------------------- request parsing
def _shown(value: Any) -> str:
    text = json.dumps(value, ensure_ascii=False)
    return text if len(text) <= 60 else text[:57] + "..."


def _invalid(field: str, message: str) -> ApiError:
    return ApiError(400, "invalid_request", message, field=field)


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def _storable(value: Any) -> bool:
    """No lone surrogates (`"\\ud800"` parses, but cannot be stored as UTF-8) at any depth."""
    if isinstance(value, str):
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            return False
        return True
    if isinstance(value, dict):
        return all(_storable(k) and _storable(v) for k, v in value.items())
    if isinstance(value, list):
        return all(_storable(v) for v in value)
    return True


async def _json_object(request: Request) -> dict[str, Any]:
    """The body as a JSON object, or `400 invalid_request` (field `body`, or the field that holds text
    that is not valid Unicode). `NaN` and `Infinity` are not JSON and are refused too."""
    raw = await request.body()
    try:
        data = json.loads(raw, parse_constant=_no_constant)
    except (UnicodeDecodeError, ValueError):  # JSONDecodeError is a ValueError
        raise _invalid("body", "malformed JSON body") from None
    except RecursionError:
        raise _invalid("body", "the JSON body is nested too deeply") from None
    if not isinstance(data, dict):
        raise _invalid("body", "the body must be a JSON object")
    for name, value in data.items():
        try:
            storable = _storable(name) and _storable(value)
        except RecursionError:
            raise _invalid(name, f"{name} is nested too deeply") from None
        if not storable:
            field = name if _storable(name) else "body"
            raise _invalid(field, f"{field} holds text that is not valid Unicode (a lone surrogate)")
    return data


def _unknown_fields(data: dict[str, Any], model: type[BaseModel]) -> None:
    for name in data:
        if name not in model.model_fields:
            raise _invalid(name, f"unknown field {name!r}")


M = TypeVar("M", bound=BaseModel)


def validated_body(data: dict[str, Any], model: type[M]) -> M:
    """`model` from `data`, the first problem as `400 invalid_request` naming its field."""
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        loc = first.get("loc", ())
        name = str(loc[0]) if loc else "body"
        if name in INT_BOUNDS:
            low, high = INT_BOUNDS[name]
            message = f"{name} must be an integer from {low} to {high}; got {_shown(data.get(name))}"
        elif name == "scope" and first.get("type") == "too_short":
            message = "scope needs at least one context to answer from (its slug)"
        else:  # the field and what it needs, never the validator's wording (format.problems)
            message = sentence(first)
        raise _invalid(name, message) from None


def parse_query_request(request: Request, data: dict[str, Any]) -> QueryRequest:
    """Unknown fields → extensions → types and ranges → values → option conflicts (spec/api.md §8.1)."""
    _unknown_fields(data, QueryRequest)
    for name in EXTENSION_FIELDS:
        if name in data:
            require_unstable(request, name)
    body = validated_body(data, QueryRequest)
    problem = body.value_problem()
    if problem is not None:
        raise _invalid(*problem)
    if body.stream and body.background:
        raise ApiError(400, "conflicting_options", "stream and background exclude each other", field="stream")
    conflict = body.conflict()
    if conflict is not None:
        raise ApiError(400, "conflicting_options", conflict[1], field=conflict[0])
    return body
