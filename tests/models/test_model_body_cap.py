"""A hostile model endpoint on 127.0.0.1 answering 100 MB (issue 40, item 10): both provider adapters
read a body under `MAX_BODY_BYTES` as it arrives, raw and decoded, and refuse the rest; the server
counts what it managed to send before the client hung up, so "read 100 MB" cannot pass unseen."""

from __future__ import annotations

import json
import resource
import threading
import time
import zlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from sleuth.errors import Unavailable
from sleuth.models.anthropic_messages import AnthropicModel
from sleuth.models.base import CompletionParams, Message, ModelConfig, ModelError
from sleuth.models.http_body import MAX_BODY_BYTES, BodyRefused
from sleuth.models.openai_chat import OpenAIChatModel
from tests.models.wire import openai_completion

HUGE = 100 * 1024 * 1024  # what the review's endpoint answered
CHUNK = 1024 * 1024
#: What the server may get onto the wire before the client stops reading: the cap, plus what the
#: socket buffers on both sides hold (a few MiB on loopback).
SENT_BOUND = MAX_BODY_BYTES + 16 * 1024 * 1024
#: Peak memory a refused body may add (generous; reading 100 MB whole added over 400 MB).
RSS_GROWTH_BOUND = 64 * 1024 * 1024


@dataclass
class Hostile:
    """How the endpoint answers the next POST, and what it sent."""

    mode: str = "chunked"
    sent: list[int] = field(default_factory=list)
    accept_encoding: list[str] = field(default_factory=list)


def _openai_body_parts() -> tuple[bytes, bytes]:
    """A chat completion whose text is the filler between the two parts."""
    whole = json.dumps(openai_completion("@@FILL@@")).encode()
    head, _, tail = whole.partition(b"@@FILL@@")
    return head, tail


def _filler(total: int) -> Iterator[bytes]:
    """`total` bytes of `a`, a chunk at a time: the body is made as it is sent, never held."""
    block = b"a" * CHUNK
    left = total
    while left > 0:
        yield block[: min(CHUNK, left)]
        left -= CHUNK


def _gzip_bomb() -> bytes:
    """A completion of 100 MB of text, gzip-compressed to ~100 KB (built once, a chunk at a time)."""
    head, tail = _openai_body_parts()
    packer = zlib.compressobj(9, zlib.DEFLATED, 16 + zlib.MAX_WBITS)
    out = [packer.compress(head)]
    out += [packer.compress(chunk) for chunk in _filler(HUGE)]
    out += [packer.compress(tail), packer.flush()]
    return b"".join(out)


@pytest.fixture(scope="module")
def bomb() -> bytes:
    return _gzip_bomb()


