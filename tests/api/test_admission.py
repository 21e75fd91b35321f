"""Per-key shares of the turn places (issue 22, item 12; spec/api.md §8.1 "Capacity"), over real HTTP: a
query key past its share gets `429 key_turn_limit` while another key is still admitted; admin keys and
no-auth mode are held only to the server's total."""

from __future__ import annotations

from typing import Any

import httpx

from sleuth.models.scripted import code
from sleuth.store.records.keys import KeyStore
from tests.api.query_support import HOTEL, SCRIPTED, scripted_server
from tests.api.support import LiveServer, ServerFactory

HOLD = code("import time\ntime.sleep(120)\nprint('done')", "Hold the worker")  # cancelled, never waited for


def key(server: LiveServer, name: str, role: str = "query") -> dict[str, str]:
    _, secret = KeyStore.for_db(server.state.db).create(name, role)
    return {"Api-Key": secret}


def ask(server: LiveServer, headers: dict[str, str], **body: Any) -> httpx.Response:
    """A background turn; retrieval-only unless a model is named (it then queues behind the held worker)."""
    body = {"scope": ["acme"], "ask": HOTEL, "background": True, **body}
    body.setdefault("retrieval_only", "model" not in body)
    return server.client.post("/api/query", json=body, headers=headers)


def status_and_code(response: httpx.Response) -> tuple[int, str | None]:
    return response.status_code, response.json().get("code")


def test_a_key_past_its_share_gets_429_while_another_key_is_admitted(make_server: ServerFactory) -> None:
    # 1 worker + 3 queued = 4 places; a query key may hold 1 of them.
    server = scripted_server(
        make_server, [HOLD], auth=True, max_concurrent_turns=1, max_queued_turns=3, max_turns_per_key=1
    )
    alice, bob, ops = key(server, "alice"), key(server, "bob"), key(server, "ops", "admin")
    held = ask(server, alice, model=SCRIPTED)  # holds the one worker until cancelled
    assert held.status_code == 202, held.text

    over = ask(server, alice)
    assert status_and_code(over) == (429, "key_turn_limit")
    assert over.json()["limit"] == 1 and int(over.headers["Retry-After"]) > 0
    assert "share" in over.json()["message"]
    admitted = ask(server, bob)  # queued behind alice's turn: another key still gets a place
    assert admitted.status_code == 202, admitted.text
    assert status_and_code(ask(server, bob)) == (429, "key_turn_limit")

    # An admin is held only to the total: it takes the last two places, then the server is full.
    assert [ask(server, ops).status_code for _ in range(2)] == [202, 202]
    assert status_and_code(ask(server, ops)) == (429, "too_many_queries")

    ended = server.client.post(f"/api/queries/{held.json()['id']}/cancel", headers=ops)
    assert ended.status_code == 200 and ended.json()["status"] == "cancelled"


def test_no_auth_mode_keeps_the_whole_capacity(make_server: ServerFactory) -> None:
    """No-auth mode is one user: a share would only cut its capacity, so it has none."""
    server = scripted_server(
        make_server, [HOLD], max_concurrent_turns=1, max_queued_turns=2, max_turns_per_key=1
    )
    held = ask(server, {}, model=SCRIPTED)
    assert held.status_code == 202, held.text
    assert [ask(server, {}).status_code for _ in range(2)] == [202, 202]
    assert status_and_code(ask(server, {})) == (429, "too_many_queries")
    assert server.client.post(f"/api/queries/{held.json()['id']}/cancel").status_code == 200
