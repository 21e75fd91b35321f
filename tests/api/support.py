"""Helpers the API tests share (a live server on 127.0.0.1 and its factory type); the fixtures
that use them are in `conftest.py`, which tests never import."""

from __future__ import annotations

import io
import threading
import time
import uuid
import zipfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import uvicorn
from fastapi import FastAPI

from sleuth.agent.turn import Runtime
from sleuth.api import create_app
from sleuth.models.base import ModelConfig
from sleuth.models.scripted import ScriptedModel, ScriptItem
from sleuth.sandbox import SandboxHost
from sleuth.server.state import Server
from sleuth.store.contexts.home import Home
from sleuth.store.records.server_db import ServerDB
from tests import loopback
from tests.ports import free_port


@dataclass
class LiveServer:
    url: str
    state: Server
    client: httpx.Client
    scripted: ScriptedModel
    app: FastAPI


ServerFactory = Callable[..., LiveServer]
Stop = Callable[[], None]


def launch(
    home: Home,
    host: SandboxHost,
    scratch: Path,
    replies: list[ScriptItem] | None = None,
    **settings: object,
) -> tuple[LiveServer, Stop]:
    """A started server over `home`, its database in `scratch`, and the function that stops it.
    Provider models resolve to one scripted model with `replies` (the offline planner needs none)."""
    scripted = ScriptedModel(replies or [])

    def build(config: ModelConfig) -> ScriptedModel:
        return scripted

    db = ServerDB(scratch / "server.sqlite", replay_root=scratch)
    runtime = Runtime(home, db=db, sandbox_host=host, model_factory=build)
    auth = bool(settings.pop("auth", False))
    state = Server(home=home, db=db, runtime=runtime, overrides=settings, auth=auth)
    port = free_port()
    app = create_app(state)
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not server.started:
        if time.monotonic() > deadline:
            raise RuntimeError("the API server did not start")
        time.sleep(0.02)
    url = f"http://127.0.0.1:{port}"
    client = loopback.client(base_url=url, timeout=60)

    def stop() -> None:
        client.close()
        server.should_exit = True
        thread.join(timeout=10)

    return LiveServer(url, state, client, scripted, app), stop


def unique_slug() -> str:
    return f"t-{uuid.uuid4().hex[:12]}"


def wait_task(client: httpx.Client, task_id: str, timeout: float = 60) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    while True:
        task: dict[str, Any] = client.get(f"/api/tasks/{task_id}").json()
        if task["state"] in ("completed", "failed", "cancelled"):
            return task
        assert time.monotonic() < deadline, f"task {task_id} still {task['state']}"
        time.sleep(0.05)


def error(response: httpx.Response, status: int, code: str) -> dict[str, Any]:
    assert response.status_code == status, response.text
    body: dict[str, Any] = response.json()
    assert body["code"] == code, body
    assert isinstance(body["message"], str) and body["message"]
    return body


def make_zip(members: dict[str, bytes], links: tuple[str, ...] = ()) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        for name, data in members.items():
            archive.writestr(name, data)
        for name in links:
            info = zipfile.ZipInfo(name)
            info.external_attr = (0o120777 << 16) & 0xFFFF0000
            archive.writestr(info, "/etc/passwd")
    return buffer.getvalue()


def upload(
    client: httpx.Client, slug: str, name: str, data: bytes, path: str | None = None
) -> httpx.Response:
    params = {} if path is None else {"path": path}
    return client.post(f"/api/contexts/{slug}/import/upload", params=params, files={"file": (name, data)})
