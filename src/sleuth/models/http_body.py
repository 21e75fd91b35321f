"""A model server's response body, read under a byte cap as it arrives (issue 40, item 10).

The provider SDKs read a whole body before handing it over, so a hostile or broken endpoint answering
100 MB made the process hold 100 MB (and 1.4 GB once parsed) before any screen saw it. Both adapters
give their SDK an HTTP client whose response hook swaps the body's stream for one that counts raw
bytes as they come off the socket and stops at `MAX_BODY_BYTES`: a declared `Content-Length` over it is
refused before a byte is read, and a compressed body is decoded here, one gzip or deflate layer with
zlib asked for no more than the cap allows, so a small bomb cannot grow past it either (stacked or
other encodings are refused; `Accept-Encoding` offers only these two).

The hook works on the SDK's own HTTP package (`httpx`, or the `httpx2` fork newer SDKs use), found
from the response it is given, so no HTTP package is imported here.
"""

from __future__ import annotations

import contextlib
import functools
import importlib
import zlib
from collections.abc import Iterator
from typing import Any

from sleuth.models.base import ModelError

#: The largest body read from a model server, in raw bytes and again decoded. A reply is screened at
#: 512 KiB of text (`compile.extraction.client.MAX_REPLY_BYTES`); the JSON around it, escapes (a
#: `\uXXXX` is 6 bytes for one character) and tool calls fit in 8 times that.
MAX_BODY_BYTES = 4 * 1024 * 1024
#: The encodings offered, each decoded here under the cap.
ACCEPT_ENCODING = "gzip, deflate"
_DECODED = frozenset({"gzip", "x-gzip", "deflate"})


class BodyRefused(ModelError):
    """A model server's response body over `MAX_BODY_BYTES`, or in an encoding not read under it. Not
    retryable: the same endpoint answers the same way."""


def capped_http_client(client_class: Any, model_id: str, cap: int = MAX_BODY_BYTES) -> Any:
    """An instance of the SDK's `DefaultHttpxClient` (its timeouts, pool and redirect defaults) whose
    every response body is read under `cap`."""

    def offer(request: Any) -> None:
        request.headers["accept-encoding"] = ACCEPT_ENCODING

    def bound(response: Any) -> None:
        cap_body(response, model_id, cap)

    return _closing(client_class)(event_hooks={"request": [offer], "response": [bound]})


@functools.cache
def _closing(client_class: type) -> type:
    """`client_class` closing its pooled connections when dropped, as the SDK's own default client
    does (a client handed to the SDK is the caller's to close, and a model is never closed)."""

    class Closing(client_class):  # type: ignore[misc]
        def __del__(self) -> None:
            if self.is_closed:
                return
            with contextlib.suppress(Exception):  # at interpreter exit the pool may be gone already
                self.close()

    return Closing


def cap_body(response: Any, model_id: str, cap: int = MAX_BODY_BYTES) -> None:
    """Replace `response`'s stream (not read yet) by one that stops at `cap` bytes, raw and decoded;
    `BodyRefused` at once when the headers already say it is over, or encoded in a way not read here."""
    declared = response.headers.get("content-length", "").strip()
    if declared.isdigit() and int(declared) > cap:
        raise BodyRefused(f"{model_id}: the response body is {int(declared):,} bytes, over {cap:,}: refused")
    encodings = [
        e.strip().lower()
        for e in response.headers.get_list("content-encoding", split_commas=True)
        if e.strip().lower() not in ("", "identity")
    ]
    if len(encodings) > 1 or (encodings and encodings[0] not in _DECODED):
        shown = ", ".join(encodings)[:80]
        raise BodyRefused(f"{model_id}: the response is encoded as {shown!r}: only one gzip or deflate layer")
    http = importlib.import_module(type(response).__module__.partition(".")[0])
    response.stream = _stream_class(http.SyncByteStream)(response.stream, model_id, cap, bool(encodings))
    if encodings:  # decoded here, under the cap: the HTTP package must not decode it again
        del response.headers["content-encoding"]


@functools.cache
def _stream_class(base: type) -> type:
    """A `SyncByteStream` of the SDK's HTTP package (its client reads only those) that caps another."""

    class CappedStream(base):  # type: ignore[misc]
        def __init__(self, raw: Any, model_id: str, cap: int, compressed: bool) -> None:
            self._raw = raw
            self._model_id = model_id
            self._cap = cap
            # gzip or zlib-wrapped deflate, told apart by their headers (32 + window bits)
            self._zlib = zlib.decompressobj(32 + zlib.MAX_WBITS) if compressed else None

        def __iter__(self) -> Iterator[bytes]:
            received = produced = 0
            for chunk in self._raw:
                received += len(chunk)
                if received > self._cap:
                    raise self._over("")
                if self._zlib is None:
                    yield chunk
                    continue
                data = chunk
                while data:
                    try:
                        piece = self._zlib.decompress(data, self._cap - produced + 1)
                    except zlib.error as exc:
                        raise BodyRefused(
                            f"{self._model_id}: the compressed body is broken ({exc})"
                        ) from None
                    produced += len(piece)
                    if produced > self._cap:
                        raise self._over(" decoded")
                    yield piece
                    data = self._zlib.unconsumed_tail
            if self._zlib is not None:
                rest = self._zlib.flush(self._cap - produced + 1)
                if produced + len(rest) > self._cap:
                    raise self._over(" decoded")
                yield rest

        def _over(self, how: str) -> BodyRefused:
            return BodyRefused(
                f"{self._model_id}: the response body is over {self._cap:,} bytes{how}: refused"
            )

        def close(self) -> None:
            self._raw.close()

    return CappedStream
