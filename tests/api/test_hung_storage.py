"""A storage endpoint that hangs (issue 42): an S3 endpoint on 127.0.0.1 that accepts connections and
never answers. `/readyz` must say so within its deadline instead of hanging for botocore's minutes of
read timeouts and retries (it answered after 180 s before), and a storage call must fail, bounded, not
hang a curate for six minutes."""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator
from pathlib import Path

import boto3
import pytest

from sleuth.server.build import open_server
from sleuth.server.metrics import READY_DEADLINE_S, readiness
from sleuth.store import storage as storage_module
from sleuth.store.storage import S3Storage
from tests.postgres import Postgres


@pytest.fixture
def hung_endpoint() -> Iterator[str]:
    """A TCP server that accepts every connection and never sends a byte."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(64)
    held: list[socket.socket] = []
    stop = threading.Event()

    def accept() -> None:
        listener.settimeout(0.2)
        while not stop.is_set():
            try:
                conn, _ = listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            held.append(conn)

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{listener.getsockname()[1]}"
    finally:
        stop.set()
        thread.join(timeout=5)
        for conn in held:
            conn.close()
        listener.close()


def _aws(monkeypatch: pytest.MonkeyPatch, endpoint: str) -> None:
    # boto3's default session keeps the credentials it first resolved: one made here, with these test
    # keys, must not outlive the test and sign another test's requests (moto refuses unknown keys)
    monkeypatch.setattr(boto3, "DEFAULT_SESSION", None)
    monkeypatch.setenv("AWS_ENDPOINT_URL", endpoint)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "test")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "test")
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")


def test_readyz_says_a_hung_storage_does_not_answer_within_its_deadline(
    postgres: Postgres, hung_endpoint: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _aws(monkeypatch, hung_endpoint)
    monkeypatch.setenv("SLEUTH_DATABASE_URL", postgres.create_database())
    monkeypatch.setenv("SLEUTH_STORAGE_URL", "s3://hung-bucket")
    from sleuth.settings import current
    from sleuth.store.contexts.replica import open_home

    state = open_server(open_home(tmp_path / "home", current()))
    try:
        checks = readiness(state)
    finally:
        state.close()
    assert checks["database"] == "ok" and checks["home"] == "ok", checks
    assert checks["storage"] == f"no answer within {READY_DEADLINE_S:.0f} s", checks


def test_a_call_to_a_hung_storage_fails_instead_of_hanging(
    hung_endpoint: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Bounded by the client's read timeout and attempts (`STORAGE_TIMEOUT_S` × `STORAGE_ATTEMPTS`, 30 s
    by default; 1 s each here)."""
    _aws(monkeypatch, hung_endpoint)
    monkeypatch.setattr(storage_module, "STORAGE_TIMEOUT_S", 1.0)
    storage = S3Storage("hung-bucket")
    with pytest.raises(Exception) as raised:
        storage.get_bytes("anything")
    assert "timeout" in type(raised.value).__name__.lower() or "timed out" in str(raised.value).lower()
