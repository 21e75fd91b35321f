"""Server-sent events of a turn (spec/api.md §9.3): the stored events replayed from a `seq`, then followed
live until the terminal event, then one `query` frame (no `id:`) with the full Query, then the end.

Events come from the server database, never from the turn's thread: the turn stores each event before
announcing it (`EventHub` in this process, NOTIFY across processes), so a stream started late, resumed
with `Last-Event-ID` on any server, or following a turn queued behind others sees the same frames in
the same order. A missed wake-up costs at most `POLL_S`. A stream that waits writes a
`: keep-alive` comment every `KEEPALIVE_S` seconds. Disconnecting ends the stream, never the turn.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator, Callable
from typing import Any

from fastapi.responses import StreamingResponse
from starlette.concurrency import run_in_threadpool

from sleuth.api.errors import ApiError
from sleuth.server.turns import EventHub
from sleuth.store.records.rows import QueryDocument
from sleuth.store.records.server_db import ServerDB

KEEPALIVE_S = 15.0  # spec/api.md §9.3; tests lower it
POLL_S = 0.5  # a read without a wake-up, in case one is missed
TERMINAL_EVENTS = frozenset({"response.completed", "response.failed", "response.cancelled"})
MAX_EVENT_ID = 2**63 - 1  # event ids are SQLite integers


def _json(value: Any) -> str:
    """One line of JSON: newlines inside strings are escaped, so a frame's `data:` is one line."""
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def event_frame(event: dict[str, Any]) -> str:
    data = {k: v for k, v in event.items() if k != "seq"}
    return f"id: {event['seq']}\nevent: {event['type']}\ndata: {_json(data)}\n\n"


def query_frame(query: QueryDocument) -> str:
    return f"event: query\ndata: {_json(query)}\n\n"


KEEPALIVE_FRAME = ": keep-alive\n\n"


def follow(
    db: ServerDB,
    hub: EventHub,
    query_id: str,
    since: int = 1,
    present: Callable[[QueryDocument], QueryDocument] | None = None,
) -> AsyncIterator[str]:
    """Frames of `query_id` from seq `since` (inclusive) until the end. `present(doc)` may rewrite the
    final Query (the API adds what it overlays on stored documents).

    `since` (a client's `Last-Event-ID`) is checked here, when the route calls `follow`, so an id
    outside 0..2**63-1 is `400 invalid_request` before the stream starts, never an error inside it."""
    if not 0 <= since <= MAX_EVENT_ID:
        raise ApiError(
            400,
            "invalid_request",
            f"Last-Event-ID must be an event id from 0 to {MAX_EVENT_ID}",
            field="Last-Event-ID",
        )
    return _follow(db, hub, query_id, since, present)


async def _follow(
    db: ServerDB,
    hub: EventHub,
    query_id: str,
    since: int,
    present: Callable[[QueryDocument], QueryDocument] | None,
) -> AsyncIterator[str]:
    waiter = hub.subscribe(query_id)
    loop = asyncio.get_running_loop()
    next_seq = max(1, since)
    quiet_since = loop.time()
    try:
        while True:
            waiter.clear()
            # Checked before reading: a turn that has ended (on any server) has stored all its events.
            ended = await run_in_threadpool(db.turn_ended, query_id)
            events = await run_in_threadpool(db.events, query_id, next_seq)
            finished = ended
            for event in events:
                yield event_frame(event)
                next_seq = int(event["seq"]) + 1
                finished = finished or event.get("type") in TERMINAL_EVENTS
            if events:
                quiet_since = loop.time()
            if hub.closing.is_set() and not finished:
                return  # the server is stopping: the client resumes from its last id elsewhere
            if finished:
                document = await run_in_threadpool(db.get_query, query_id)
                if document is not None:
                    yield query_frame(present(document) if present is not None else document)
                return
            now = loop.time()
            if now - quiet_since >= KEEPALIVE_S:
                yield KEEPALIVE_FRAME
                quiet_since = now
            timeout = max(0.01, min(POLL_S, quiet_since + KEEPALIVE_S - now))
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(waiter.wait(), timeout=timeout)
    finally:
        hub.unsubscribe(query_id, waiter)


def stream_response(frames: AsyncIterator[str], query_id: str) -> StreamingResponse:
    """The SSE response with the headers of spec/api.md §9.3 (exactly `text/event-stream`, no charset)."""
    return StreamingResponse(
        frames,
        headers={
            "Content-Type": "text/event-stream",
            "Cache-Control": "no-cache",
            "X-Accel-Buffering": "no",
            "X-Sleuth-Query-Id": query_id,
        },
    )
