"""The MCP server (spec/api.md §11) through the official MCP client: Streamable HTTP at `/mcp` on a real
server (the Nexus tools, a full background turn, the SDK primitives, tool errors, keys) and stdio
(`sleuth mcp`)."""

from __future__ import annotations

import json
import resource
import shutil
import sys
import time
from collections.abc import Awaitable, Callable
from typing import Any

import anyio
import httpx2
from mcp import Client
from mcp.client.stdio import StdioServerParameters
from mcp.client.streamable_http import streamable_http_client
from mcp_types import CallToolResult, TextContent

from sleuth.compile.pipeline import CompileReport
from sleuth.sdk.sql import MAX_RESULT_BYTES, MAX_VALUE_BYTES
from sleuth.store.contexts.home import Home
from sleuth.store.records.keys import KeyStore
from tests import loopback
from tests.api.support import ServerFactory
from tests.support import SDK_PRIMITIVES

HOTEL = "What is the hotel limit per night when travelling?"
NEXUS_TOOLS = {"list_contexts", "query_context", "get_query"}
SDK_TOOLS = set(SDK_PRIMITIVES)


def value(result: CallToolResult) -> Any:
    """The tool's JSON value (its one text block), asserting the call succeeded."""
    assert not result.is_error, result.content
    assert len(result.content) == 1 and isinstance(result.content[0], TextContent)
    return json.loads(result.content[0].text)


def error(result: CallToolResult) -> dict[str, Any]:
    """The §4 envelope of a tool error."""
    assert result.is_error, result.content
    assert isinstance(result.content[0], TextContent)
    envelope: dict[str, Any] = json.loads(result.content[0].text)
    assert envelope["message"] and envelope == result.structured_content
    return envelope


def run(main: Callable[[], Awaitable[None]]) -> None:
    anyio.run(main)


def test_http_lists_tools_and_answers_a_background_turn(make_server: ServerFactory) -> None:
    server = make_server()
    started: dict[str, Any] = {}

    async def main() -> None:
        async with Client(f"{server.url}/mcp") as client:
            tools = {tool.name: tool for tool in (await client.list_tools()).tools}
            assert set(tools) == NEXUS_TOOLS | SDK_TOOLS
            search = tools["search_source"].input_schema
            assert search["required"] == ["context", "query"] and "ctx" not in search["properties"]
            assert tools["search_source"].annotations is not None
            assert tools["search_source"].annotations.read_only_hint is True
            assert {"issuer", "doc_type", "year"} <= set(search["properties"])  # what a document is

            filtered = value(
                await client.call_tool(
                    "search_source", {"context": "acme", "query": "revenue", "doc_type": "annual report"}
                )
            )
            assert filtered and {h["source_path"] for h in filtered} == {
                "uploads/acme-corpus/reports/annual-report-2025.pdf"
            }

            contexts = value(await client.call_tool("list_contexts", {}))
            acme = next(c for c in contexts if c["slug"] == "acme")
            assert acme["queryable"] is True and acme["is_curating"] is False
            assert acme["id"].startswith("ctx_") and acme["last_curated_at"]
            assert acme["is_optimizing"] is False and acme["last_optimized_at"] is None

            started.update(
                value(await client.call_tool("query_context", {"context": "acme", "question": HOTEL}))
            )
            assert started["status"] == "in_progress" and started["model"] == "sleuth/offline"
            deadline = time.monotonic() + 30
            while True:
                polled = value(await client.call_tool("get_query", {"query_id": started["query_id"]}))
                if polled["status"] != "in_progress" or time.monotonic() > deadline:
                    break
                assert polled["answer"] is None
                await anyio.sleep(0.1)
            assert polled["status"] == "completed", polled
            assert "$220" in polled["answer"] and polled["citations"] and polled["error"] is None
            assert polled["model"] == "sleuth/offline" and set(polled) == {
                "query_id",
                "answer",
                "output_json",
                "citations",
                "model",
                "status",
                "error",
            }

            missing = error(await client.call_tool("get_query", {"query_id": "q_missing"}))
            assert missing["code"] == "query_not_found"
            # arguments the schema refuses: the envelope with one sentence, no validator report or URL
            empty = error(await client.call_tool("query_context", {"context": "acme", "question": ""}))
            assert empty == {
                "message": "question must not be empty",
                "code": "invalid_request",
                "field": "question",
            }
            # `ask`, the HTTP API's name, is taken too (issue 39, item 12); the question once, and required
            by_api_name = value(await client.call_tool("query_context", {"context": "acme", "ask": HOTEL}))
            assert by_api_name["status"] == "in_progress" and by_api_name["query_id"].startswith("qry_")
            neither = error(await client.call_tool("query_context", {"context": "acme"}))
            assert neither["code"] == "invalid_request" and neither["field"] == "question"
            both = error(
                await client.call_tool("query_context", {"context": "acme", "question": "a", "ask": "b"})
            )
            assert both["message"] == "give the question once: question or ask"
            absent = error(await client.call_tool("get_query", {}))
            assert absent["code"] == "invalid_request" and absent["message"] == "query_id is required"

    run(main)
    # The same executor and database as the HTTP API: the turn is an ordinary stored query.
    stored = server.client.get(f"/api/queries/{started['query_id']}").json()
    assert stored["status"] == "completed" and stored["citations"]


