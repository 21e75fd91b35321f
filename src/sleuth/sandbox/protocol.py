"""The sandbox wire protocol (sandbox.md §4): one JSON object per line over an AF_UNIX socket.

JSON only, never pickle. A line longer than `MAX_LINE` or one that is not a JSON object is a
`ProtocolError`: the host then kills the sandbox rather than trying to make sense of it.
"""

from __future__ import annotations

import json
import socket
from typing import Any

MAX_LINE = 16 * 1024 * 1024


class ProtocolError(Exception):
    pass


def encode(message: dict[str, Any]) -> bytes:
    data = json.dumps(message, ensure_ascii=False, separators=(",", ":")).encode("utf-8") + b"\n"
    if len(data) > MAX_LINE:
        raise ProtocolError(f"message of {len(data)} bytes exceeds the {MAX_LINE}-byte line limit")
    return data


def send(sock: socket.socket, message: dict[str, Any]) -> None:
    sock.sendall(encode(message))


class LineReader:
    """Splits a byte stream into JSON messages; `feed` returns the complete ones."""

    def __init__(self) -> None:
        self._buffer = bytearray()

    def feed(self, data: bytes) -> list[dict[str, Any]]:
        self._buffer.extend(data)
        messages: list[dict[str, Any]] = []
        while True:
            end = self._buffer.find(b"\n")
            if end == -1:
                if len(self._buffer) > MAX_LINE:
                    raise ProtocolError("line exceeds the 16 MiB limit")
                return messages
            line = bytes(self._buffer[:end])
            del self._buffer[: end + 1]
            if len(line) > MAX_LINE:
                raise ProtocolError("line exceeds the 16 MiB limit")
            try:
                message = json.loads(line)
            except (UnicodeDecodeError, json.JSONDecodeError) as exc:
                raise ProtocolError(f"malformed line: {exc}") from None
            if not isinstance(message, dict) or not isinstance(message.get("t"), str):
                raise ProtocolError("a message must be a JSON object with a string field 't'")
            messages.append(message)


def recv_one(sock: socket.socket, reader: LineReader, pending: list[dict[str, Any]]) -> dict[str, Any]:
    """Block until one message is available (EOF is a `ProtocolError`)."""
    while not pending:
        data = sock.recv(1 << 16)
        if not data:
            raise ProtocolError("channel closed")
        pending.extend(reader.feed(data))
    return pending.pop(0)
