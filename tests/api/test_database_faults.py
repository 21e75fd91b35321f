"""PostgreSQL restarted under running work (issue 42): a `sleuth serve` and a `sleuth worker` over a
PostgreSQL cluster of this module's own, stopped and started again while a turn and then a curate run.

Before, every write of the running work raised during the outage, the work was dropped though its worker
lived, and 30 s later it was failed as lost; a curate's advisory lock vanished with its connection and
its unlock failed the curate after it had published; the worker took no new job until its longest one
ended. Now the worker's writes wait for the database
(`store.outage`), its leases are renewed once it is back (and no process fails another's work as lost
until it has seen the database for a whole lease), and the curate lock is a leased row that outlives
the restart.

The model is the one double: an OpenAI-compatible HTTP server on 127.0.0.1 (`tests/models/slow.py`) whose
steps run code that sleeps and whose extraction replies come slowly, so a turn and a curate are still
running when the database goes away.
"""

from __future__ import annotations

import os
import shutil
import time
from collections.abc import Iterator
from typing import Any

import pytest

from sleuth.compile.pipeline import CompileReport
from sleuth.store.contexts.home import Home
from sleuth.store.records.tasks import TaskStore
from tests import loopback
from tests.api.support import upload
from tests.cluster import Cluster
from tests.models.slow import NOTES_MANIFEST, SlowModel, catalog_entry, notes
from tests.models.wire import Canned, wire_server
from tests.postgres import Postgres, throwaway_postgres

MODEL = "test/slow"
#: A curate's extraction calls take this long: it is still running after the restart and the turn.
EXTRACTION_S = 3.0
OUTAGE_S = 4.0  # longer than the worker's 3 s lease: the leases run out by the database's clock


@pytest.fixture(scope="module")
def own_postgres() -> Iterator[Postgres]:
    """A cluster of this module's own: it is stopped and started again."""
    with throwaway_postgres() as server:
        yield server


@pytest.fixture(scope="module")
def cluster(
    own_postgres: Postgres, sample_home: tuple[Home, CompileReport], tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Cluster]:
    root = tmp_path_factory.mktemp("faults")
    home = root / "home"
    shutil.copytree(sample_home[0].root, home)
    with wire_server(
        Canned(500, {"error": {"message": "unused"}}), "/v1", SlowModel(1.0, EXTRACTION_S)
    ) as llm:
        (home / "config.toml").write_text(
            'default = "sleuth/offline"\n\n' + catalog_entry(llm.url, MODEL),
            encoding="utf-8",
        )
        url = own_postgres.create_database("faults")
        env = {k: v for k, v in os.environ.items() if not k.startswith("SLEUTH_")}
        env.update({"SLEUTH_HOME": str(home), "SLEUTH_DATABASE_URL": url, "SLEUTH_WORKER_HEARTBEAT_S": "1"})
        (root / "logs").mkdir()
        cluster = Cluster(url, home, env, logs=root / "logs")
        try:
            cluster.start_server()
            cluster.start_worker()
            yield cluster
        finally:
            cluster.close()


def _restart(postgres: Postgres) -> None:
    postgres.stop("fast")  # every acknowledged commit kept, as a real restart does
    time.sleep(OUTAGE_S)
    postgres.start()


def _read(url: str, timeout_s: float = 180) -> dict[str, Any]:
    """GET `url` until it answers 200 (a 503 `database_unavailable` while the database is away)."""
    deadline = time.monotonic() + timeout_s
    while True:
        answer = loopback.get(url, timeout=30)
        if answer.status_code == 200:
            found: dict[str, Any] = answer.json()
            return found
        assert answer.status_code == 503, answer.text
        assert answer.json()["code"] == "database_unavailable", answer.text
        assert time.monotonic() < deadline, f"{url} still unavailable"
        time.sleep(0.3)