def test_a_primitives_notices_come_back_beside_its_result(make_server: ServerFactory) -> None:
    """A tool call has no step output: what a primitive would print as a notice (a `must_contain` that
    matched no whole word, a bound lowered) comes back as text items after the JSON value and as
    `notices` in the structured content, never on the server's stderr."""
    server = make_server()

    async def main() -> None:
        async with Client(f"{server.url}/mcp") as client:
            asked = {"context": "acme", "query": "hotel limit", "must_contain": "hote"}
            answer = await client.call_tool("search_source", asked)
            assert not answer.is_error, answer.content
            first, *notes = answer.content
            assert isinstance(first, TextContent) and json.loads(first.text) == []
            assert len(notes) == 1 and isinstance(notes[0], TextContent)
            assert "must_contain='hote'" in notes[0].text and "whole words" in notes[0].text
            assert answer.structured_content == {"result": [], "notices": [notes[0].text]}
            plain = value(await client.call_tool("search_source", {"context": "acme", "query": "hotel"}))
            assert plain  # no notice: one text item, as before

    anyio.run(main)


def test_http_primitives_return_json_and_tool_errors(
    make_server: ServerFactory, sample_home: tuple[Home, CompileReport]
) -> None:
    server = make_server()
    home, _ = sample_home
    draft = home.create("draft-mcp")  # a context without a compiled version
    try:

        async def main() -> None:
            async with Client(f"{server.url}/mcp") as client:
                hits = value(
                    await client.call_tool(
                        "search_source", {"context": "acme", "query": "hotel limit per night", "top_k": 3}
                    )
                )
                assert 1 <= len(hits) <= 3
                first = hits[0]
                assert first["kind"] == "chunk" and first["context"] == "acme"
                assert isinstance(first["page"], int) and first["chunk_text"]
                # the span is the page's text; chunk_text the same words as a reader reads them
                assert first["ref"] == "E1" and first["span"]["text"].split() == first["chunk_text"].split()
                assert first["snippet"] in first["chunk_text"] and len(first["match"]) == 2
                assert "span_" not in first

                around = value(
                    await client.call_tool("read_around", {"context": "acme", "hit": first["id"], "after": 1})
                )
                assert around["hits"][1]["id"] == first["id"]
                assert around["source_path"] == first["source_path"]
                assert around["text"].startswith("[E1 p.") and around["hits"][0]["ref"] == "E1"
                where = {"source": first["source_path"], "page": first["page"]}
                page = value(await client.call_tool("read_page", {"context": "acme", **where}))
                assert first["id"] in {h["id"] for h in page["hits"]} and page["pages"] == [first["page"]]
                unknown_label = error(await client.call_tool("read_around", {"context": "acme", "hit": "E9"}))
                assert unknown_label["error"] == "NotFoundError"

                again = value(await client.call_tool("search_source", {"context": "acme", "query": "hotel"}))
                assert again[0]["ref"] == "E1"  # evidence labels are numbered per tool call

                rows = value(
                    await client.call_tool(
                        "query_db", {"context": "acme", "sql": "SELECT count(*) AS n FROM _tables"}
                    )
                )
                assert rows["columns"] == ["n"] and rows["rows"][0]["n"] >= 1 and rows["truncated"] is False

                refused = error(
                    await client.call_tool("query_db", {"context": "acme", "sql": "DELETE FROM _tables"})
                )
                assert refused["code"] == "query_error" and refused["error"] == "QueryError"

                unknown = error(await client.call_tool("search_source", {"context": "nope", "query": "x"}))
                assert unknown == {"message": "no context 'nope'", "code": "context_not_found"}
                bad_turn = error(
                    await client.call_tool("query_context", {"context": "nope", "question": "x"})
                )
                assert bad_turn["code"] == "context_not_found"
                uncurated = error(await client.call_tool("list_tables", {"context": "draft-mcp"}))
                assert uncurated["code"] == "context_not_curated"

                limits = await client.call_tool(
                    "search_source", {"context": "acme", "query": "x", "top_k": 0}
                )
                assert limits.is_error  # the argument schema's bounds

        run(main)
    finally:
        shutil.rmtree(draft.root)


