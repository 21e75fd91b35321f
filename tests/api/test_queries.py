"""`POST /query` and the query routes over a real server (spec/api.md §8–§10.3): the three modes, the
validation order, the unstable-only extension, time-outs, cancel, capacity, feedback, trace and replay."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from sleuth.compile.pipeline import CompileReport
from sleuth.models.scripted import code, final_call
from sleuth.sandbox import Limits, SandboxHost
from sleuth.store.contexts.home import Home
from tests.api.query_support import (
    HOTEL,
    REMOTE_REPLIES,
    SCRIPTED,
    SEARCH_REMOTE,
    SLOW_STEP,
    answer,
    ask,
    scripted_server,
    step_running,
    terminal,
    wait_for,
)
from tests.api.support import ServerFactory, launch

UNSTABLE = {"X-Pinecone-Api-Version": "unstable"}


# ---------------------------------------------------------------------------------- modes
def test_sync_offline_turn_answers_with_citations(make_server: ServerFactory) -> None:
    server = make_server()
    response = ask(server, ask=HOTEL)
    assert response.status_code == 200, response.text
    query = response.json()
    assert query["object"] == "query" and query["status"] == "completed", query["error"]
    assert query["id"].startswith("qry_") and query["session_id"].startswith("ses_")
    assert query["model"] == "sleuth/offline" and query["previous_query_id"] is None
    assert "$220" in answer(query) and query["citations"]
    assert query["rollup"]["stop_reason"] == "final" and query["synthesis"]["method"] == "extractive"
    assert query["trace_ref"] == f"trace/{query['id']}"
    assert server.client.get(f"/api/queries/{query['id']}").json() == query
    trace = server.client.get(f"/api/queries/{query['id']}/trace")
    assert trace.status_code == 200 and trace.json()["query_id"] == query["id"]
    # the legacy alias serves the same routes
    assert server.client.get(f"/api/v0/queries/{query['id']}").json()["id"] == query["id"]


def test_sync_scripted_turn_and_session_continuation(make_server: ServerFactory) -> None:
    server = scripted_server(make_server, [*REMOTE_REPLIES, code(SEARCH_REMOTE), final_call(), "Three [1]."])
    first = ask(server, ask="How many days a week can I work from home?", model=SCRIPTED).json()
    assert first["status"] == "completed", first["error"]
    assert first["model"] == server.scripted.config.id  # the model that answered
    assert answer(first) == "Employees may work remotely up to three days per week [1]."
    assert [s["status"] for s in first["steps"]] == ["completed"]
    second = server.client.post(
        "/api/query", json={"ask": "And per month?", "previous_query_id": first["id"], "scope": ["x"]}
    ).json()
    assert second["status"] == "completed" and second["session_id"] == first["session_id"]
    assert second["previous_query_id"] == first["id"]
    trace = server.client.get(f"/api/queries/{second['id']}/trace").json()
    assert trace["ignored_fields"] == ["scope"]  # pinned on the first turn


def test_background_answers_202_and_polls_to_completion(make_server: ServerFactory) -> None:
    server = make_server()
    response = ask(server, ask=HOTEL, background=True, workflow="query_rag")  # a legacy alias
    assert response.status_code == 202, response.text
    query = response.json()
    assert query["status"] == "in_progress" and query["output"] == [] and query["steps"] == []
    assert response.headers["Location"] == f"/api/queries/{query['id']}"
    done = wait_for(server, query["id"], terminal)
    assert done["status"] == "completed" and "$220" in answer(done)
    assert done["max_steps"] == 2  # search_rag's default


def test_max_tool_output_chars_is_an_unstable_extension(make_server: ServerFactory) -> None:
    server = make_server()
    refused = ask(server, ask=HOTEL, max_tool_output_chars=500)
    assert refused.status_code == 400 and refused.json()["code"] == "requires_unstable_version"
    assert refused.json()["field"] == "max_tool_output_chars"
    accepted = ask(server, ask=HOTEL, max_tool_output_chars=500, headers=UNSTABLE)
    assert accepted.status_code == 200 and accepted.headers["X-Pinecone-Api-Version"] == "unstable"
    query = accepted.json()
    assert query["max_tool_output_chars"] == 500
    assert all(len(step["output"]) <= 700 for step in query["steps"])  # 500 plus the notice


def test_max_tool_output_chars_must_be_a_json_integer_in_range(make_server: ServerFactory) -> None:
    server = make_server()
    for value, shown in [(0, "0"), (100_001, "100001"), (10.5, "10.5"), ("100", '"100"'), (True, "true")]:
        response = ask(server, ask="q", max_tool_output_chars=value, headers=UNSTABLE)
        assert response.status_code == 400
        assert response.json() == {
            "message": f"max_tool_output_chars must be an integer from 1 to 100000; got {shown}",
            "code": "invalid_request",
            "field": "max_tool_output_chars",
        }


# ---------------------------------------------------------------------------------- validation order
ORDER_CASES: list[tuple[str, Any, dict[str, str] | None, int, str, str | None]] = [
    ("malformed JSON", b'{"ask": ', None, 400, "invalid_request", "body"),
    ("not an object", [1, 2], None, 400, "invalid_request", "body"),
    ("NaN is not JSON", b'{"ask": "q", "max_steps": NaN}', None, 400, "invalid_request", "body"),
    ("too deep", b'{"shape": ' + b"[" * 50_000 + b"]" * 50_000 + b"}", None, 400, "invalid_request", "body"),
    ("lone surrogate", b'{"ask": "\\ud800", "scope": ["acme"]}', None, 400, "invalid_request", "ask"),
    ("unknown field before types", {"ask": 5, "max_step": 3}, None, 400, "invalid_request", "max_step"),
    (
        "unknown field before the extension",
        {"ask": "q", "bogus": 1, "max_tool_output_chars": 0},
        None,
        400,
        "invalid_request",
        "bogus",
    ),
    (
        "extension before types",
        {"ask": 5, "max_tool_output_chars": "x"},
        None,
        400,
        "requires_unstable_version",
        "max_tool_output_chars",
    ),
    ("missing ask", {"scope": ["acme"]}, None, 400, "invalid_request", "ask"),
    ("blank ask", {"ask": "   ", "scope": ["acme"]}, None, 400, "invalid_request", "ask"),
    ("wrong type", {"ask": "q", "stream": "yes"}, None, 400, "invalid_request", "stream"),
    ("too many contexts", {"ask": "q", "scope": ["a"] * 11}, None, 400, "invalid_request", "scope"),
    ("unknown workflow", {"ask": "q", "workflow": "groom"}, None, 400, "invalid_request", "workflow"),
    (
        "types before conflicts",
        {"ask": "q", "stream": True, "background": True, "max_steps": 0},
        None,
        400,
        "invalid_request",
        "max_steps",
    ),
    (
        "conflicts before the session",
        {"ask": "q", "stream": True, "background": True, "session_id": "ses_missing"},
        None,
        400,
        "conflicting_options",
        "stream",
    ),
    (
        "shape with retrieval-only",
        {"ask": "q", "scope": ["acme"], "retrieval_only": True, "shape": {"type": "object"}},
        None,
        400,
        "conflicting_options",
        "shape",
    ),
    (
        "chunks_only with artifacts_only",
        {"ask": "q", "chunks_only": True, "artifacts_only": True},
        None,
        400,
        "conflicting_options",
        "chunks_only",
    ),
    (
        "retrieval-only types before conflicts",
        {"ask": "q", "pointers_only": True, "shape": {"type": "object"}, "max_retrieved": 201},
        None,
        400,
        "invalid_request",
        "max_retrieved",
    ),
    (
        "session before scope",
        {"ask": "q", "session_id": "ses_missing", "scope": ["nope"]},
        None,
        404,
        "session_not_found",
        None,
    ),
    (
        "unknown previous query",
        {"ask": "q", "previous_query_id": "qry_missing"},
        None,
        404,
        "query_not_found",
        None,
    ),
    ("no scope", {"ask": "q"}, None, 400, "scope_required", None),
    (
        "scope before model",
        {"ask": "q", "scope": ["nope"], "model": "nope"},
        None,
        404,
        "context_not_found",
        None,
    ),
    (
        "model before shape",
        {"ask": "q", "scope": ["acme"], "model": "nope", "shape": {"type": "object", "oneOf": []}},
        None,
        400,
        "model_unavailable",
        "model",
    ),
    (
        "no model specs over HTTP",
        {"ask": "q", "scope": ["acme"], "model": "openai:gpt-4o"},
        None,
        400,
        "model_unavailable",
        "model",
    ),
    (
        "unsupported shape",
        {"ask": "q", "scope": ["acme"], "shape": {"type": "object", "oneOf": []}},
        None,
        400,
        "invalid_shape",
        None,
    ),
    ("unknown tool", {"ask": "q", "scope": ["acme"], "tools": ["rm_rf"]}, None, 400, "unknown_tool", None),
]


def test_validation_order_and_nothing_is_stored(make_server: ServerFactory) -> None:
    server = make_server()
    for name, body, headers, status, code_, field in ORDER_CASES:
        if isinstance(body, bytes):
            response = server.client.post(
                "/api/query", content=body, headers={"content-type": "application/json", **(headers or {})}
            )
        else:
            response = server.client.post("/api/query", json=body, headers=headers)
        assert response.status_code == status, (name, response.text)
        error = response.json()
        assert error["code"] == code_, (name, error)
        assert isinstance(error["message"], str) and error["message"]
        if field is not None:
            assert error["field"] == field, (name, error)
        # a person's sentence, never the validator's wording (issue 39, item 12)
        assert not any(word in error["message"] for word in ("should", "List ", "String ")), (name, error)
    assert server.client.get("/api/sessions").json() == {"sessions": []}


def test_a_nul_in_a_path_or_a_query_is_a_400(make_server: ServerFactory) -> None:
    """Issue 40, item 11: refused before any route, on every database."""
    client = make_server().client
    for path in (
        "/api/queries/qry_%00x",
        "/api/contexts/acme/source/read/a%00b.md",
        "/api/sessions?limit=1%00",
    ):
        response = client.get(path)
        assert response.status_code == 400 and response.json()["code"] == "invalid_request", path
        assert "NUL" in response.json()["message"]
    # ... and in a JSON string, escaped or split across the body's chunks, on SQLite as on PostgreSQL
    for body in (
        b'{"ask": "hotel\\u0000limit", "scope": ["acme"]}',
        b'{"name": "x\\u0000", "slug": "nul-name"}',
    ):
        response = client.post("/api/query" if b"ask" in body else "/api/contexts", content=body,
                               headers={"content-type": "application/json"})  # fmt: skip
        assert response.status_code == 400 and "NUL" in response.json()["message"], response.text
    assert client.get("/api/contexts/nul-name").status_code == 404

    def chunks() -> Iterator[bytes]:
        yield b'{"ask": "hotel\\u00'
        yield b'00limit", "scope": ["acme"]}'

    split = client.post("/api/query", content=chunks(), headers={"content-type": "application/json"})
    assert split.status_code == 400 and "NUL" in split.json()["message"], split.text
    # the text backslash-u-0000 is not a NUL
    text = client.post("/api/contexts", json={"name": "what is \\u0000?", "slug": "text-not-nul"})
    assert text.status_code == 200 and text.json()["name"] == "what is \\u0000?", text.text
    client.delete("/api/contexts/text-not-nul")


def test_an_empty_scope_is_said_for_people(make_server: ServerFactory) -> None:
    response = make_server().client.post("/api/query", json={"ask": "q", "scope": []})
    assert response.status_code == 400
    assert response.json()["message"] == "scope needs at least one context to answer from (its slug)"


def test_unknown_version_comes_first(make_server: ServerFactory) -> None:
    server = make_server()
    response = server.client.post(
        "/api/query",
        content=b"{",
        headers={"X-Pinecone-Api-Version": "2020-01", "content-type": "application/json"},
    )
    assert response.status_code == 400 and response.json()["code"] == "unsupported_api_version"


# ---------------------------------------------------------------------------------- time cap, cancel
# A step that swallows the sandbox's own step time-out: only the turn's hard cap can end it.
STUBBORN_STEP = code(
    "import time\n"
    "for _ in range(60):\n"
    "    try:\n"
    "        time.sleep(0.5)\n"
    "    except BaseException:\n"
    "        pass\n"
)


def test_a_turn_past_its_time_cap_answers_504(make_server: ServerFactory) -> None:
    server = scripted_server(make_server, [STUBBORN_STEP, "never used"])
    assert ask(server, ask=HOTEL).status_code == 200  # the sandbox is warm: the cap hits inside the step
    began = time.monotonic()
    response = ask(server, ask="slow", model=SCRIPTED, timeout_seconds=2)
    assert time.monotonic() - began < 25  # the 30 s step was killed at the 2 s cap (generous: loaded CI)
    assert response.status_code == 504, response.text
    error = response.json()
    assert error["code"] == "query_timeout" and error["query_id"].startswith("qry_")
    assert error["message"] == "turn timed out after 2 s"
    query = server.client.get(f"/api/queries/{error['query_id']}").json()
    assert query["status"] == "failed" and query["error"] == "turn timed out after 2 s"
    assert query["rollup"]["stop_reason"] == "timeout"
    assert [step["status"] for step in query["steps"]] == ["failed"]
    assert query["steps"][0]["error"]["type"] == "Interrupted"
    assert 1900 <= query["runtime_ms"] < 25_000  # not the 30 s step (generous: loaded CI)
    assert server.client.get(f"/api/queries/{error['query_id']}/trace").status_code == 200


def test_cancel_stops_a_running_turn_and_is_idempotent(make_server: ServerFactory) -> None:
    server = scripted_server(make_server, [code(SEARCH_REMOTE), SLOW_STEP, final_call(), "unused"])
    query = ask(server, ask="remote days", model=SCRIPTED, background=True).json()
    running = wait_for(server, query["id"], lambda q: len(q["steps"]) == 2 and step_running(q))
    assert running["status"] == "in_progress"
    trace = server.client.get(f"/api/queries/{query['id']}/trace")
    assert trace.status_code == 409 and trace.json()["code"] == "query_not_terminal"
    replay = server.client.post(f"/api/queries/{query['id']}/replay", headers=UNSTABLE)
    assert replay.status_code == 409 and replay.json()["code"] == "query_not_terminal"
    cancelled = server.client.post(f"/api/queries/{query['id']}/cancel")
    assert cancelled.status_code == 200
    body = cancelled.json()
    assert body["status"] == "cancelled" and body["error"] == "cancelled by client"
    # The finished step is kept; the sleeping one was killed, not waited for (it would have completed).
    assert [s["status"] for s in body["steps"]] == ["completed", "failed"]
    assert "done" not in (body["steps"][1].get("output") or "")
    assert body["rollup"]["stop_reason"] == "cancelled"
    events = [e["type"] for e in server.state.db.events(query["id"])]
    assert events[-3:] == ["response.turn_rollup", "response.trace", "response.cancelled"]
    assert server.client.get(f"/api/queries/{query['id']}/trace").status_code == 200
    again = server.client.post(f"/api/queries/{query['id']}/cancel")
    assert (
        again.status_code == 200 and again.json() == server.client.get(f"/api/queries/{query['id']}").json()
    )
    assert again.json()["status"] == "cancelled"
    # the session is free again
    follow_up = ask(server, ask=HOTEL, session_id=query["session_id"])
    assert follow_up.status_code == 200


def test_capacity_429_after_session_busy(make_server: ServerFactory) -> None:
    server = scripted_server(make_server, [SLOW_STEP, "unused"], max_concurrent_turns=1, max_queued_turns=0)
    first = ask(server, ask="slow", model=SCRIPTED, background=True)
    assert first.status_code == 202
    query = first.json()
    busy = ask(server, ask="again", session_id=query["session_id"])
    assert busy.status_code == 409 and busy.json()["code"] == "session_busy"  # before capacity
    full = ask(server, ask=HOTEL)
    assert full.status_code == 429 and full.json()["code"] == "too_many_queries"
    assert int(full.headers["Retry-After"]) > 0
    sessions = server.client.get("/api/sessions", params={"queries_active": "true"}).json()
    assert len(sessions["sessions"]) == 1 and sessions["queries_active"] == 1  # the 429 stored nothing
    server.client.post(f"/api/queries/{query['id']}/cancel")
    assert ask(server, ask=HOTEL, background=True).status_code == 202


def test_queued_turn_can_be_cancelled_before_it_runs(make_server: ServerFactory) -> None:
    server = scripted_server(make_server, [SLOW_STEP, "unused"], max_concurrent_turns=1, max_queued_turns=1)
    running = ask(server, ask="slow", model=SCRIPTED, background=True).json()
    queued = ask(server, ask=HOTEL, background=True).json()
    cancelled = server.client.post(f"/api/queries/{queued['id']}/cancel").json()
    # Ended at once, not after the running turn: that one is still running (no wall-clock bound).
    assert server.client.get(f"/api/queries/{running['id']}").json()["status"] == "in_progress"
    assert cancelled["status"] == "cancelled" and cancelled["steps"] == []
    assert [e["type"] for e in server.state.db.events(queued["id"])] == [
        "response.created",
        "response.turn_rollup",
        "response.trace",
        "response.cancelled",
    ]
    assert server.client.get(f"/api/queries/{running['id']}").json()["status"] == "in_progress"
    server.client.post(f"/api/queries/{running['id']}/cancel")
    # its place is free again, and the worker that later picks up the cancelled entry does nothing
    assert ask(server, ask=HOTEL).json()["status"] == "completed"


# ---------------------------------------------------------------------------------- other routes
def test_unknown_query_is_404_on_every_route(make_server: ServerFactory) -> None:
    server = make_server()
    missing = "qry_00000000-0000-7000-8000-000000000000"
    for method, path, body in [
        ("GET", f"/api/queries/{missing}", None),
        ("POST", f"/api/queries/{missing}/cancel", None),
        ("GET", f"/api/queries/{missing}/trace", None),
        ("GET", f"/api/queries/{missing}/events", None),
        ("POST", f"/api/queries/{missing}/feedback", {"rating": "up"}),
    ]:
        response = server.client.request(method, path, json=body)
        assert response.status_code == 404, path
        assert response.json()["code"] == "query_not_found"
        assert response.headers["content-type"].startswith("application/json")
    replay = server.client.post(f"/api/queries/{missing}/replay", headers=UNSTABLE)
    assert replay.status_code == 404 and replay.json()["code"] == "query_not_found"


def test_feedback_is_validated_and_replaced(make_server: ServerFactory) -> None:
    server = make_server()
    query = ask(server, ask=HOTEL).json()
    url = f"/api/queries/{query['id']}/feedback"
    first = server.client.post(url, json={"rating": "up", "comment": "useful"})
    assert first.status_code == 204 and first.content == b""
    assert server.client.get(f"/api/queries/{query['id']}").json()["feedback"] == {
        "rating": "up",
        "comment": "useful",
    }
    assert server.client.post(url, json={"rating": "down"}).status_code == 204
    assert server.client.get(f"/api/queries/{query['id']}").json()["feedback"] == {
        "rating": "down",
        "comment": None,
    }
    for body, field in [
        ({"rating": "meh"}, "rating"),
        ({}, "rating"),
        ({"rating": "up", "comment": "x" * 2001}, "comment"),
        ({"rating": "up", "stars": 5}, "stars"),
    ]:
        response = server.client.post(url, json=body)
        assert response.status_code == 400 and response.json()["code"] == "invalid_request", body
        assert response.json()["field"] == field
    assert server.client.post(url, json={"rating": "up", "comment": "x" * 2000}).status_code == 204


def test_comparison_group_holds_three_turns(make_server: ServerFactory) -> None:
    server = make_server()
    ids = []
    for workflow in ("search", "search_rag", "search_cc"):
        response = ask(server, ask=HOTEL, workflow=workflow, comparison_group="run-1", background=True)
        assert response.status_code == 202
        ids.append(response.json()["id"])
    fourth = ask(server, ask=HOTEL, comparison_group="run-1")
    assert fourth.status_code == 409 and fourth.json()["code"] == "comparison_group_full"
    for query_id in ids:
        wait_for(server, query_id, terminal)
    queries = [server.client.get(f"/api/queries/{i}").json() for i in ids]
    for query in queries:
        assert query["status"] == "completed", query["error"]
        others = {c["query_id"]: c for c in query["comparison"]}
        assert set(others) == set(ids) - {query["id"]}
        assert all(c["model"] == "sleuth/offline" for c in others.values()), (query["id"], others)
    assert {c["workflow"] for c in queries[0]["comparison"]} == {"search_rag", "search_cc"}

    # Groups are stored with the turns: a restarted server still lists them and still refuses a fourth.
    again = make_server()
    assert again.client.get(f"/api/queries/{ids[2]}").json()["comparison"] == queries[2]["comparison"]
    refused = ask(again, ask=HOTEL, comparison_group="run-1")
    assert refused.status_code == 409 and refused.json()["code"] == "comparison_group_full"
    assert ask(again, ask=HOTEL, comparison_group="run-2").json()["comparison"] == []


def test_replay_is_admin_and_unstable_only(make_server: ServerFactory) -> None:
    server = make_server()
    query = ask(server, ask=HOTEL).json()
    refused = server.client.post(f"/api/queries/{query['id']}/replay")
    assert refused.status_code == 400 and refused.json()["code"] == "requires_unstable_version"
    report = server.client.post(f"/api/queries/{query['id']}/replay", headers=UNSTABLE)
    assert report.status_code == 200, report.text
    assert set(report.json()) == {"identical", "steps_compared", "first_difference"}
    assert report.json()["steps_compared"] >= 1


def test_models_catalog_never_shows_keys(make_server: ServerFactory) -> None:
    server = scripted_server(make_server, [])
    response = server.client.get("/api/models")
    assert response.status_code == 200
    catalog = response.json()
    assert catalog["default"] == "sleuth/offline"
    assert {m["id"] for m in catalog["models"]} == {"sleuth/offline", SCRIPTED}
    assert catalog["query_defaults"]["max_steps"] == {"search": 8, "search_cc": 8, "search_rag": 2}
    assert {"id": "minilm-l6-v2-int8", "dim": 384, "available": True} in catalog["embedding_models"]
    assert "sk-test-not-a-real-key" not in json.dumps(catalog)
    assert "api_key" not in json.dumps(catalog)


# ---------------------------------------------------------------------------------- retrieval-only
def hit_kinds(query: dict[str, Any]) -> set[str]:
    return {hit["kind"] for hit in query["output_json"]["hits"]}


def test_retrieval_only_turn_returns_hits(make_server: ServerFactory) -> None:
    server = make_server()
    response = ask(server, ask=HOTEL, retrieval_only=True, max_retrieved=6, max_retrieved_chars=50)
    assert response.status_code == 200, response.text
    query = response.json()
    assert query["status"] == "completed", query["error"]
    hits = query["output_json"]["hits"]
    assert len(hits) == 6 and {h["kind"] for h in hits} == {"chunk", "artifact"}
    assert all(0 < len(h["text"]) <= 50 and h["context"] == "acme" for h in hits)
    assert "$220" in hits[0]["text"] and hits[0]["pages"] == [1]
    assert query["output"] == [] and query["citations"] == [] and query["synthesis"] is None
    assert query["model"] is None and query["usage"]["total_tokens"] == 0
    assert query["rollup"]["stop_reason"] == "retrieval_only" and query["rollup"]["total_hits"] == 12
    [step] = query["steps"]
    assert step["status"] == "completed" and step["fns"][:2] == ["search_source", "search_knowledge"]
    assert server.scripted.calls == []
    trace = server.client.get(f"/api/queries/{query['id']}/trace").json()
    assert trace["rollup"]["stop_reason"] == "retrieval_only" and trace["synthesis"] is None
    # the same turn with `compose: false`, continuing the session
    again = ask(
        server,
        ask=HOTEL,
        compose=False,
        max_retrieved=6,
        max_retrieved_chars=50,
        previous_query_id=query["id"],
    ).json()
    assert again["status"] == "completed" and again["session_id"] == query["session_id"]
    assert again["output_json"] == query["output_json"]


def test_pointers_only_and_narrowed_kinds(make_server: ServerFactory) -> None:
    server = make_server()
    pointers = ask(server, ask=HOTEL, pointers_only=True).json()
    assert pointers["status"] == "completed" and len(pointers["output_json"]["hits"]) == 20
    assert all("text" not in h and h["source"] for h in pointers["output_json"]["hits"])
    assert hit_kinds(ask(server, ask=HOTEL, chunks_only=True, max_retrieved=4).json()) == {"chunk"}
    artifacts = ask(server, ask=HOTEL, artifacts_only=True, pointers_only=True, max_retrieved=200).json()
    assert hit_kinds(artifacts) == {"artifact"}
    assert all("text" not in h for h in artifacts["output_json"]["hits"])


def test_retrieval_only_conflicts_and_ranges(make_server: ServerFactory) -> None:
    server = make_server()
    shape = {"type": "object", "properties": {"x": {"type": "string"}}}
    modes = ({"retrieval_only": True}, {"compose": False}, {"pointers_only": True}, {"chunks_only": True})
    for flags in modes:
        refused = ask(server, ask=HOTEL, shape=shape, **flags)
        assert refused.status_code == 400 and refused.json()["code"] == "conflicting_options", flags
        assert refused.json()["field"] == "shape"
    both = ask(server, ask=HOTEL, chunks_only=True, artifacts_only=True)
    assert both.status_code == 400 and both.json()["code"] == "conflicting_options"
    for name, value in [
        ("max_retrieved", 0),
        ("max_retrieved", 201),
        ("max_retrieved", "5"),
        ("max_retrieved_chars", 0),
        ("max_retrieved_chars", 20_001),
        ("max_retrieved_chars", 10.5),
    ]:
        refused = ask(server, ask=HOTEL, retrieval_only=True, **{name: value})
        error = refused.json()
        assert refused.status_code == 400 and error["code"] == "invalid_request", (name, value)
        assert error["field"] == name and name in error["message"]
    assert ask(server, ask=HOTEL, retrieval_only=True, compose=True).status_code == 200
    assert len(server.client.get("/api/sessions").json()["sessions"]) == 1  # refused turns stored nothing


def test_streamed_retrieval_only_turn(make_server: ServerFactory) -> None:
    server = make_server()
    body = {"ask": HOTEL, "scope": ["acme"], "retrieval_only": True, "stream": True, "max_retrieved": 5}
    events: list[tuple[str, dict[str, Any]]] = []
    with server.client.stream("POST", "/api/query", json=body) as response:
        assert response.status_code == 200
        assert response.headers["content-type"] == "text/event-stream"
        event = ""
        for line in response.iter_lines():
            if line.startswith("event: "):
                event = line.removeprefix("event: ")
            elif line.startswith("data: "):
                events.append((event, json.loads(line.removeprefix("data: "))))
    assert [name for name, _ in events] == [
        "response.created",
        "response.step",
        "response.step",
        "response.turn_rollup",
        "response.trace",
        "response.completed",
        "query",
    ]
    assert [data["status"] for _, data in events[1:3]] == ["running", "completed"]
    assert events[3][1]["stop_reason"] == "retrieval_only"
    final = events[-1][1]
    assert final["status"] == "completed" and len(final["output_json"]["hits"]) == 5
    assert final["synthesis"] is None and final["output"] == []


def test_a_sandbox_that_cannot_start_is_503_but_retrieval_only_still_answers(
    sample_home: tuple[Home, CompileReport], tmp_path: Path
) -> None:
    """A real failure, not a double: four file descriptors are too few for the sandbox to set up."""
    home, _ = sample_home
    with SandboxHost(Limits(nofile=4)) as broken:
        server, stop = launch(home, broken, tmp_path)
        try:
            refused = ask(server, ask=HOTEL)
            assert refused.status_code == 503, refused.text
            assert refused.json()["code"] == "sandbox_unavailable" and "setup" in refused.json()["message"]
            assert server.client.get("/api/sessions").json()["sessions"] == []  # nothing was stored
            hits = ask(server, ask=HOTEL, retrieval_only=True)
            assert hits.status_code == 200 and hits.json()["output_json"]["hits"]
            version = server.client.get("/api/version").json()["sandbox"]
            assert version["ok"] is False and version["missing"] == ["setup"]
        finally:
            stop()


def test_an_offline_follow_up_reads_the_document_the_last_turn_cited(make_server: ServerFactory) -> None:
    """Issue 26, item 8: "And in 2024?" after a question the annual report answered names no document
    and no quantity of its own; the offline planner searches the documents the previous turn cited
    beside the whole scope, so the follow-up is answered from that report again."""
    server = make_server()
    report = "uploads/acme-corpus/reports/annual-report-2025.pdf"
    first = ask(server, ask="What was the operating margin in 2025?").json()
    assert first["status"] == "completed" and report in {c["source"] for c in first["citations"]}
    second = ask(server, ask="And what about research spending?", session_id=first["session_id"]).json()
    assert second["status"] == "completed", second["error"]
    code = second["steps"][0]["code"]["source"]
    assert f"named = [{report!r}" in code and "the previous turn cited" in code
    assert report in {c["source"] for c in second["citations"]}
    assert "$7.7" in answer(second) or "7.7" in answer(second)
    # A question that stands on its own (a document of its own, six words or more) carries nothing.
    third = ask(
        server, ask="What is the hotel limit per night in the travel policy?", session_id=first["session_id"]
    ).json()
    assert "the previous turn cited" not in third["steps"][0]["code"]["source"]
