"""Sessions over HTTP (spec/api.md §10.1): the Session object, list (newest first, limit, queries_active),
read with the turns oldest first, delete (404, 409 while a turn runs), and one turn at a time."""

from __future__ import annotations

import re

from tests.api.query_support import HOTEL, SCRIPTED, SLOW_STEP, ask, scripted_server, step_running, wait_for
from tests.api.support import ServerFactory

RFC3339 = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z$")
SESSION_KEYS = {
    "id",
    "project_id",
    "created_by",
    "scope",
    "title",
    "system_prompt",
    "guardrails",
    "models",
    "tools",
    "workflow",
    "last_query_id",
    "created_at",
    "updated_at",
}


def test_session_object_list_and_read(make_server: ServerFactory) -> None:
    server = make_server()
    assert server.client.get("/api/sessions").json() == {"sessions": []}
    first = ask(
        server, ask=HOTEL, system_prompt="Be brief.", tools=["search_source", "search_knowledge"]
    ).json()
    second = ask(server, ask="And for meals?", previous_query_id=first["id"]).json()
    other = ask(server, ask="  How many   remote days?  ", workflow="search_rag").json()
    assert first["session_id"] == second["session_id"] != other["session_id"]

    listed = server.client.get("/api/sessions").json()
    assert set(listed) == {"sessions"}
    assert [s["id"] for s in listed["sessions"]] == [other["session_id"], first["session_id"]]  # newest first
    session = listed["sessions"][1]
    assert set(session) == SESSION_KEYS
    acme_id = server.state.home.find("acme").info().id
    assert session["scope"] == [acme_id] and acme_id.startswith("ctx_")
    assert session["project_id"] == "local" and session["created_by"] == "local"
    assert session["title"] == HOTEL and session["system_prompt"] == "Be brief."
    assert session["tools"] == ["search_source", "search_knowledge"] and session["models"] == [
        "sleuth/offline"
    ]
    assert session["workflow"] == "search" and session["last_query_id"] == second["id"]
    assert RFC3339.match(session["created_at"]) and RFC3339.match(session["updated_at"])
    assert session["updated_at"] >= session["created_at"]
    assert listed["sessions"][0]["title"] == "How many remote days?"
    assert listed["sessions"][0]["workflow"] == "search_rag"

    assert [s["id"] for s in server.client.get("/api/sessions?limit=1").json()["sessions"]] == [
        other["session_id"]
    ]
    active = server.client.get("/api/sessions", params={"queries_active": "true"}).json()
    assert active["queries_active"] == 0
    for bad in ("0", "201", "x"):
        response = server.client.get(f"/api/sessions?limit={bad}")
        assert response.status_code == 400, bad
        assert response.json()["code"] == "invalid_request" and response.json()["field"] == "limit"

    read = server.client.get(f"/api/sessions/{first['session_id']}").json()
    assert {k: v for k, v in read.items() if k != "queries"} == session
    assert [q["id"] for q in read["queries"]] == [first["id"], second["id"]]  # oldest first
    assert read["queries"][1] == server.client.get(f"/api/queries/{second['id']}").json()
    assert server.client.get(f"/api/v0/sessions/{first['session_id']}").json() == read


def test_unknown_session_is_404(make_server: ServerFactory) -> None:
    server = make_server()
    for method in ("GET", "DELETE"):
        response = server.client.request(method, "/api/sessions/ses_missing")
        assert response.status_code == 404 and response.json()["code"] == "session_not_found"


def test_delete_session_with_its_turns(make_server: ServerFactory) -> None:
    server = make_server()
    query = ask(server, ask=HOTEL).json()
    deleted = server.client.delete(f"/api/sessions/{query['session_id']}")
    assert deleted.status_code == 200 and deleted.json() == {"deleted": True}
    assert server.client.get(f"/api/queries/{query['id']}").status_code == 404
    assert server.client.get(f"/api/queries/{query['id']}/trace").status_code == 404
    assert server.state.db.events(query["id"]) == []
    again = server.client.delete(f"/api/sessions/{query['session_id']}")
    assert again.status_code == 404 and again.json()["code"] == "session_not_found"
    assert server.client.get("/api/sessions").json() == {"sessions": []}


def test_busy_session_refuses_a_second_turn_and_deletion(make_server: ServerFactory) -> None:
    server = scripted_server(make_server, [SLOW_STEP, "unused"])
    query = ask(server, ask="slow", model=SCRIPTED, background=True).json()
    wait_for(server, query["id"], step_running)
    busy = ask(server, ask="again", session_id=query["session_id"])
    assert busy.status_code == 409 and busy.json()["code"] == "session_busy"
    via_previous = ask(server, ask="again", previous_query_id=query["id"])
    assert via_previous.status_code == 409 and via_previous.json()["code"] == "session_busy"
    delete = server.client.delete(f"/api/sessions/{query['session_id']}")
    assert delete.status_code == 409 and delete.json()["code"] == "session_busy"
    active = server.client.get("/api/sessions?queries_active=true").json()
    assert active["queries_active"] == 1
    assert server.client.post(f"/api/queries/{query['id']}/cancel").json()["status"] == "cancelled"
    assert server.client.get("/api/sessions?queries_active=true").json()["queries_active"] == 0
    assert server.client.delete(f"/api/sessions/{query['session_id']}").status_code == 200


def test_previous_query_and_session_id_must_agree(make_server: ServerFactory) -> None:
    server = make_server()
    first = ask(server, ask=HOTEL).json()
    other = ask(server, ask=HOTEL).json()
    response = ask(server, ask="q", previous_query_id=first["id"], session_id=other["session_id"])
    assert response.status_code == 400 and response.json()["code"] == "invalid_request"
    assert response.json()["field"] == "previous_query_id"
    agreeing = ask(server, ask=HOTEL, previous_query_id=first["id"], session_id=first["session_id"])
    assert agreeing.status_code == 200 and agreeing.json()["previous_query_id"] == first["id"]


def test_who_opened_a_session_is_stored_and_survives_a_restart(make_server: ServerFactory) -> None:
    from sleuth.store.records.keys import KeyStore

    server = make_server(auth=True)
    _, secret = KeyStore.for_db(server.state.db).create("alice", "query")
    headers = {"Authorization": f"Bearer {secret}"}
    opened = server.client.post("/api/query", json={"ask": HOTEL, "scope": ["acme"]}, headers=headers).json()
    session_id = opened["session_id"]
    assert server.client.get(f"/api/sessions/{session_id}", headers=headers).json()["created_by"] == "alice"

    again = make_server()  # a new server process over the same server.sqlite
    assert again.client.get(f"/api/sessions/{session_id}").json()["created_by"] == "alice"
    listed = again.client.get("/api/sessions").json()["sessions"]
    assert {s["id"]: s["created_by"] for s in listed}[session_id] == "alice"