def test_http_orientation_is_what_a_model_is_given(
    make_server: ServerFactory, sample_home: tuple[Home, CompileReport]
) -> None:
    """Issue 43: a person building on MCP reads the orientation a turn's model reads, word for word."""
    from sleuth.agent.orientation import TURN_DEFAULTS, context_brief, orientation_text
    from sleuth.sdk.orientation import OrientationSettings

    server = make_server()
    home, _ = sample_home
    context = home.find("acme")
    brief = context_brief(context, context.live_version() or "")

    async def main() -> None:
        async with Client(f"{server.url}/mcp") as client:
            given = value(await client.call_tool("orientation", {"context": "acme"}))
            assert given == orientation_text([brief], TURN_DEFAULTS)
            small = value(await client.call_tool("orientation", {"context": "acme", "profile": "small"}))
            assert small == orientation_text([brief], OrientationSettings(profile="small"))
            assert len(small) < len(given)
            refused = await client.call_tool("orientation", {"context": "acme", "profile": "tiny"})
            assert refused.is_error

    run(main)


def test_http_requires_a_key_when_auth_is_on(make_server: ServerFactory) -> None:
    server = make_server(auth=True)
    request = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}
    headers = {"Accept": "application/json, text/event-stream"}
    for sent in ({}, {"Authorization": "Bearer slk_not-a-key"}, {"Api-Key": "nope"}):
        refused = loopback.post(f"{server.url}/mcp", json=request, headers={**headers, **sent})
        assert refused.status_code == 401, refused.text
        assert refused.json()["code"] == "unauthenticated"
        assert refused.headers["WWW-Authenticate"] == "Bearer"
    _, secret = KeyStore.for_db(server.state.db).create("agent", "query")

    async def main() -> None:
        # The SDK's transport takes the HTTP client (httpx2, the SDK's own) that carries the key.
        http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {secret}"}, timeout=30)
        async with http, Client(streamable_http_client(f"{server.url}/mcp", http_client=http)) as client:
            contexts = value(await client.call_tool("list_contexts", {}))
            assert [c["slug"] for c in contexts] == ["acme"]

    run(main)


