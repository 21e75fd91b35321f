"""A real HTTP server on 127.0.0.1 that answers each POST with the next canned JSON response and
records what it was sent: the provider adapters are tested against their wire formats, not mocks."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass
class Canned:
    status: int = 200
    body: Any = None
    delay_s: float = 0.0
    headers: dict[str, str] = field(default_factory=dict)


@dataclass
class Recorded:
    path: str
    headers: dict[str, str]
    body: dict[str, Any]


@dataclass
class WireServer:
    url: str = ""
    responses: list[Canned] = field(default_factory=list)
    requests: list[Recorded] = field(default_factory=list)


@contextmanager
def wire_server(
    fallback: Canned, path: str = "", respond: Callable[[dict[str, Any]], Canned] | None = None
) -> Iterator[WireServer]:
    """Serve until the block ends; `fallback` answers when no canned response is left, or `respond`
    builds each answer from the request body (for callers whose requests arrive in any order)."""
    wire = WireServer()

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            length = int(self.headers.get("content-length") or 0)
            body = json.loads(self.rfile.read(length) or b"{}")
            wire.requests.append(Recorded(self.path, {k.lower(): v for k, v in self.headers.items()}, body))
            if wire.responses:
                canned = wire.responses.pop(0)
            else:
                canned = respond(body) if respond is not None else fallback
            if canned.delay_s:
                time.sleep(canned.delay_s)
            payload = json.dumps(canned.body).encode()
            try:
                self.send_response(canned.status)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(payload)))
                for name, value in canned.headers.items():
                    self.send_header(name, value)
                self.end_headers()
                self.wfile.write(payload)
            except OSError:
                pass  # the client gave up (timeout test)

        def log_message(self, format: str, *args: Any) -> None:
            pass

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    httpd.daemon_threads = True
    httpd.block_on_close = False
    thread = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True)
    thread.start()
    wire.url = f"http://127.0.0.1:{httpd.server_address[1]}{path}"
    try:
        yield wire
    finally:
        httpd.shutdown()
        httpd.server_close()


def openai_completion(
    content: str | None = "hello",
    tool_calls: list[dict[str, Any]] | None = None,
    finish_reason: str = "stop",
    usage: dict[str, Any] | None = None,
    model: str = "served-model",
) -> dict[str, Any]:
    """A chat completion as an OpenAI-compatible server returns it: one choice, its message, usage."""
    message: dict[str, Any] = {"role": "assistant", "content": content}
    if tool_calls is not None:
        message["tool_calls"] = tool_calls
    return {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "created": 1,
        "model": model,
        "choices": [{"index": 0, "message": message, "finish_reason": finish_reason}],
        "usage": usage or {"prompt_tokens": 12, "completion_tokens": 3, "total_tokens": 15},
    }
