"""What a key may see, over real HTTP (spec/api.md §3.1): a query key sees only its own sessions, queries and
traces (anyone else's answer 404, as if absent), an admin sees all; a key limited to contexts sees only
those, on every route, stream and MCP tool; `/mcp` refuses with the §4 envelope, credentials first."""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from typing import Any

import anyio
import httpx
import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp_types import CallToolResult, TextContent

from sleuth.compile.pipeline import CompileReport
from sleuth.store.contexts.home import ContextDir, Home
from sleuth.store.database import new_id
from sleuth.store.records.keys import KeyStore
from sleuth.store.records.tasks import TaskStore
from tests import loopback
from tests.api.support import LiveServer, ServerFactory

HOTEL = "What is the hotel limit per night when travelling?"
DRAFT = "scope-draft"  # an uncurated second context: visible to the limited key, unlike acme


@pytest.fixture
def secured(make_server: ServerFactory) -> LiveServer:
    return make_server(auth=True)


@pytest.fixture
def draft(sample_home: tuple[Home, CompileReport]) -> Iterator[ContextDir]:
    home, _ = sample_home
    ctx = home.create(DRAFT)
    try:
        yield ctx
    finally:
        shutil.rmtree(ctx.root)


def key(
    server: LiveServer, name: str, role: str = "query", contexts: list[str] | None = None
) -> dict[str, str]:
    _, secret = KeyStore.for_db(server.state.db).create(name, role, contexts=contexts)
    return {"Api-Key": secret}


def ask(server: LiveServer, headers: dict[str, str], **body: Any) -> httpx.Response:
    body.setdefault("scope", ["acme"])
    body.setdefault("retrieval_only", True)  # no sandbox, no model: fast, and a trace all the same
    return server.client.post("/api/query", json=body, headers=headers)


def code_of(response: httpx.Response) -> tuple[int, str | None]:
    body = response.json() if response.headers.get("content-type") == "application/json" else {}
    return response.status_code, body.get("code")


def tool_envelope(result: CallToolResult) -> dict[str, Any]:
    assert result.is_error and isinstance(result.content[0], TextContent), result.content
    envelope: dict[str, Any] = json.loads(result.content[0].text)
    return envelope


def tool_value(result: CallToolResult) -> Any:
    assert not result.is_error and isinstance(result.content[0], TextContent), result.content
    return json.loads(result.content[0].text)


def test_a_query_key_sees_only_its_own_sessions_queries_and_traces(secured: LiveServer) -> None:
    admin, alice, bob = key(secured, "ops", "admin"), key(secured, "alice"), key(secured, "bob")
    admins = ask(secured, admin, ask=HOTEL).json()
    alices = ask(secured, alice, ask=HOTEL).json()
    assert admins["status"] == alices["status"] == "completed"
    theirs = (admins, alices)

    def listed(headers: dict[str, str]) -> list[str]:
        return [s["id"] for s in secured.client.get("/api/sessions", headers=headers).json()["sessions"]]

    assert listed(bob) == []
    assert listed(alice) == [alices["session_id"]]
    assert listed(admin) == [alices["session_id"], admins["session_id"]]  # an admin sees all

    client = secured.client
    for query in theirs:
        session_id, query_id = query["session_id"], query["id"]
        for response in (
            client.get(f"/api/sessions/{session_id}", headers=bob),
            client.delete(f"/api/sessions/{session_id}", headers=bob),
            ask(secured, bob, ask="more", session_id=session_id),
        ):
            assert code_of(response) == (404, "session_not_found"), response.text
            assert response.json()["message"] == f"no session {session_id!r}"  # as for a missing one
        for response in (
            client.get(f"/api/queries/{query_id}", headers=bob),
            client.get(f"/api/queries/{query_id}/trace", headers=bob),
            client.get(f"/api/queries/{query_id}/events", headers=bob),
            client.post(f"/api/queries/{query_id}/cancel", headers=bob),
            client.post(f"/api/queries/{query_id}/feedback", json={"rating": "down"}, headers=bob),
            ask(secured, bob, ask="more", previous_query_id=query_id),
        ):
            assert code_of(response) == (404, "query_not_found"), response.text
    replay = client.post(
        f"/api/queries/{admins['id']}/replay", headers={**alice, "X-Pinecone-Api-Version": "unstable"}
    )
    assert replay.status_code == 403  # replay stays an admin route

    # Nothing of theirs was touched: the admin's turn is still there, unrated, for its owner and the admin.
    kept = client.get(f"/api/queries/{admins['id']}", headers=admin)
    assert kept.status_code == 200 and kept.json()["feedback"] is None
    assert client.get(f"/api/sessions/{admins['session_id']}", headers=admin).status_code == 200
    assert client.get(f"/api/queries/{alices['id']}", headers=alice).status_code == 200
    assert client.get(f"/api/queries/{alices['id']}/trace", headers=admin).status_code == 200
    assert client.get(f"/api/sessions/{alices['session_id']}", headers=admin).json()["created_by"] == "alice"
    # Its owner continues and deletes it.
    again = ask(secured, alice, ask="And meals?", previous_query_id=alices["id"])
    assert again.status_code == 200 and again.json()["session_id"] == alices["session_id"]
    assert client.delete(f"/api/sessions/{alices['session_id']}", headers=alice).json() == {"deleted": True}
    assert listed(admin) == [admins["session_id"]]

    async def main() -> None:  # the MCP `get_query` tool applies the same rule
        http = httpx2.AsyncClient(headers=bob, timeout=30)
        async with http, Client(streamable_http_client(f"{secured.url}/mcp", http_client=http)) as mcp:
            hidden = tool_envelope(await mcp.call_tool("get_query", {"query_id": admins["id"]}))
            assert hidden == {"message": f"no query {admins['id']!r}", "code": "query_not_found"}

    anyio.run(main)


