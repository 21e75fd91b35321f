"""The `shape` machinery: the accepted subset, validation, JSON extraction, pointers, the field check
and the offline filler (spec/api.md §8.3, spec/runtime.md §8.5, §10.3)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from sleuth.agent.grounding import check_grounding, normalize_number, value_occurs
from sleuth.agent.shape import (
    MAX_ERRORS,
    MAX_SHAPE_BYTES,
    ShapeError,
    check_shape,
    extract_json_object,
    leaf_pointers,
    make_pointer,
    resolve_pointer,
    validate,
)
from sleuth.agent.shape_fill import OfflineShapeError, offline_fill


def obj(**properties: Any) -> dict[str, Any]:
    return {"type": "object", "properties": properties}


# --------------------------------------------------------------------------------------------------
# check_shape
# --------------------------------------------------------------------------------------------------

FULL_SHAPE: dict[str, Any] = {
    "type": "object",
    "title": "Report",
    "description": "everything the subset allows",
    "additionalProperties": False,
    "required": ["name"],
    "properties": {
        "name": {"type": "string", "minLength": 1, "maxLength": 80, "pattern": "^[A-Z]", "default": "X"},
        "when": {"type": "string", "format": "date"},
        "at": {"type": "string", "format": "date-time"},
        "link": {"type": "string", "format": "uri"},
        "mail": {"type": "string", "format": "email"},
        "price": {"type": "number", "minimum": 0, "maximum": 1e9},
        "count": {"type": "integer", "minimum": 0},
        "flag": {"type": "boolean"},
        "nothing": {"type": "null"},
        "maybe": {"type": ["string", "null"]},
        "kind": {"enum": ["a", "b", 3, None]},
        "version": {"const": 2},
        "tags": {"type": "array", "items": {"type": "string"}, "minItems": 0, "maxItems": 5},
        "either": {
            "anyOf": [{"type": "string"}, {"type": "object", "properties": {"x": {"type": "integer"}}}]
        },
        "nested": {
            "type": "object",
            "properties": {"deep": {"type": "string"}},
            "additionalProperties": True,
        },
    },
}


def test_full_subset_is_accepted() -> None:
    check_shape(FULL_SHAPE)


@pytest.mark.parametrize("keyword", ["oneOf", "allOf", "not", "$ref", "$defs", "patternProperties", "if"])
def test_unsupported_keyword_names_keyword_and_path(keyword: str) -> None:
    shape = obj(x={"type": "string", keyword: []})
    with pytest.raises(ShapeError) as info:
        check_shape(shape)
    assert info.value.keyword == keyword
    assert info.value.path == "$.properties.x"
    assert str(info.value) == f"unsupported keyword '{keyword}' at $.properties.x"


def test_path_through_items_and_anyof() -> None:
    shape = obj(items={"type": "array", "items": {"type": "string", "oneOf": []}})
    with pytest.raises(ShapeError) as info:
        check_shape(shape)
    assert info.value.path == "$.properties.items.items"
    assert "'oneOf'" in str(info.value) and "$.properties.items.items" in str(info.value)

    shape = obj(a={"anyOf": [{"type": "string"}, {"type": "integer", "multipleOf": 2}]})
    with pytest.raises(ShapeError) as info:
        check_shape(shape)
    assert (info.value.keyword, info.value.path) == ("multipleOf", "$.properties.a.anyOf[1]")


def test_odd_property_names_are_quoted_in_paths() -> None:
    with pytest.raises(ShapeError) as info:
        check_shape(obj(**{"a b": {"type": "string", "oneOf": []}}))
    assert info.value.path == '$.properties["a b"]'


@pytest.mark.parametrize(
    "shape",
    [
        {"type": "array", "items": {"type": "string"}},
        {"properties": {}},
        {"type": ["object"]},
        [],
        "object",
        None,
    ],
)
def test_root_must_be_an_object_schema(shape: object) -> None:
    with pytest.raises(ShapeError) as info:
        check_shape(shape)
    assert info.value.path == "$"


@pytest.mark.parametrize(
    ("schema", "keyword"),
    [
        ({"type": "date"}, "type"),
        ({"type": []}, "type"),
        ({"type": ["string", "string"]}, "type"),
        ({"type": 3}, "type"),
        ({"type": "object", "required": "name"}, "required"),
        ({"type": "object", "required": [1]}, "required"),
        ({"type": "object", "properties": []}, "properties"),
        ({"type": "object", "additionalProperties": {"type": "string"}}, "additionalProperties"),
        ({"type": "array", "items": [{"type": "string"}]}, "items"),
        ({"enum": "abc"}, "enum"),
        ({"enum": []}, "enum"),
        ({"type": "string", "description": 3}, "description"),
        ({"type": "string", "title": None}, "title"),
        ({"type": "array", "minItems": -1}, "minItems"),
        ({"type": "array", "maxItems": 1.5}, "maxItems"),
        ({"type": "string", "minLength": True}, "minLength"),
        ({"type": "string", "maxLength": "3"}, "maxLength"),
        ({"type": "number", "minimum": "0"}, "minimum"),
        ({"type": "number", "maximum": False}, "maximum"),
        ({"type": "string", "pattern": "(unclosed"}, "pattern"),
        ({"type": "string", "pattern": 5}, "pattern"),
        ({"type": "string", "format": "ipv4"}, "format"),
        ({"type": "string", "format": ["date"]}, "format"),
        ({"anyOf": []}, "anyOf"),
        ({"anyOf": {"type": "string"}}, "anyOf"),
    ],
)
def test_keyword_values_are_type_checked(schema: dict[str, Any], keyword: str) -> None:
    with pytest.raises(ShapeError) as info:
        check_shape(obj(x=schema))
    assert info.value.keyword == keyword
    assert info.value.path == "$.properties.x"
    assert f"'{keyword}'" in str(info.value) and "$.properties.x" in str(info.value)


def test_subschemas_must_be_objects() -> None:
    with pytest.raises(ShapeError) as info:
        check_shape(obj(x=True))
    assert info.value.path == "$.properties.x"
    with pytest.raises(ShapeError) as info:
        check_shape(obj(x={"anyOf": [{"type": "string"}, False]}))
    assert info.value.path == "$.properties.x.anyOf[1]"


def nested(levels: int) -> dict[str, Any]:
    """A shape whose schema levels (root included) number `levels`."""
    schema: dict[str, Any] = {"type": "string"}
    for _ in range(levels - 1):
        schema = obj(a=schema)
    return schema


def test_depth_limit() -> None:
    check_shape(nested(8))
    with pytest.raises(ShapeError) as info:
        check_shape(nested(9))
    assert info.value.keyword == "properties"
    assert info.value.path == "$" + ".properties.a" * 8
    assert "deeper than 8" in str(info.value)


def test_items_count_toward_depth_but_anyof_does_not() -> None:
    schema: dict[str, Any] = {"type": "string"}
    for _ in range(6):
        schema = {"type": "array", "items": {"anyOf": [schema, {"type": "null"}]}}
    check_shape(obj(a=schema))  # root, a, 6 items levels = 8; the anyOf branches add nothing
    with pytest.raises(ShapeError) as info:
        check_shape(obj(a={"type": "array", "items": schema}))
    assert info.value.keyword == "items"


def test_property_limit_counts_all_levels() -> None:
    flat = {f"p{i}": {"type": "string"} for i in range(150)}
    inner = {f"q{i}": {"type": "string"} for i in range(49)}
    check_shape(obj(**flat, sub=obj(**inner)))  # 151 + 49 = 200
    inner["q49"] = {"type": "string"}
    with pytest.raises(ShapeError) as info:
        check_shape(obj(**flat, sub=obj(**inner)))
    assert info.value.keyword == "properties"
    assert info.value.path == "$.properties.sub"
    assert "200" in str(info.value)


def test_size_limit() -> None:
    filler = "x" * (MAX_SHAPE_BYTES - 200)
    check_shape(obj(a={"type": "string", "description": filler}))
    with pytest.raises(ShapeError) as info:
        check_shape(obj(a={"type": "string", "description": filler + "x" * 300}))
    assert info.value.path == "$"
    assert str(MAX_SHAPE_BYTES) in str(info.value)


def test_absurdly_nested_const_is_rejected() -> None:
    value: Any = 1
    for _ in range(40):
        value = [value]
    with pytest.raises(ShapeError) as info:
        check_shape(obj(a={"const": value}))
    assert info.value.keyword == "const"


def test_deep_anyof_chain_is_rejected_not_a_crash() -> None:
    schema: dict[str, Any] = {"type": "string"}
    for _ in range(100):
        schema = {"anyOf": [schema]}
    with pytest.raises(ShapeError) as info:
        check_shape(obj(a=schema))
    assert info.value.keyword == "anyOf"


# --------------------------------------------------------------------------------------------------
# validate
# --------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("fmt", "good", "bad"),
    [
        (
            "date",
            ["2024-02-29", "1999-12-31"],
            ["2023-02-29", "2024-13-01", "20240101", "2024-W01-1", "soon"],
        ),
        (
            "date-time",
            ["2024-03-01T10:00:00Z", "2024-03-01T10:00:00.123+02:00", "2024-03-01t10:00:00z"],
            ["2024-03-01T25:00:00Z", "2024-03-01T10:00:00", "2024-03-01", "yesterday"],
        ),
        (
            "uri",
            ["https://example.com/a?b=1", "mailto:someone@example.com", "urn:isbn:0451450523", "ftp://h"],
            ["example.com/a", "/relative/path", "https://", "http://exa mple.com", "", "1http://x.y"],
        ),
        ("email", ["a@example.com", "first.last+tag@sub.example.org"], ["a@b", "a b@c.de", "a@@b.c", "@b.c"]),
    ],
)
def test_formats_are_really_checked(fmt: str, good: list[str], bad: list[str]) -> None:
    shape = obj(v={"type": "string", "format": fmt})
    check_shape(shape)
    for value in good:
        assert validate({"v": value}, shape) == [], value
    for value in bad:
        errors = validate({"v": value}, shape)
        assert len(errors) == 1 and errors[0].startswith("/v: "), (value, errors)


def test_formats_ignore_non_strings() -> None:
    shape = obj(v={"type": ["string", "integer"], "format": "date"})
    assert validate({"v": 5}, shape) == []


def test_validation_error_formatting() -> None:
    shape: dict[str, Any] = {
        "type": "object",
        "required": ["name", "items"],
        "additionalProperties": False,
        "properties": {
            "name": {"type": "string"},
            "items": {"type": "array", "items": {"type": "integer"}},
            "a/b": {"type": "string"},
        },
    }
    data = {"items": [1, "two", 3, "four"], "a/b": 1, "extra": True}
    assert validate(data, shape) == [
        "/: 'name' is a required property",
        "/: Additional properties are not allowed ('extra' was unexpected)",
        "/a~1b: 1 is not of type 'string'",
        "/items/1: 'two' is not of type 'integer'",
        "/items/3: 'four' is not of type 'integer'",
    ]
    assert validate({"name": "x", "items": []}, shape) == []


def test_validation_sorts_indices_numerically_and_caps() -> None:
    shape = obj(xs={"type": "array", "items": {"type": "integer"}})
    errors = validate({"xs": [str(i) for i in range(30)]}, shape)
    assert len(errors) == MAX_ERRORS
    assert errors[:3] == [
        "/xs/0: '0' is not of type 'integer'",
        "/xs/1: '1' is not of type 'integer'",
        "/xs/2: '2' is not of type 'integer'",
    ]
    assert errors == validate({"xs": [str(i) for i in range(30)]}, shape)


def test_long_messages_are_cut() -> None:
    errors = validate({"v": "y" * 5000}, obj(v={"type": "integer"}))
    assert len(errors) == 1 and len(errors[0]) < 250 and errors[0].endswith("…")


def test_validate_checks_every_keyword() -> None:
    check_shape(FULL_SHAPE)
    ok = {
        "name": "Acme",
        "when": "2024-01-02",
        "price": 3.5,
        "count": 2,
        "kind": 3,
        "version": 2,
        "tags": ["a"],
        "either": {"x": 1},
        "nested": {"deep": "d", "more": 1},
    }
    assert validate(ok, FULL_SHAPE) == []
    bad = ok | {"name": "acme", "price": -1, "count": 1.5, "kind": "c", "version": 3, "tags": list("abcdef")}
    pointers = sorted(e.split(":")[0] for e in validate(bad, FULL_SHAPE))
    assert pointers == ["/count", "/kind", "/name", "/price", "/tags", "/version"]


# --------------------------------------------------------------------------------------------------
# extract_json_object
# --------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ('{"a": 1}', {"a": 1}),
        ('Here you go:\n```json\n{"a": "x}"}\n```\nDone.', {"a": "x}"}),
        ('```\n{"a": [1, {"b": 2}]}\n```', {"a": [1, {"b": 2}]}),
        (
            'The answer {as requested}: {"answer": "{not a brace}", "data": {}}',
            {"answer": "{not a brace}", "data": {}},
        ),
        ('prose with a stray { brace, then {"a": "b"} and {"c": 1}', {"a": "b"}),
        ('Example: {"x": 1}\n```json\n{"real": true}\n```', {"real": True}),
        ('[1, 2] then {"a": "\\"quoted\\" }"}', {"a": '"quoted" }'}),
        ("no json here", None),
        ("", None),
        ("{'a': 1}", None),
        ('{"a": NaN}', None),
        ('{"answer": "x", "data": {"a": 1}, "grounding": {"', None),
        ('{"answer": "cut off {\\"inner\\": 1}', None),
        ('```json\n{"answer": "x", "data": {"a": 1}', None),
    ],
)
def test_extract_json_object(text: str, expected: dict[str, Any] | None) -> None:
    assert extract_json_object(text) == expected


# --------------------------------------------------------------------------------------------------
# pointers
# --------------------------------------------------------------------------------------------------


def test_leaf_pointers_in_document_order_with_escaping() -> None:
    data = {
        "name": "x",
        "a/b": 1,
        "m~n": True,
        "list": [None, {"k": 2.5}, []],
        "empty": {},
        "": "blank key",
    }
    assert leaf_pointers(data) == [
        "/name",
        "/a~1b",
        "/m~0n",
        "/list/0",
        "/list/1/k",
        "/list/2",
        "/empty",
        "/",
    ]
    assert leaf_pointers({}) == [""]
    assert leaf_pointers("scalar") == [""]
    assert make_pointer(["a/b", "~", 0]) == "/a~1b/~0/0"


def test_resolve_pointer() -> None:
    data = {"a/b": {"m~n": [10, 20]}, "": 5, "z": None}
    assert resolve_pointer(data, "") == (True, data)
    assert resolve_pointer(data, "/a~1b/m~0n/1") == (True, 20)
    assert resolve_pointer(data, "/") == (True, 5)
    assert resolve_pointer(data, "/z") == (True, None)
    for missing in [
        "/a~1b/m~0n/2",
        "/a~1b/m~0n/01",
        "/a~1b/m~0n/-",
        "/a~1b/m~0n/x",
        "/nope",
        "a",
        "/a~2b",
        "/z/q",
    ]:
        assert resolve_pointer(data, missing) == (False, None), missing
    for pointer in leaf_pointers(data):
        assert resolve_pointer(data, pointer)[0]


# --------------------------------------------------------------------------------------------------
# the field check
# --------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (48.2, "48.2"),
        (48.20, "48.2"),
        (1200, "1200"),
        (1200.0, "1200"),
        (0.5, "0.5"),
        (-3, "-3"),
        (0, "0"),
        (-0.0, "0"),
        (1e20, "100000000000000000000"),
        ("$48.20", "48.2"),
        ("48.20 €", "48.2"),
        ("1,200", "1200"),
        ("1,200,000.50", "1200000.5"),
        ("0.50", "0.5"),
        ("−5", "-5"),
        ("+7", "7"),
        (".5", "0.5"),
        ("100", "100"),
        ("1,2", None),
        ("12 apples", None),
        ("", None),
        ("$", None),
        (True, None),
        (None, None),
        (float("nan"), None),
        (float("inf"), None),
    ],
)
def test_normalize_number(value: object, expected: str | None) -> None:
    assert normalize_number(value) == expected


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (48.2, "Revenue was $48.20 million."),
        (48.2, "48.2"),
        (1200, "We employ 1,200 people"),
        (1200, "1200."),
        (0.5, "a ratio of 0.50"),
        (0.5, "only .5 of it"),
        (1200000.5, "EUR 1,200,000.50 in total"),
        (5, "a loss of $5m"),
        (-5, "a loss of 5 million"),
        (3, "Q3 results: 3 items, 1,200, 300"),
        (300, "items 1,200, 300"),
        (7, "7%"),
        ("Acme Corp", "signed by   ACME\n corp on Monday"),
        ("café", "Cafe\u0301 Central"),
        ("1,200", "1200 staff"),
        ("48.20", "$48.2"),
        (True, ""),
        (None, ""),
        ("x" * 201, "nothing alike"),
        ("", "anything"),
    ],
)
def test_value_occurs(value: object, text: str) -> None:
    assert value_occurs(value, text)


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (48.2, "482"),
        (48.2, "4.82"),
        (48.2, "48.25"),
        (48.2, "148.2"),
        (48, "48.2"),
        (2, "2024"),
        (24, "2024"),
        (1200, "1,2000"),
        (0.5, "5"),
        (3.14, "3,14"),
        ("Acme Corp", "Acme Cor"),
        ("Beta", "alpha"),
        ("1,200", "12 00"),
    ],
)
def test_value_does_not_occur(value: object, text: str) -> None:
    assert not value_occurs(value, text)


def test_check_grounding_drops_and_keeps() -> None:
    data = {
        "price": 48.2,
        "vendor": "Acme Corp",
        "summary": "long " * 60,
        "active": True,
        "items": [{"name": "Widget"}, {"name": "Gadget"}],
        "headcount": 1200,
        "made_up": "Zeta Ltd",
        "tags": [],
        "nested": {"x": 1},
    }
    cited = {1: "The price is $48.20 per unit.", 2: "Signed by ACME corp.", 3: "Widgets and gadgets."}
    grounding = {
        "/price": [1],
        "/vendor": [2, 2, 9],
        "/summary": [3],
        "/active": [1],
        "/items/0/name": [3],
        "/items/1/name": [1, 3],
        "/headcount": [1],
        "/made_up": [1, 2, 3],
        "/tags": [1],
        "/nested": [1],
        "/nope": [1],
        "/items/5/name": [1],
        "/price/x": [1],
        "/vendor ": [2],
        "/orphan": [],
    }
    kept, ungrounded = check_grounding(data, grounding, cited, computed="n = 1,200")
    assert kept == {
        "/price": [1],
        "/vendor": [2],
        "/summary": [3],
        "/active": [1],
        "/items/0/name": [3],
        "/items/1/name": [1, 3],
        "/headcount": [1],
        "/tags": [1],
    }
    assert ungrounded == ["/made_up"]


def test_check_grounding_reports_entries_without_valid_citations() -> None:
    kept, ungrounded = check_grounding({"a": "x", "b": "y"}, {"a": [1], "/a": [7], "/b": []}, {1: "x"}, "")
    assert kept == {}
    assert ungrounded == ["/a", "/b"]


# --------------------------------------------------------------------------------------------------
# offline_fill
# --------------------------------------------------------------------------------------------------


def test_offline_fill_strings_count_and_items() -> None:
    shape: dict[str, Any] = {
        "type": "object",
        "required": ["answer", "total", "names", "meta"],
        "properties": {
            "answer": {"type": "string"},
            "total": {"type": "integer", "minimum": 0},
            "names": {"type": "array", "items": {"type": "string"}},
            "flag": {"type": "boolean"},
            "meta": obj(note={"type": "string"}, when={"type": "string", "format": "date"}),
            "unused": obj(b={"type": "boolean"}),
        },
    }
    check_shape(shape)
    filled = offline_fill(shape, "There are 3 vendors.", 3, ["Acme", "Beta", "Gamma"])
    assert filled == {
        "answer": "There are 3 vendors.",
        "total": 3,
        "names": ["Acme", "Beta", "Gamma"],
        "meta": {"note": "There are 3 vendors."},
    }
    assert validate(filled, shape) == []


def test_offline_fill_omits_optional_unfillable_fields() -> None:
    shape = obj(answer={"type": "string"}, total={"type": "number"}, names={"type": "array"})
    assert offline_fill(shape, "text", None, None) == {"answer": "text"}


def test_offline_fill_required_count_missing_fails_with_message() -> None:
    shape = obj(total={"type": "integer"}) | {"required": ["total"]}
    with pytest.raises(OfflineShapeError) as info:
        offline_fill(shape, "text", None, None)
    assert info.value.pointer == "/total"
    assert str(info.value) == "the offline planner cannot fill field /total of this shape; configure a model"


def test_offline_fill_two_numeric_fields_take_no_count() -> None:
    shape = obj(low={"type": "number"}, high={"type": "number"}) | {"required": ["high"]}
    with pytest.raises(OfflineShapeError, match="field /high of this shape"):
        offline_fill(shape, "text", 5, None)
    assert offline_fill(obj(low={"type": "number"}, high={"type": "number"}), "t", 5, None) == {}


def test_offline_fill_nested_failure_names_deepest_field() -> None:
    inner = obj(flag={"type": "boolean"}) | {"required": ["flag"]}
    shape = obj(outer=obj(inner=inner) | {"required": ["inner"]}) | {"required": ["outer"]}
    with pytest.raises(OfflineShapeError) as info:
        offline_fill(shape, "t", None, None)
    assert info.value.pointer == "/outer/inner/flag"
    optional = obj(outer=obj(inner=inner) | {"required": ["inner"]}, answer={"type": "string"})
    assert offline_fill(optional, "t", None, None) == {"answer": "t"}


def test_offline_fill_respects_constraints() -> None:
    shape = obj(
        short={"type": "string", "maxLength": 3},
        kind={"enum": ["a", "b"]},
        version={"const": 1},
        date={"type": "string", "format": "date"},
        maybe={"type": ["boolean", "null"]},
        few={"type": "array", "items": {"type": "string"}, "maxItems": 1},
        key={"type": "string", "pattern": "^[A-Z]+$"},
    ) | {"required": ["version", "maybe"]}
    check_shape(shape)
    filled = offline_fill(shape, "a long answer", None, ["x", "y"])
    assert filled == {"version": 1, "maybe": None}
    with pytest.raises(OfflineShapeError, match="/short"):
        offline_fill(shape | {"required": ["short"]}, "a long answer", None, None)


def test_offline_fill_escapes_pointers_and_handles_anyof() -> None:
    shape = obj(
        **{"a/b": {"type": "boolean"}},
        choice={"anyOf": [{"type": "integer"}, {"type": "string", "minLength": 1}]},
        items_or_null={"anyOf": [{"type": "array", "items": {"type": "string"}}, {"type": "null"}]},
        untyped={"description": "anything"},
    ) | {"required": ["choice", "items_or_null", "untyped"]}
    check_shape(shape)
    assert offline_fill(shape, "ans", 4, None) == {"choice": 4, "items_or_null": None, "untyped": "ans"}
    assert offline_fill(shape, "ans", None, ["i"]) == {
        "choice": "ans",
        "items_or_null": ["i"],
        "untyped": "ans",
    }
    with pytest.raises(OfflineShapeError) as info:
        offline_fill(shape | {"required": ["a/b"]}, "ans", None, None)
    assert "/a~1b" in str(info.value)


def test_offline_fill_count_is_deterministic_json() -> None:
    shape = obj(n={"type": "integer"}, answer={"type": "string"}) | {"required": ["n", "answer"]}
    first = offline_fill(shape, "There are 7 files.", 7, None)
    assert json.dumps(first) == json.dumps(offline_fill(shape, "There are 7 files.", 7, None))
    assert first == {"n": 7, "answer": "There are 7 files."}