def test_stdio_serves_the_home_as_the_local_admin(sample_home: tuple[Home, CompileReport]) -> None:
    home, _ = sample_home
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "sleuth", "mcp", "--context", "acme"],
        env={"SLEUTH_HOME": str(home.root)},
    )

    async def main() -> None:
        async with Client(params) as client:
            contexts = value(await client.call_tool("list_contexts", {}))
            assert [c["slug"] for c in contexts] == ["acme"] and contexts[0]["queryable"] is True
            hits = value(
                await client.call_tool("search_source_by_keyword", {"context": "acme", "query": "hotel"})
            )
            assert hits and all(h["context"] == "acme" and h["page"] >= 1 for h in hits)
            other = error(await client.call_tool("list_tables", {"context": "elsewhere"}))
            assert other["code"] == "context_not_found" and "serves 'acme' only" in other["message"]

    run(main)


def _rss_peak_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def test_http_query_db_is_capped_in_value_size_and_result_bytes(
    make_server: ServerFactory, sample_home: tuple[Home, CompileReport]
) -> None:
    """Model SQL runs in a statement process, and its memory is capped by design (issue 22, item 5): one
    huge value is refused by SQLite's own length limit, and many big rows stop at the result byte cap."""
    server = make_server(auth=True)
    home, _ = sample_home
    acme = home.find("acme").info().id
    _, secret = KeyStore.for_db(server.state.db).create("one-context", "query", contexts=[acme])
    many_big_rows = (
        "WITH RECURSIVE n(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM n WHERE x < 1000) "
        "SELECT x, hex(zeroblob(250000)) AS pad FROM n"
    )

    async def main() -> None:
        http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {secret}"}, timeout=60)
        async with http, Client(streamable_http_client(f"{server.url}/mcp", http_client=http)) as client:
            before = _rss_peak_mb()
            huge = error(
                await client.call_tool("query_db", {"context": "acme", "sql": "SELECT zeroblob(20000000)"})
            )
            assert huge["code"] == "query_error" and "string or blob too big" in huge["message"]
            assert f"{MAX_VALUE_BYTES} bytes" in huge["message"]

            result = await client.call_tool("query_db", {"context": "acme", "sql": many_big_rows})
            rows = value(result)
            assert rows["truncated"] is True and rows["columns"] == ["x", "pad"]
            assert 1 <= len(rows["rows"]) < 1000 and len(rows["rows"][0]["pad"]) == 500_000
            assert len(rows["rows"]) * 500_000 <= MAX_RESULT_BYTES
            assert isinstance(result.content[0], TextContent)
            assert len(result.content[0].text) < 2 * MAX_RESULT_BYTES

            wide = ", ".join(["hex(zeroblob(400000))"] * 3)  # one row over the result cap on its own
            too_wide = error(await client.call_tool("query_db", {"context": "acme", "sql": f"SELECT {wide}"}))
            assert too_wide["code"] == "query_error" and "result cap" in too_wide["message"]

            ok = value(await client.call_tool("query_db", {"context": "acme", "sql": "SELECT 1 AS one"}))
            assert ok["rows"] == [{"one": 1}] and ok["truncated"] is False
            # Generous: unbounded, the 20 MB blob alone grew the server by about 900 MB.
            assert _rss_peak_mb() - before < 400

    run(main)


def test_a_service_refusal_is_a_tool_error_with_its_code() -> None:
    """A refusal raised below the API (a full server: `ToldTooMany`) reaches an MCP client as the tool
    error it is, with its code and fields, as HTTP gives it its status (issue 41, domain errors)."""
    from sleuth.api.mcp import _failure_of
    from sleuth.errors import ToldTooMany

    failure = _failure_of(ToldTooMany("key_turn_limit", "this key holds its share", retry_after_s=3, limit=1))
    assert failure is not None
    assert failure.envelope() == {"message": "this key holds its share", "code": "key_turn_limit", "limit": 1}