def test_a_key_limited_to_contexts_sees_no_other(secured: LiveServer, draft: ContextDir) -> None:
    state = secured.state
    acme_id, draft_id = state.home.find("acme").info().id, draft.info().id
    admin = key(secured, "ops", "admin")
    narrow = key(secured, "narrow", contexts=[draft_id])
    client = secured.client

    def get(path: str, headers: dict[str, str] = narrow) -> httpx.Response:
        return client.get(path, headers=headers)

    assert [c["slug"] for c in get("/api/contexts").json()] == [DRAFT]
    token = client.post("/api/auth/login", headers=narrow).json()["token"]  # its tokens are as narrow
    assert [c["slug"] for c in get("/api/contexts", {"Authorization": f"Bearer {token}"}).json()] == [DRAFT]
    assert {c["slug"] for c in get("/api/contexts", admin).json()} == {"acme", DRAFT}
    assert get(f"/api/contexts/{DRAFT}").status_code == 200
    assert get(f"/api/contexts/{DRAFT}/knowledge/list").status_code == 200
    for name in ("acme", acme_id):
        for path in (
            "",
            "/manifest",
            "/tasks/stats",
            "/source/list",
            "/source/stats",
            "/source/read/policies/travel.md",
            "/curate",
            "/knowledge/list",
            "/knowledge/stats",
            "/knowledge/read/index.md",
        ):
            response = get(f"/api/contexts/{name}{path}")
            assert code_of(response) == (404, "context_not_found"), (path, response.text)
            assert response.json()["message"] == f"no context {name!r}"
        assert get(f"/api/contexts/{name}", admin).status_code == 200
        # Absent comes before the role's 403: the key cannot even learn that acme exists.
        changed = client.put(f"/api/contexts/{name}", json={"name": "x"}, headers=narrow)
        assert code_of(changed) == (404, "context_not_found")
        turn = ask(secured, narrow, ask=HOTEL, scope=[name])
        assert (
            code_of(turn) == (404, "context_not_found") and turn.json()["message"] == f"no context {name!r}"
        )
        streamed = ask(secured, narrow, ask=HOTEL, scope=[DRAFT, name], stream=True)
        assert code_of(streamed) == (404, "context_not_found")
    assert code_of(ask(secured, narrow, ask=HOTEL, scope=[DRAFT])) == (409, "context_not_curated")  # visible

    # A task of acme is absent too.
    tasks = TaskStore(state.db.database)
    try:
        task = tasks.create(
            "curate", context_id=acme_id, context_slug="acme", created_by="ops", state="completed"
        )
    finally:
        tasks.close()
    assert code_of(get(f"/api/tasks/{task['id']}")) == (404, "task_not_found")
    assert get(f"/api/tasks/{task['id']}", admin).status_code == 200
    listed = [t["id"] for t in get("/api/tasks").json()["items"]]
    assert task["id"] not in listed
    assert get("/api/tasks?context=acme").json()["items"] == []
    assert task["id"] in [t["id"] for t in get("/api/tasks", admin).json()["items"]]

    # Its own session over acme (opened before the list existed, say) is invisible with its turns.
    session = state.db.create_session(["acme"], "before", created_by="narrow")
    query_id = new_id("qry")
    state.db.insert_query({"id": query_id, "session_id": session["id"], "status": "completed", "created": 1})
    assert get("/api/sessions").json() == {"sessions": []}
    assert code_of(get(f"/api/sessions/{session['id']}")) == (404, "session_not_found")
    assert code_of(client.delete(f"/api/sessions/{session['id']}", headers=narrow)) == (
        404,
        "session_not_found",
    )
    for path in ("", "/trace", "/events"):
        assert code_of(get(f"/api/queries/{query_id}{path}")) == (404, "query_not_found"), path
    assert get(f"/api/queries/{query_id}", admin).status_code == 200

    async def main() -> None:
        http = httpx2.AsyncClient(headers=narrow, timeout=30)
        async with http, Client(streamable_http_client(f"{secured.url}/mcp", http_client=http)) as mcp:
            assert [c["slug"] for c in tool_value(await mcp.call_tool("list_contexts", {}))] == [DRAFT]
            for tool, arguments in (
                ("search_source", {"context": "acme", "query": "hotel"}),
                ("search_knowledge", {"context": acme_id, "query": "hotel"}),
                ("list_tables", {"context": "acme"}),
                ("query_context", {"context": "acme", "question": HOTEL}),
            ):
                refused = tool_envelope(await mcp.call_tool(tool, arguments))
                assert refused["code"] == "context_not_found", (tool, refused)
            visible = tool_envelope(await mcp.call_tool("list_tables", {"context": DRAFT}))
            assert visible["code"] == "context_not_curated"
            hidden = tool_envelope(await mcp.call_tool("get_query", {"query_id": query_id}))
            assert hidden["code"] == "query_not_found"
        http = httpx2.AsyncClient(headers=admin, timeout=30)
        async with http, Client(streamable_http_client(f"{secured.url}/mcp", http_client=http)) as mcp:
            assert tool_value(await mcp.call_tool("search_source", {"context": "acme", "query": "hotel"}))

    anyio.run(main)


