"""Helpers for the tests that run turns over the API: a server with a scripted provider model, asking,
polling a turn, and the scripted replies several tests share.
"""

from __future__ import annotations

import time
from typing import Any

import httpx

from sleuth.models.base import ModelConfig
from sleuth.models.scripted import ScriptItem, code, final_call
from tests.api.support import LiveServer, ServerFactory

HOTEL = "What is the hotel limit per night when travelling?"


SCRIPTED = "test/scripted"


SEARCH_REMOTE = (
    "hits = await search_source('how many days per week can employees work remotely', top_k=5)\n"
    "for h in hits[:3]:\n"
    "    print(h.ref, h.name, h.fields['chunk_text'][:300])\n"
)


REMOTE_REPLIES: list[ScriptItem] = [
    code(SEARCH_REMOTE, "Search the remote-work policy"),
    final_call(evidence=["E1"]),
    "Employees may work remotely up to three days per week [1].",
]


SLOW_STEP = code("import time\ntime.sleep(3)\nprint('done')", "Wait")


def scripted_server(make_server: ServerFactory, replies: list[ScriptItem], **settings: object) -> LiveServer:
    """A server whose catalog has `test/scripted`, a provider model answered by the scripted replies."""
    server = make_server(replies, **settings)
    server.state.runtime.catalog.models[SCRIPTED] = ModelConfig(
        id=SCRIPTED, provider="openai", model="scripted", api_key="sk-test-not-a-real-key"
    )
    return server


def ask(server: LiveServer, **body: Any) -> httpx.Response:
    body.setdefault("scope", ["acme"])
    headers = body.pop("headers", None)
    return server.client.post("/api/query", json=body, headers=headers)


def wait_for(server: LiveServer, query_id: str, done: Any, timeout_s: float = 120.0) -> dict[str, Any]:
    """Poll `GET /queries/{id}` until `done(query)` holds."""
    deadline = time.monotonic() + timeout_s
    while True:
        query: dict[str, Any] = server.client.get(f"/api/queries/{query_id}").json()
        if done(query) or time.monotonic() > deadline:
            return query
        time.sleep(0.05)


def terminal(query: dict[str, Any]) -> bool:
    return query["status"] in ("completed", "failed", "cancelled")


def step_running(query: dict[str, Any]) -> bool:
    return any(step["status"] == "running" for step in query["steps"])


def answer(query: dict[str, Any]) -> str:
    return "".join(p["text"] for m in query["output"] for p in m["content"] if p["type"] == "output_text")
