"""The SDK's primitives are declared once (`sdk.primitives`): the REPL, the prompt's SDK reference,
`tools=` and the MCP tools all read the same names, kinds, signatures, bounds and docstrings."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import anyio
import pytest

from sleuth.agent.orientation import sdk_reference
from sleuth.api.mcp import build_server
from sleuth.sdk.errors import LimitError
from sleuth.sdk.knowledge import PRIMITIVES, Knowledge, ScopedContext
from sleuth.sdk.primitives import primitives, signature_text
from tests.support import SDK_PRIMITIVES


def test_one_declaration_in_the_specs_order() -> None:
    items = primitives()
    assert tuple(item.name for item in items) == SDK_PRIMITIVES == PRIMITIVES
    assert {item.name for item in items if item.kind == "search"} == {
        "search_knowledge",
        "search_source",
        "search_source_by_keyword",
        "search_in_sources",
        "cite_from_artifact",
        "orientation",  # the host builds it: awaited like a search
    }
    for item in items:
        assert item.doc, item.name
        assert asyncio.iscoroutinefunction(getattr(Knowledge, item.name)) == (item.kind == "search")


def test_the_prompt_reads_the_declaration() -> None:
    reference = sdk_reference()
    for item in primitives():
        prefix = "async def" if item.kind == "search" else "def"
        assert f"{prefix} {item.name}{signature_text(item.method)}:" in reference
    assert "Annotated" not in reference and "FieldInfo" not in reference  # bounds are not shown as types
    assert "def search_source(query: str, top_k: int = 10, context: str | None = None, *," in reference
    only = sdk_reference(["search_source"])
    assert "def search_source(" in only and "def query_db(" not in only and "def final(" in only


def test_a_count_above_its_bound_is_lowered_with_a_notice(
    sample_version: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Asking for 500 hits is not worth a failed step: the count is lowered to its bound, and the
    step's output says so (issue 25, item 6)."""
    knowledge = Knowledge([ScopedContext("acme", sample_version)])
    try:
        hits = asyncio.run(knowledge.search_source("hotel", top_k=500))
        assert 1 <= len(hits) <= 100
        assert "[notice: search_source(top_k=500) is above 100; using 100]" in capsys.readouterr().err
        asyncio.run(knowledge.search_in_sources(["x"], "hotel", max_total=101, per_source=300))
        err = capsys.readouterr().err
        assert "max_total=101) is above 100" in err and "per_source=300) is above 100" in err
    finally:
        knowledge.close()


def test_declared_bounds_are_checked_on_every_call(sample_version: Path) -> None:
    knowledge = Knowledge([ScopedContext("acme", sample_version)])
    try:
        with pytest.raises(LimitError, match=r"top_k must be an integer from 1 to 100, got 0"):
            asyncio.run(knowledge.search_knowledge("hotel", top_k=0))
        with pytest.raises(LimitError, match=r"max_total must be an integer from 1 to 100, got -1"):
            asyncio.run(knowledge.search_in_sources(["x"], "hotel", -1))
        with pytest.raises(LimitError, match=r"max_total must be an integer from 1 to 100, got '101'"):
            asyncio.run(knowledge.search_in_sources(["x"], "hotel", "101"))  # type: ignore[arg-type]
        with pytest.raises(LimitError, match=r"query must be a string of 1-2,000 characters"):
            asyncio.run(knowledge.search_in_sources(["x"], ["ok", ""]))  # each query of several
        with pytest.raises(LimitError, match=r"issuer must be a string of at most 200 characters"):
            asyncio.run(knowledge.search_source("revenue", issuer="x" * 201))
        with pytest.raises(LimitError, match=r"name must be a non-empty string"):
            knowledge.read_artifact("")
        with pytest.raises(LimitError, match=r"walk_graph\(\): "):
            knowledge.walk_graph()  # type: ignore[call-arg]
        assert knowledge.get_fact("chunk_count") > 0  # within bounds: the call runs
    finally:
        knowledge.close()


def test_mcp_tools_are_built_from_the_declaration() -> None:
    server, _tools = build_server(lambda ctx: None)  # type: ignore[arg-type, return-value]
    listed: dict[str, Any] = {}

    async def main() -> None:
        listed.update({tool.name: tool.input_schema for tool in await server.list_tools()})

    anyio.run(main)
    for item in primitives():
        schema = listed[item.name]
        own = [p.name for p in item.parameters() if p.name != "context"]
        assert list(schema["properties"]) == ["context", *own], item.name
        assert "ctx" not in schema["properties"]
    top_k = listed["search_source"]["properties"]["top_k"]
    assert (top_k["minimum"], top_k["maximum"], top_k["default"]) == (1, 100, 10)
    assert listed["walk_graph"]["properties"]["max_hops"]["maximum"] == 4
    assert listed["query_db"]["properties"]["sql"]["minLength"] == 1
    assert "sources" in listed["search_source"]["properties"]  # every parameter, not a chosen few
