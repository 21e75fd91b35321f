"""Validation errors as one sentence a person reads (issue 26, item 4): the CLI, the API's envelope
(and so the console) and MCP say a refused field this way, never with the validator's wording or URL."""

from __future__ import annotations

import pytest
from pydantic import BaseModel, Field, ValidationError

from sleuth.format.problems import field_of, first_problem


class Request(BaseModel, extra="forbid"):
    ask: str = Field(min_length=1, max_length=20)
    scope: list[str] = Field(min_length=1, max_length=2)
    steps: int = Field(1, ge=1, le=8)


@pytest.mark.parametrize(
    ("data", "sentence"),
    [
        ({"ask": "", "scope": ["a"]}, "ask must not be empty"),
        ({"ask": "x" * 21, "scope": ["a"]}, "ask is too long: at most 20 characters"),
        ({"ask": "q", "scope": []}, "scope needs at least 1 item"),
        ({"ask": "q", "scope": ["a", "b", "c"]}, "scope has too many items: at most 2"),
        ({"ask": "q", "scope": ["a"], "steps": 9}, "steps must be at most 8"),
        ({"scope": ["a"]}, "ask is required"),
        ({"ask": "q", "scope": ["a"], "colour": 1}, "unknown field 'colour'"),
        ({"ask": "q", "scope": [3]}, "scope[0] must be text (a string)"),
        ({"ask": "q", "scope": "a"}, "scope must be a list"),
        ({"ask": "q", "scope": ["a"], "steps": "many"}, "steps must be a whole number"),
        ({"ask": "", "scope": []}, "ask must not be empty (and 1 more)"),
    ],
)
def test_sentences(data: dict[str, object], sentence: str) -> None:
    with pytest.raises(ValidationError) as caught:
        Request.model_validate(data)
    text = first_problem(caught.value)
    assert text == sentence and "pydantic" not in text and "should" not in text


def test_field_names_drop_where_the_value_came_from() -> None:
    assert field_of(("body", "scope", 0)) == "scope[0]"
    assert field_of(("query", "path")) == "path"
    assert field_of(()) == "the request"
