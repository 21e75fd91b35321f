"""Operating a deployment: liveness, readiness (database, storage, notifications) and Prometheus metrics,
on the SQLite default and on a PostgreSQL server that goes away and comes back."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
import uvicorn
from prometheus_client.parser import text_string_to_metric_families

from sleuth.api.app import create_app
from sleuth.compile.pipeline import CompileReport
from sleuth.server.build import open_server
from sleuth.store.contexts.home import Home
from tests import loopback
from tests.api.support import ServerFactory
from tests.ports import free_port
from tests.postgres import Postgres, throwaway_postgres


def samples(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


def test_sqlite_server_is_live_ready_and_measured(make_server: ServerFactory) -> None:
    client = make_server().client
    assert client.get("/healthz").text == "ok"
    ready = client.get("/readyz")
    assert ready.status_code == 200 and ready.json() == {"status": "ready", "database": "ok", "home": "ok"}
    asked = client.post(
        "/api/query", json={"ask": "How many days a week can employees work remotely?", "scope": ["acme"]}
    )
    assert asked.json()["status"] == "completed"
    text = client.get("/metrics").text
    found = samples(text)
    assert found[("sleuth_turns", (("phase", "running"),))] == 0, text
    assert found[("sleuth_turns", (("phase", "waiting"),))] == 0
    assert found.get(("sleuth_tasks", (("state", "running"),))) == 0, text
    assert found[("sleuth_turn_duration_seconds_count", ())] >= 1


def test_metrics_need_an_admin_key_when_keys_are_required(make_server: ServerFactory) -> None:
    client = make_server(auth=True).client
    assert client.get("/metrics").status_code == 401
    assert client.get("/readyz").status_code == 200  # probes carry no key


@pytest.fixture(scope="module")
def own_postgres() -> Iterator[Postgres]:
    """A cluster of this module's own: it is stopped and started again (each test starts it again)."""
    with throwaway_postgres() as server:
        yield server


def test_a_server_that_loses_its_database_is_not_ready_until_it_is_back(
    own_postgres: Postgres,
    sample_home: tuple[Home, CompileReport],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("SLEUTH_DATABASE_URL", own_postgres.create_database())
    state = open_server(sample_home[0])
    port = free_port()
    server = uvicorn.Server(uvicorn.Config(create_app(state), host="127.0.0.1", port=port, log_level="error"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    try:
        with loopback.client(base_url=f"http://127.0.0.1:{port}", timeout=30) as client:
            deadline = time.monotonic() + 30
            while True:
                try:
                    ready = client.get("/readyz")
                    if ready.status_code == 200:
                        break
                except httpx.HTTPError:
                    pass
                assert time.monotonic() < deadline, "the server never became ready"
                time.sleep(0.1)
            assert ready.json() == {
                "status": "ready",
                "database": "ok",
                "home": "ok",
                "notifications": "ok",
            }
            assert samples(client.get("/metrics").text)[("sleuth_queue_depth", (("queue", "turns"),))] == 0
            # a NUL PostgreSQL cannot store is the request's fault: 400, never 500 (issue 40, item 11)
            nul = client.post("/api/query", json={"ask": "hotel\u0000limit", "scope": ["acme"]})
            assert nul.status_code == 400 and nul.json()["code"] == "invalid_request", nul.text
            own_postgres.stop()
            down = client.get("/readyz")
            assert down.status_code == 503 and down.json()["database"].startswith("unreachable")
            assert client.get("/healthz").status_code == 200  # alive: not restarted for it
            assert client.get("/metrics").status_code == 503
            # every route says so as a 503 with Retry-After, not a 500 `OperationalError` (issue 40, item 10)
            away = client.get("/api/sessions")
            assert away.status_code == 503 and away.json()["code"] == "database_unavailable", away.text
            assert away.headers["retry-after"] == "5"
            own_postgres.start()
            deadline = time.monotonic() + 60
            while client.get("/readyz").status_code != 200:  # the pool and the listener reconnect
                assert time.monotonic() < deadline, client.get("/readyz").json()
                time.sleep(0.2)
            assert client.get("/api/sessions").status_code == 200
    finally:
        server.should_exit = True
        thread.join(timeout=10)
        state.close()
