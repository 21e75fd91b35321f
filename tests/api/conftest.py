"""A real Sleuth API server on 127.0.0.1 (uvicorn in a thread) over the compiled sample corpus, and an
httpx client for it. Tests talk HTTP; nothing is called in-process."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from sleuth.compile.pipeline import CompileReport
from sleuth.models.scripted import ScriptItem
from sleuth.sandbox import SandboxHost
from sleuth.store.contexts.home import Home
from tests.api.support import LiveServer, ServerFactory, Stop, launch, unique_slug


@pytest.fixture(scope="session")
def api_host() -> Iterator[SandboxHost]:
    with SandboxHost() as host:
        yield host


@pytest.fixture
def make_server(
    sample_home: tuple[Home, CompileReport], api_host: SandboxHost, tmp_path: Path
) -> Iterator[ServerFactory]:
    """`make_server(replies=None, **settings)` → a started server over the shared sample home."""
    home, _ = sample_home
    stops: list[Stop] = []

    def factory(replies: list[ScriptItem] | None = None, **settings: object) -> LiveServer:
        server, stop = launch(home, api_host, tmp_path, replies, **settings)
        stops.append(stop)
        return server

    yield factory
    for stop in stops:
        stop()


@pytest.fixture
def client(make_server: ServerFactory) -> httpx.Client:
    return make_server().client


@pytest.fixture
def context(client: httpx.Client) -> Iterator[str]:
    """A fresh empty context, deleted afterwards (the shared sample `acme` is never touched)."""
    slug = unique_slug()
    created = client.post("/api/contexts", json={"slug": slug, "name": "Test context"})
    assert created.status_code == 200, created.text
    yield slug
    client.delete(f"/api/contexts/{slug}")
