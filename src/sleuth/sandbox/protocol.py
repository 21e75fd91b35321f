"""The sandbox wire protocol (spec/sandbox.md §4): one JSON object per line over an AF_UNIX socket.

JSON only, never pickle. Everything that arrives is hostile until checked, so a line is bounded
*before* it is parsed into objects: its length (`MAX_LINE`), the number of values in it (`MAX_VALUES`:
a 16 MiB line of `[],[],…` would otherwise become eight million lists on the host) and its nesting
depth (`MAX_DEPTH`: the C parser would otherwise recurse until `RecursionError`). A line that breaks
a bound, or is not a JSON object with a string `t`, is a `ProtocolError`; the host then kills the
sandbox rather than trying to make sense of it.

Text is made valid UTF-8 once, here: a lone surrogate (`"\\ud800"`, legal in Python strings and JSON
escapes, illegal in UTF-8) becomes U+FFFD on both ends, so nothing downstream (SQLite, the replay log,
an HTTP response) can choke on it.
"""

from __future__ import annotations

import json
import math
import re
import socket
from typing import Any, NamedTuple

from sleuth.errors import Failed
from sleuth.store.text import clean, clean_text

MAX_LINE = 16 * 1024 * 1024
MAX_VALUES = 250_000
MAX_DEPTH = 64

# A JSON string literal, unrolled so that matching is linear; what is left is the message's skeleton.
_STRING = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"')
_BRACKET = re.compile(rb"[\[\]{}]")
_SURROGATE_ESCAPE = re.compile(rb"\\u[dD][89a-fA-F]")


class ProtocolError(Failed):
    pass


def encode(message: dict[str, Any]) -> bytes:
    text = json.dumps(message, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    try:
        data = text.encode("utf-8") + b"\n"
    except UnicodeEncodeError:  # surrogates can only sit inside string literals: replace them there
        data = clean_text(text).encode("utf-8") + b"\n"
    if len(data) > MAX_LINE:
        raise ProtocolError(f"message of {len(data)} bytes exceeds the {MAX_LINE}-byte line limit")
    return data


def send(sock: socket.socket, message: dict[str, Any]) -> None:
    sock.sendall(encode(message))


def check_shape(line: bytes) -> None:
    """Refuse a line whose parse would cost more than the bounds allow, without parsing it."""
    if len(line) > MAX_LINE:
        raise ProtocolError(f"line of {len(line)} bytes exceeds the {MAX_LINE}-byte limit")
    skeleton = _STRING.sub(b'""', line)
    values = skeleton.count(b",") + skeleton.count(b"[") + skeleton.count(b"{") + 1
    if values > MAX_VALUES:
        raise ProtocolError(f"message holds more than {MAX_VALUES:,} values")
    depth = 0
    for match in _BRACKET.finditer(skeleton):
        depth += 1 if match.group() in (b"[", b"{") else -1
        if depth > MAX_DEPTH:
            raise ProtocolError(f"message nests deeper than {MAX_DEPTH} levels")


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def _finite(text: str) -> float:
    """A JSON number the host can store again: `1e999` parses to infinity, which no JSON document can
    hold, and would fail the turn much later, when it is recorded."""
    value = float(text)
    if not math.isfinite(value):
        raise ValueError(f"number {text[:40]} is out of range")
    return value


def decode(line: bytes) -> dict[str, Any]:
    """One checked line → a message whose strings are all valid UTF-8."""
    check_shape(line)
    try:
        message = json.loads(line, parse_constant=_no_constant, parse_float=_finite)
    except (UnicodeDecodeError, ValueError, RecursionError) as exc:
        raise ProtocolError(f"malformed line: {str(exc)[:200]}") from None
    if not isinstance(message, dict) or not isinstance(message.get("t"), str):
        raise ProtocolError("a message must be a JSON object with a string field 't'")
    if _SURROGATE_ESCAPE.search(line):
        cleaned: dict[str, Any] = clean(message)
        return cleaned
    return message


class Frame(NamedTuple):
    message: dict[str, Any]
    size: int  # bytes on the wire, newline included


class LineReader:
    """Splits a byte stream into checked JSON messages; `feed` returns the complete ones."""

    def __init__(self) -> None:
        self._buffer = bytearray()
        self._scanned = 0  # bytes of the buffer known to hold no newline

    def feed(self, data: bytes) -> list[Frame]:
        self._buffer.extend(data)
        messages: list[Frame] = []
        while True:
            end = self._buffer.find(b"\n", self._scanned)
            if end == -1:
                self._scanned = len(self._buffer)
                if len(self._buffer) > MAX_LINE:
                    raise ProtocolError(f"line exceeds the {MAX_LINE}-byte limit")
                return messages
            line = bytes(self._buffer[:end])
            del self._buffer[: end + 1]
            self._scanned = 0
            messages.append(Frame(decode(line), end + 1))


def recv_one(sock: socket.socket, reader: LineReader, pending: list[dict[str, Any]]) -> dict[str, Any]:
    """Block until one message is available (EOF is a `ProtocolError`)."""
    while not pending:
        data = sock.recv(1 << 16)
        if not data:
            raise ProtocolError("channel closed")
        pending.extend(frame.message for frame in reader.feed(data))
    return pending.pop(0)