def test_mcp_refuses_with_the_envelope_and_credentials_first(secured: LiveServer) -> None:
    url = f"{secured.url}/mcp"
    message = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}
    for headers in ({"Accept": "text/html"}, {"Accept": "text/html", "Api-Key": "slk_nope"}):
        refused = loopback.post(url, json=message, headers=headers, timeout=5)
        assert code_of(refused) == (401, "unauthenticated"), refused.text
        assert refused.headers["WWW-Authenticate"] == "Bearer"
    agent = key(secured, "agent")
    ok = {"Accept": "application/json, text/event-stream", **agent}
    cases: list[tuple[httpx.Response, int, str]] = [
        (
            loopback.post(url, json=message, headers={**agent, "Accept": "text/html"}, timeout=5),
            406,
            "not_acceptable",
        ),
        (
            loopback.post(
                url, content=json.dumps(message), headers={**ok, "Content-Type": "text/plain"}, timeout=5
            ),
            415,
            "unsupported_media_type",
        ),
        (loopback.get(url, headers=ok, timeout=5), 405, "method_not_allowed"),  # it used to hang, idle
        (loopback.delete(url, headers=ok, timeout=5), 405, "method_not_allowed"),
    ]
    for response, status, code in cases:
        assert code_of(response) == (status, code), response.text
        assert response.json()["message"] and set(response.json()) == {"message", "code"}
        assert response.headers["X-Pinecone-Api-Version"] == "2026-07"
    assert cases[2][0].headers["Allow"] == "POST"
    listed = loopback.post(url, json=message, headers=ok, timeout=30)
    assert listed.status_code == 200 and listed.json()["result"]["tools"]