@pytest.fixture
def endpoint(bomb: bytes) -> Iterator[tuple[str, Hostile]]:
    hostile = Hostile()

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_POST(self) -> None:
            self.rfile.read(int(self.headers.get("content-length") or 0))
            hostile.accept_encoding.append(self.headers.get("accept-encoding", ""))
            sent = 0
            try:
                sent = self._answer(hostile.mode)
            except OSError:  # the client hung up: what it refused is not sent
                pass
            finally:
                hostile.sent.append(sent + getattr(self, "_partial", 0))
                self.close_connection = True

        def _answer(self, mode: str) -> int:
            head, tail = _openai_body_parts()
            self.send_response(200)
            self.send_header("content-type", "application/json")
            if mode in ("gzip", "gzip, gzip", "br"):
                body = bomb if mode == "gzip" else zlib.compress(head + b"x" + tail)
                self.send_header("content-encoding", mode)
                self.send_header("content-length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)
                return len(body)
            if mode == "small-gzip":
                body = zlib.compress(json.dumps(openai_completion("squeezed")).encode())
                self.send_header("content-encoding", "deflate")
                self.send_header("content-length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)
                return len(body)
            parts = [head, *_filler(HUGE), tail]
            if mode == "declared":
                self.send_header("content-length", str(sum(len(p) for p in [head, tail]) + HUGE))
                self.end_headers()
                self._partial = 0
                for part in parts:
                    self.wfile.write(part)
                    self._partial += len(part)
                return 0
            self.send_header("transfer-encoding", "chunked")
            self.end_headers()
            self._partial = 0
            for part in parts:
                self.wfile.write(b"%x\r\n%s\r\n" % (len(part), part))
                self._partial += len(part)
            self.wfile.write(b"0\r\n\r\n")
            return 0

        def log_message(self, format: str, *args: Any) -> None:
            pass

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    httpd.daemon_threads = True
    thread = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}", hostile
    finally:
        httpd.shutdown()
        httpd.server_close()


@pytest.fixture(autouse=True)
def _no_proxy(monkeypatch: pytest.MonkeyPatch) -> None:
    """The SDKs honour proxy variables; these tests talk to 127.0.0.1 only."""
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy"):
        monkeypatch.delenv(name, raising=False)
    for name in ("OPENAI_BASE_URL", "ANTHROPIC_BASE_URL", "ANTHROPIC_AUTH_TOKEN"):
        monkeypatch.delenv(name, raising=False)


def _openai(url: str) -> OpenAIChatModel:
    return OpenAIChatModel(
        ModelConfig(
            id="hostile/openai",
            provider="openai-compatible",
            model="m",
            base_url=f"{url}/v1",
            api_key="sk-test-0123456789",
        )
    )


def _ask(model: OpenAIChatModel | AnthropicModel) -> str:
    return model.complete([Message("user", "hello")], [], CompletionParams(timeout_s=30)).text


def _sent(hostile: Hostile) -> int:
    """What the server got onto the wire, once it has noticed the client hung up."""
    deadline = time.monotonic() + 10
    while not hostile.sent and time.monotonic() < deadline:
        time.sleep(0.01)
    assert hostile.sent, "the server is still sending: the client did not hang up"
    return hostile.sent[0]


def _peak_rss() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # Linux reports KiB


@pytest.mark.parametrize("mode", ["chunked", "declared"])
def test_a_100_mb_body_is_refused_at_the_cap(endpoint: tuple[str, Hostile], mode: str) -> None:
    """Sent without a length (chunked) the body is cut at the cap as it arrives; with a declared length
    over the cap it is refused before a byte of it is read."""
    url, hostile = endpoint
    hostile.mode = mode
    before = _peak_rss()
    with pytest.raises(BodyRefused, match=r"over 4,194,304") as refused:
        _ask(_openai(url))
    assert isinstance(refused.value, ModelError) and isinstance(refused.value, Unavailable)
    assert not refused.value.retryable  # the same endpoint answers the same way: no fallback retry
    assert refused.value.args[0].startswith("hostile/openai: ")
    sent, growth = _sent(hostile), _peak_rss() - before
    assert sent < SENT_BOUND
    assert growth < RSS_GROWTH_BOUND
    assert hostile.accept_encoding == ["gzip, deflate"]  # no encoding offered that is not read capped
    print(f"\n{mode}: {sent / 2**20:.1f} MiB sent of 100 MiB, peak RSS growth {growth / 2**20:.0f} MiB")


def test_a_gzip_bomb_is_decoded_only_up_to_the_cap(endpoint: tuple[str, Hostile], bomb: bytes) -> None:
    """~100 KB on the wire, 100 MB decoded: the decoder is asked for no more than the cap allows."""
    url, hostile = endpoint
    hostile.mode = "gzip"
    assert len(bomb) < 1024 * 1024
    before = _peak_rss()
    with pytest.raises(BodyRefused, match=r"over 4,194,304 bytes decoded"):
        _ask(_openai(url))
    assert _peak_rss() - before < RSS_GROWTH_BOUND


@pytest.mark.parametrize("mode", ["gzip, gzip", "br"])
def test_stacked_or_unread_encodings_are_refused(endpoint: tuple[str, Hostile], mode: str) -> None:
    url, hostile = endpoint
    hostile.mode = mode
    with pytest.raises(BodyRefused, match="only one gzip or deflate layer"):
        _ask(_openai(url))


def test_an_honest_compressed_reply_still_reads(endpoint: tuple[str, Hostile]) -> None:
    url, hostile = endpoint
    hostile.mode = "small-gzip"
    assert _ask(_openai(url)) == "squeezed"


def test_the_anthropic_adapter_caps_its_bodies_too(endpoint: tuple[str, Hostile]) -> None:
    url, hostile = endpoint
    hostile.mode = "chunked"
    model = AnthropicModel(
        ModelConfig(id="hostile/claude", provider="anthropic", model="c", base_url=url, api_key="sk-ant-0123")
    )
    with pytest.raises(BodyRefused, match=r"^hostile/claude: the response body is over"):
        _ask(model)
    assert _sent(hostile) < SENT_BOUND
