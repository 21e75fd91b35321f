"""HTTP to the suite's own servers on 127.0.0.1: httpx's calls with one TLS context for all of them.

httpx builds a TLS context for every client it makes, `httpx.get` included, by reading the whole CA
bundle (~18 ms of CPU), even for a plain-HTTP loopback URL. The suite's polling loops (`get` every
100 ms until a server answers) made thousands: about 5 % of the suite's CPU went to reading the same
certificates. Nothing here speaks TLS; the context is only there to be built once.
"""

from __future__ import annotations

import ssl
from contextlib import AbstractContextManager
from typing import Any

import httpx

TLS = ssl.create_default_context()


def client(**kwargs: Any) -> httpx.Client:
    return httpx.Client(verify=TLS, **kwargs)


def get(url: str, **kwargs: Any) -> httpx.Response:
    return httpx.get(url, verify=TLS, **kwargs)


def post(url: str, **kwargs: Any) -> httpx.Response:
    return httpx.post(url, verify=TLS, **kwargs)


def delete(url: str, **kwargs: Any) -> httpx.Response:
    return httpx.delete(url, verify=TLS, **kwargs)


def stream(method: str, url: str, **kwargs: Any) -> AbstractContextManager[httpx.Response]:
    return httpx.stream(method, url, verify=TLS, **kwargs)