def _post(url: str, body: dict[str, Any], timeout_s: float = 120) -> dict[str, Any]:
    """POST until the server answers other than 503 (the database coming back)."""
    deadline = time.monotonic() + timeout_s
    while True:
        answer = loopback.post(url, json=body, timeout=120)
        if answer.status_code != 503:
            assert answer.status_code == 200, answer.text
            found: dict[str, Any] = answer.json()
            return found
        assert time.monotonic() < deadline, answer.text
        time.sleep(0.3)


def _ended(url: str, states: tuple[str, ...], timeout_s: float = 240) -> dict[str, Any]:
    deadline = time.monotonic() + timeout_s
    while True:
        found = _read(url)
        if found.get("status", found.get("state")) in states:
            return found
        assert time.monotonic() < deadline, f"still {found.get('status', found.get('state'))}: {found}"
        time.sleep(0.3)


def test_a_turn_running_when_postgresql_restarts_completes(cluster: Cluster, own_postgres: Postgres) -> None:
    base = cluster.servers[0]
    ask = {"ask": "Wait a few steps.", "scope": ["acme"], "model": MODEL, "max_steps": 4, "background": True}
    query_id = loopback.post(f"{base}/api/query", json=ask, timeout=60).json()["id"]
    deadline = time.monotonic() + 60
    while not _read(f"{base}/api/queries/{query_id}").get("steps"):  # running, a step in
        assert time.monotonic() < deadline, "the turn did not start"
        time.sleep(0.1)
    _restart(own_postgres)
    done = _ended(f"{base}/api/queries/{query_id}", ("completed", "failed", "cancelled"))
    assert done["status"] == "completed", done
    events = loopback.get(f"{base}/api/queries/{query_id}/events", timeout=30).text
    assert "response.completed" in events


def test_a_curate_running_when_postgresql_restarts_publishes_once(
    cluster: Cluster, own_postgres: Postgres
) -> None:
    """Eight notes whose model takes 3 s a call: the curate is still running at the restart, and after
    the turn asked once the database is back."""
    base = cluster.servers[0]
    with loopback.client(base_url=base, timeout=60) as client:
        made = {"slug": "restarted", "name": "Restarted", "manifest": NOTES_MANIFEST}
        client.post("/api/contexts", json=made).raise_for_status()
        for name, text in notes(8, seed=5).items():
            assert upload(client, "restarted", name, text.encode()).status_code == 200
        task_id = client.post("/api/contexts/restarted/curate", json={"model": MODEL}).json()["task_id"]
    deadline = time.monotonic() + 60
    while _read(f"{base}/api/tasks/{task_id}")["state"] != "running":
        assert time.monotonic() < deadline, "the curate did not start"
        time.sleep(0.1)
    _restart(own_postgres)
    asked = {"ask": "How many days a week can employees work remotely?", "scope": ["acme"]}
    answer = _post(f"{base}/api/query", asked)  # the worker takes new jobs beside the curate at once
    assert answer["status"] == "completed", answer
    (worker,) = cluster.workers
    with cluster.db() as db:
        holder, _ = db.holder(answer["id"])
    assert worker.poll() is None and cluster.worker_pid(holder) == worker.pid  # the same process ran it
    assert _read(f"{base}/api/tasks/{task_id}")["state"] == "running"  # it did not wait for the curate
    done = _ended(f"{base}/api/tasks/{task_id}", ("completed", "failed", "cancelled"))
    assert done["state"] == "completed", done
    version = done["output"]["live_version"]
    context = _read(f"{base}/api/contexts/restarted")
    assert version and context["live_version"] == version
    with TaskStore(cluster.database_url) as tasks:
        row = tasks.get(task_id)
    assert row is not None and row["attempts"] == 1, row  # run once, not begun again as lost
    versions = sorted(p.name for p in (cluster.home / "contexts" / context["id"] / "versions").iterdir())
    assert versions == [version], versions  # one version built and published, no half-built other
