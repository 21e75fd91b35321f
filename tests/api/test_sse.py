"""Server-sent events (spec/api.md §9.3), parsed from the raw bytes on the wire: headers, frame format, the
event order of a turn, `Last-Event-ID` resume, live following with keep-alives, and disconnects."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import httpx
import pytest

from sleuth.api import sse
from sleuth.models.scripted import code
from tests.api.query_support import (
    HOTEL,
    REMOTE_REPLIES,
    SCRIPTED,
    SLOW_STEP,
    scripted_server,
    step_running,
    terminal,
    wait_for,
)
from tests.api.support import ServerFactory

ONE_SECOND_STEP = code("import time\ntime.sleep(1)\nprint('done')", "Wait a second")


@dataclass
class Frame:
    id: int | None
    event: str | None
    data: dict[str, Any] | None
    comment: bool
    raw: str


def frames(lines: Iterator[str]) -> Iterator[Frame]:
    """Frames from the raw lines of a stream (a blank line ends a frame)."""
    block: list[str] = []
    for line in lines:
        if line != "":
            block.append(line)
            continue
        if not block:
            continue
        fields: dict[str, str] = {}
        comment = all(item.startswith(":") for item in block)
        for item in block:
            if item.startswith(":"):
                continue
            name, _, value = item.partition(": ")
            assert name not in fields, f"field {name} repeated in one frame: {block}"
            fields[name] = value
        data = json.loads(fields["data"]) if "data" in fields else None
        yield Frame(
            int(fields["id"]) if "id" in fields else None,
            fields.get("event"),
            data,
            comment,
            "\n".join(block),
        )
        block = []
    assert not block, f"the stream ended inside a frame: {block}"


def read_stream(response: httpx.Response) -> list[Frame]:
    return list(frames(response.iter_lines()))


def check_sse_headers(response: httpx.Response, query_id: str | None = None) -> None:
    assert response.status_code == 200
    assert response.headers["content-type"] == "text/event-stream"
    assert response.headers["cache-control"] == "no-cache"
    assert response.headers["x-accel-buffering"] == "no"
    assert response.headers["x-pinecone-api-version"] == "2026-07"
    if query_id is not None:
        assert response.headers["x-sleuth-query-id"] == query_id


def check_turn_frames(got: list[Frame], status: str = "completed") -> dict[str, Any]:
    """The order of §9.3 and the frame rules; returns the final Query."""
    events = [f for f in got if not f.comment]
    *numbered, last = events
    assert [f.id for f in numbered] == list(range(1, len(numbered) + 1))
    assert last.id is None and last.event == "query" and last.data is not None
    query_id = last.data["id"]
    for frame in numbered:
        assert frame.data is not None and frame.data["type"] == frame.event
        assert frame.data["query_id"] == query_id and "seq" not in frame.data
        assert "\n" not in frame.raw.split("data: ", 1)[1]  # one line of JSON
    types = [f.event for f in numbered]
    assert types[0] == "response.created" and numbered[0].data == {
        "query_id": query_id,
        "type": "response.created",
        "session_id": last.data["session_id"],
    }
    steps = [f.data for f in numbered if f.event == "response.step" and f.data is not None]
    for step_id in dict.fromkeys(s["step_id"] for s in steps):
        statuses = [s["status"] for s in steps if s["step_id"] == step_id]
        assert statuses[0] == "running" and statuses[-1] in ("completed", "failed")
    tail = [t for t in types if t != "response.step"][1:]
    if status == "completed":
        assert tail == [
            "response.output_text.delta",
            "response.turn_rollup",
            "response.synthesis",
            "response.trace",
            "response.completed",
        ]
    else:
        assert tail == ["response.turn_rollup", "response.trace", f"response.{status}"]
    first_tail = types.index(tail[0])
    assert all(t == "response.step" for t in types[1:first_tail])  # steps come before the rest
    assert last.data["status"] == status
    return last.data


def test_stream_true_follows_the_turn_in_order(make_server: ServerFactory) -> None:
    server = make_server()
    with server.client.stream(
        "POST", "/api/query", json={"ask": HOTEL, "scope": ["acme"], "stream": True}
    ) as response:
        query_id = response.headers["x-sleuth-query-id"]
        check_sse_headers(response, query_id)
        got = read_stream(response)
    query = check_turn_frames(got)
    assert query["id"] == query_id and "$220" in query["output"][0]["content"][0]["text"]
    delta = next(f for f in got if f.event == "response.output_text.delta")
    assert delta.data is not None and delta.data["delta"] == query["output"][0]["content"][0]["text"]
    trace = next(f for f in got if f.event == "response.trace")
    assert trace.data is not None and trace.data["trace_ref"] == f"trace/{query_id}"
    assert query == server.client.get(f"/api/queries/{query_id}").json()
    # the stored events are what was streamed
    stored = server.state.db.events(query_id)
    assert [e["type"] for e in stored] == [f.event for f in got if f.id is not None]


def test_stream_with_a_scripted_model(make_server: ServerFactory) -> None:
    server = scripted_server(make_server, list(REMOTE_REPLIES))
    body = {"ask": "How many remote days?", "scope": ["acme"], "model": SCRIPTED, "stream": True}
    with server.client.stream("POST", "/api/query", json=body) as response:
        got = read_stream(response)
    query = check_turn_frames(got)
    steps = [f.data for f in got if f.event == "response.step" and f.data is not None]
    assert [s["status"] for s in steps] == ["running", "completed"]
    assert (
        steps[0]["commentary"] == "Search the remote-work policy" and steps[0]["code"]["language"] == "python"
    )
    assert steps[1]["fns"] == ["search_source"] and steps[1]["output_chars"] > 0
    assert query["citations"]


def test_rejected_stream_is_a_json_error(make_server: ServerFactory) -> None:
    server = make_server()
    response = server.client.post("/api/query", json={"ask": "q", "stream": True})
    assert response.status_code == 400 and response.headers["content-type"].startswith("application/json")
    assert response.json()["code"] == "scope_required"


def test_events_replay_and_resume_with_last_event_id(make_server: ServerFactory) -> None:
    server = make_server()
    query = server.client.post("/api/query", json={"ask": HOTEL, "scope": ["acme"]}).json()
    url = f"/api/queries/{query['id']}/events"
    with server.client.stream("GET", url) as response:
        check_sse_headers(response, query["id"])
        everything = read_stream(response)
    check_turn_frames(everything)
    with server.client.stream("GET", url, headers={"Last-Event-ID": "3"}) as response:
        resumed = read_stream(response)
    assert [f.id for f in resumed[:-1]] == [f.id for f in everything[2:-1]]  # inclusive: from id 3
    assert [f.raw for f in resumed[:-1]] == [f.raw for f in everything[2:-1]]
    assert resumed[-1].event == "query" and resumed[-1].id is None
    with server.client.stream("GET", url, headers={"Last-Event-ID": "999"}) as response:
        past_the_end = read_stream(response)
    assert [f.event for f in past_the_end] == ["query"]
    bad = server.client.get(url, headers={"Last-Event-ID": "abc"})
    assert bad.status_code == 400 and bad.json()["field"] == "Last-Event-ID"
    unstable = server.client.get(url, headers={"X-Pinecone-Api-Version": "unstable"})
    assert unstable.headers["x-pinecone-api-version"] == "unstable"


def test_out_of_range_last_event_id_is_400_before_the_stream(make_server: ServerFactory) -> None:
    """Event ids are SQLite integers: an id outside 0..2**63-1 is refused in the envelope before the
    stream starts (it used to answer 200 and then abort the stream with an OverflowError)."""
    server = make_server()
    query = server.client.post("/api/query", json={"ask": HOTEL, "scope": ["acme"]}).json()
    url = f"/api/queries/{query['id']}/events"
    for value in ("999999999999999999999999", str(2**63), "-1", "9" * 5000):
        response = server.client.get(url, headers={"Last-Event-ID": value})
        assert response.status_code == 400, (value[:30], response.status_code)
        assert response.headers["content-type"].startswith("application/json")
        assert response.json()["code"] == "invalid_request" and response.json()["field"] == "Last-Event-ID"
    for value in (str(2**63 - 1), "0"):
        with server.client.stream("GET", url, headers={"Last-Event-ID": value}) as response:
            assert response.status_code == 200
            frames = read_stream(response)
        assert frames[-1].event == "query"


def test_events_follow_a_running_turn_with_keep_alives(
    make_server: ServerFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sse, "KEEPALIVE_S", 0.3)
    # a 3 s step: the stream still waits live for it when a loaded machine opens it a second or two late
    server = scripted_server(make_server, [SLOW_STEP, "No answer was found."])
    query = server.client.post(
        "/api/query", json={"ask": "slow", "scope": ["acme"], "model": SCRIPTED, "background": True}
    ).json()
    wait_for(server, query["id"], step_running)
    began = time.monotonic()
    with server.client.stream("GET", f"/api/queries/{query['id']}/events") as response:
        got = read_stream(response)
    assert time.monotonic() - began > 0.5  # it waited for the turn, live
    keep_alives = [f for f in got if f.comment]
    assert keep_alives and all(f.raw == ": keep-alive" for f in keep_alives)
    check_turn_frames(got)


def test_a_dropped_stream_does_not_stop_the_turn(make_server: ServerFactory) -> None:
    server = scripted_server(make_server, [ONE_SECOND_STEP, "No answer was found."])
    body = {"ask": "slow", "scope": ["acme"], "model": SCRIPTED, "stream": True}
    with server.client.stream("POST", "/api/query", json=body) as response:
        query_id = response.headers["x-sleuth-query-id"]
        first = next(frames(response.iter_lines()))
        assert first.id == 1 and first.event == "response.created"
    # the connection is closed; the turn goes on and can still be followed
    done = wait_for(server, query_id, terminal)
    assert done["status"] == "completed" and done["steps"][0]["status"] == "completed"


def test_cancelled_turn_streams_its_cancellation(make_server: ServerFactory) -> None:
    server = scripted_server(make_server, [SLOW_STEP, "unused"])
    query = server.client.post(
        "/api/query", json={"ask": "slow", "scope": ["acme"], "model": SCRIPTED, "background": True}
    ).json()
    wait_for(server, query["id"], step_running)
    server.client.post(f"/api/queries/{query['id']}/cancel")
    with server.client.stream("GET", f"/api/queries/{query['id']}/events") as response:
        got = read_stream(response)
    final = check_turn_frames(got, "cancelled")
    cancelled = next(f for f in got if f.event == "response.cancelled")
    assert cancelled.data is not None and cancelled.data["error"] == "cancelled by client"
    assert final["error"] == "cancelled by client"
