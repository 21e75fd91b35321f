"""The one turn contract (`agent.request.TurnRequest`): its bounds are declared once and read by the
API's messages and the CLI's options; the HTTP body adds only what is HTTP's; who asks is not part
of a request."""

from __future__ import annotations

import pytest
from pydantic import ValidationError
from typer.testing import CliRunner

from sleuth.agent.request import INT_BOUNDS, TurnRequest
from sleuth.agent.retrieval import RetrievalOptions
from sleuth.cli import app
from sleuth.server.admission import QueryRequest


def test_the_http_body_adds_only_what_is_https() -> None:
    added = set(QueryRequest.model_fields) - set(TurnRequest.model_fields)
    assert added == {"previous_query_id", "stream", "background"}
    for name, info in TurnRequest.model_fields.items():  # the same declaration, not a copy of it
        assert QueryRequest.model_fields[name].metadata == info.metadata, name


def test_who_asks_cannot_be_said_by_a_request() -> None:
    for field in ("allow_model_specs", "created_by", "caller", "model_specs"):
        with pytest.raises(ValidationError):
            QueryRequest.model_validate({"ask": "q", "scope": ["kb"], field: True}, strict=True)


def test_bounds_are_read_from_the_declaration() -> None:
    assert INT_BOUNDS == {
        "timeout_seconds": (1, 900),
        "max_steps": (1, 50),
        "max_retrieved": (1, 200),
        "max_retrieved_chars": (1, 20_000),
        "max_tool_output_chars": (1, 100_000),
    }
    for name, (low, high) in INT_BOUNDS.items():
        TurnRequest.model_validate({"ask": "q", name: high})
        with pytest.raises(ValidationError):
            TurnRequest.model_validate({"ask": "q", name: low - 1})


def test_the_cli_takes_its_ranges_from_the_contract() -> None:
    result = CliRunner().invoke(app, ["ask", "q", "--context", "kb", "--max-steps", "51"])
    assert result.exit_code == 2 and "less than or equal to 50" in result.output


def test_text_is_made_storable_and_flags_map_to_retrieval() -> None:
    request = TurnRequest(ask="say \ud800", scope=["kb"], system_prompt="x\udfff")
    assert request.ask == "say \ufffd" and request.system_prompt == "x\ufffd"
    assert request.retrieval is None and request.tool_output_chars == 10_000
    hits = TurnRequest(ask="q", chunks_only=True, max_retrieved=3)
    assert hits.retrieval == RetrievalOptions(kinds=("chunk",), max_hits=3)
    assert TurnRequest(ask="q", workflow="query_rag").canonical_workflow == "search_rag"


def test_values_and_conflicts_the_types_cannot_say() -> None:
    assert TurnRequest(ask="   ").value_problem() == ("ask", "ask must not be blank")
    big = {"type": "object", "description": "x" * 40_000}
    assert TurnRequest(ask="q", shape=big).value_problem() == (
        "shape",
        "shape must be at most 32 KiB of JSON",
    )
    both = TurnRequest(ask="q", chunks_only=True, artifacts_only=True)
    assert both.conflict() == ("chunks_only", "chunks_only and artifacts_only exclude each other")
    shaped = TurnRequest(ask="q", pointers_only=True, shape={"type": "object"})
    assert shaped.conflict() == (
        "shape",
        "shape cannot be combined with a retrieval-only turn (pointers_only)",
    )
    assert TurnRequest(ask="q").conflict() is None
