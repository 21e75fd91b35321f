"""Operating workers (issue 42, item 7): the deployment's gauges name workers as their records do and
count only those that beat; a turn cancelled while queued leaves the queue depth; a worker answers a
liveness probe; log lines carry their time; a worker's drain is bounded by `task_stop_timeout_s` plus
`DRAIN_MARGIN_S`, and the turns it stops say so."""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import uvicorn
from prometheus_client import CollectorRegistry
from sqlalchemy import text

from sleuth.api.app import create_app
from sleuth.compile.pipeline import CompileReport
from sleuth.server.build import open_server, worker_options
from sleuth.server.liveness import Liveness, serve
from sleuth.server.queue import DRAIN_MARGIN_S, WORKER_STOPPING
from sleuth.server.state import Server
from sleuth.settings import Settings
from sleuth.store.contexts.home import Home
from sleuth.store.records.tasks import TaskStore
from tests import loopback
from tests.api.test_operations import samples
from tests.cluster import Cluster
from tests.models.wire import Canned, WireServer, openai_completion, wire_server
from tests.ports import free_port
from tests.postgres import Postgres

ASK = {"ask": "How many days a week can employees work remotely?", "scope": ["acme"]}
STAMPED = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z (INFO|WARNING|ERROR):", re.MULTILINE)


@pytest.fixture
def served(
    postgres: Postgres, sample_home: tuple[Home, CompileReport], monkeypatch: pytest.MonkeyPatch
) -> Iterator[tuple[Server, httpx.Client]]:
    """An API server on PostgreSQL in this process, with no worker: turns stay queued."""
    monkeypatch.setenv("SLEUTH_DATABASE_URL", postgres.create_database())
    state = open_server(sample_home[0])
    port = free_port()
    server = uvicorn.Server(uvicorn.Config(create_app(state), host="127.0.0.1", port=port, log_level="error"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    try:
        with loopback.client(base_url=f"http://127.0.0.1:{port}", timeout=60) as client:
            deadline = time.monotonic() + 30
            while not server.started:
                assert time.monotonic() < deadline, "the server never started"
                time.sleep(0.05)
            yield state, client
    finally:
        server.should_exit = True
        thread.join(timeout=10)
        state.close()


def test_the_gauges_name_workers_count_live_ones_and_skip_ended_jobs(
    served: tuple[Server, httpx.Client],
) -> None:
    state, client = served
    database = state.db.database
    with database.writing() as conn:  # two workers as procrastinate registers them: one beats, one died
        live = conn.execute(text("INSERT INTO procrastinate_workers DEFAULT VALUES RETURNING id")).scalar()
        dead = conn.execute(
            text(
                "INSERT INTO procrastinate_workers (last_heartbeat) "
                "VALUES (now() - interval '1 hour') RETURNING id"
            )
        ).scalar()
        conn.execute(
            text("INSERT INTO sleuth_queue_workers (worker_id, name) VALUES (:id, 'worker:host:1:abc')"),
            {"id": live},
        )
    asked = client.post("/api/query", json={**ASK, "background": True})
    assert asked.status_code == 202, asked.text
    waiting = TaskStore(database).create("curate", context_id="c", context_slug="acme", created_by="local")
    assert state.queue is not None
    state.queue.defer_task(waiting["id"])

    found = samples(client.get("/metrics").text)
    assert found[("sleuth_workers", ())] == 1  # the dead one is still registered, but silent
    ages = {
        dict(labels)["worker"]: value
        for (name, labels), value in found.items()
        if name.endswith("age_seconds")
    }
    assert set(ages) == {"worker:host:1:abc", f"procrastinate:{dead}"}, ages
    assert ages[f"procrastinate:{dead}"] > 3000 > ages["worker:host:1:abc"]
    assert found[("sleuth_queue_depth", (("queue", "turns"),))] == 1
    assert found[("sleuth_queue_depth", (("queue", "tasks"),))] == 1

    assert client.post(f"/api/queries/{asked.json()['id']}/cancel").json()["status"] == "cancelled"
    assert client.delete(f"/api/tasks/{waiting['id']}").json()["state"] == "cancelled"
    with database.reading() as conn:  # their jobs are still on the queue; a worker would skip them
        assert (
            conn.execute(text("SELECT count(*) FROM procrastinate_jobs WHERE status = 'todo'")).scalar() == 2
        )
    found = samples(client.get("/metrics").text)
    assert found[("sleuth_queue_depth", (("queue", "turns"),))] == 0
    assert found[("sleuth_queue_depth", (("queue", "tasks"),))] == 0


def test_a_drain_past_its_margin_records_what_still_runs(served: tuple[Server, httpx.Client]) -> None:
    """`JobsHere.abandon`, what `sleuth worker` does before it exits when jobs outlast its drain: a
    turn ends `cancelled` saying why, a curate goes back to the queue for another worker."""
    state, client = served
    runner, _options = worker_options(state)
    assert state.turns is not None and state.tasks is not None and state.tasks.worker is not None
    asked = client.post("/api/query", json={**ASK, "background": True}).json()
    assert state.db.hold_turn(asked["id"], state.turns.worker, 30.0)  # this process runs it
    store = state.tasks.store
    curate = store.create("curate", context_id="c", context_slug="acme", created_by="local")
    assert store.start(curate["id"], state.tasks.worker, 30.0)
    with runner._running(runner._turns_here, asked["id"]), runner._running(runner._tasks_here, curate["id"]):
        runner.abandon()
    turn = client.get(f"/api/queries/{asked['id']}").json()
    assert turn["status"] == "cancelled" and turn["error"] == WORKER_STOPPING, turn
    task = client.get(f"/api/tasks/{curate['id']}").json()
    assert task["state"] == "scheduled" and task["attempts"] == 1, task
    found = samples(client.get("/metrics").text)
    assert found[("sleuth_queue_depth", (("queue", "tasks"),))] == 1  # queued again for another worker
    assert found[("sleuth_queue_depth", (("queue", "turns"),))] == 0


class _Beats:
    def __init__(self, last_beat: float | None) -> None:
        self.last_beat = last_beat


def test_liveness_answers_503_naming_the_part_that_stopped_beating() -> None:
    liveness = Liveness(heartbeat_s=1000.0)
    liveness.watch("turn heartbeat", _Beats(time.monotonic()))
    port = free_port()
    server = serve(port, "127.0.0.1", CollectorRegistry(), liveness)
    try:
        base = f"http://127.0.0.1:{port}"
        assert loopback.get(f"{base}/healthz").text == "ok"
        liveness.watch("task heartbeat", _Beats(time.monotonic() - 5000))  # hung for 5,000 s
        late = loopback.get(f"{base}/healthz")
        silent = re.fullmatch(r"late: task heartbeat \((\d+) s since its last beat\)", late.text)
        assert late.status_code == 503 and silent and int(silent[1]) >= 5000, (
            late.text
        )  # a loaded machine adds
        assert loopback.get(f"{base}/metrics").status_code == 200  # the metrics are served beside it
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture(scope="module")
def slow_model() -> Iterator[tuple[WireServer, dict[str, float]]]:
    """An OpenAI-compatible model that takes `delay["s"]` seconds to answer."""
    delay = {"s": 0.0}

    def answer(body: dict[str, Any]) -> Canned:
        return Canned(200, openai_completion("Three days a week."), delay_s=delay["s"])

    with wire_server(Canned(500, {"error": {"message": "unused"}}), "/v1", answer) as wire:
        yield wire, delay


def _slow_turn(base: str, wire: WireServer) -> str:
    """Ask the slow model, and return once the worker has asked it (the turn is running)."""
    before = len(wire.requests)
    asked = loopback.post(
        f"{base}/api/query", json={**ASK, "model": "slow/m", "background": True}, timeout=60
    )
    assert asked.status_code == 202, asked.text
    deadline = time.monotonic() + 120
    while len(wire.requests) == before:
        assert time.monotonic() < deadline, "the worker never asked the model"
        time.sleep(0.05)
    return str(asked.json()["id"])


def _stop(worker: subprocess.Popen[bytes]) -> int:
    worker.send_signal(signal.SIGTERM)
    return worker.wait(timeout=120)  # the model would keep it for 600 s


def test_a_worker_is_named_live_and_drains_within_its_bound(
    postgres: Postgres,
    sample_home: tuple[Home, CompileReport],
    slow_model: tuple[WireServer, dict[str, float]],
    tmp_path: Path,
) -> None:
    wire, delay = slow_model
    home = tmp_path / "home"
    shutil.copytree(sample_home[0].root, home)
    (home / "config.toml").write_text(
        f'[models."slow/m"]\nprovider = "openai-compatible"\nmodel = "m"\nbase_url = "{wire.url}"\n'
        'api_key = "sk-test-not-a-real-key"\ntool_protocol = "text"\n',
        encoding="utf-8",
    )
    url = postgres.create_database()
    env = {k: v for k, v in os.environ.items() if not k.startswith("SLEUTH_")}
    env |= {
        "SLEUTH_HOME": str(home),
        "SLEUTH_DATABASE_URL": url,
        "SLEUTH_WORKER_HEARTBEAT_S": "0.5",
        "SLEUTH_TASK_STOP_TIMEOUT_S": "1",
    }
    (tmp_path / "logs").mkdir()
    cluster = Cluster(url, home, env, logs=tmp_path / "logs")
    try:
        base = cluster.start_server()
        metrics_port = free_port()
        worker = cluster.start_worker("--metrics-port", str(metrics_port))
        log = Path(cluster.files[-1].name)
        assert STAMPED.search(log.read_text()), log.read_text()[:500]  # every line starts with its time
        assert loopback.get(f"http://127.0.0.1:{metrics_port}/healthz", timeout=10).text == "ok"

        answer = loopback.post(f"{base}/api/query", json=ASK, timeout=120).json()
        assert answer["status"] == "completed", answer
        with cluster.db() as db:
            holder, _ = db.holder(answer["id"])
        found = samples(loopback.get(f"{base}/metrics", timeout=30).text)
        assert found[("sleuth_workers", ())] == 1
        assert ("sleuth_worker_heartbeat_age_seconds", (("worker", holder),)) in found, found

        # SIGTERM while a turn waits on its model: 1 s of grace, then it is stopped, and it says why
        delay["s"] = 3.0
        query_id = _slow_turn(base, wire)
        assert _stop(worker) == 0
        stopped = loopback.get(f"{base}/api/queries/{query_id}", timeout=30).json()
        assert stopped["status"] == "cancelled" and stopped["error"] == WORKER_STOPPING, stopped

        # a turn stuck in a model call that outlasts the drain: the drain ends it itself, and exits
        delay["s"] = 600.0
        worker = cluster.start_worker()
        log = Path(cluster.files[-1].name)
        query_id = _slow_turn(base, wire)
        assert _stop(worker) == 0
        assert "the drain passed 11 s" in log.read_text(), log.read_text()[-2000:]
        stuck = loopback.get(f"{base}/api/queries/{query_id}", timeout=30).json()
        assert stuck["status"] == "cancelled" and stuck["error"] == WORKER_STOPPING, stuck
        events = loopback.get(f"{base}/api/queries/{query_id}/events", timeout=30).text
        assert "response.cancelled" in events and "event: query" in events  # its stream ended too
    finally:
        cluster.close()


def test_the_stop_timeouts_help_states_the_drain_margin() -> None:
    description = Settings.model_fields["task_stop_timeout_s"].description or ""
    assert "drain" in description and f"{DRAIN_MARGIN_S:g} s later" in description


def test_serve_logs_carry_their_time(tmp_path: Path) -> None:
    """`sleuth serve`'s lines, uvicorn's included, start with an ISO 8601 time in UTC."""
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("SLEUTH_")}
    env["SLEUTH_HOME"] = str(tmp_path / "home")
    proc = subprocess.Popen(
        [sys.executable, "-m", "sleuth", "serve", "--port", str(port)],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                if loopback.get(f"http://127.0.0.1:{port}/healthz", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            assert proc.poll() is None and time.monotonic() < deadline, "the server did not start"
            time.sleep(0.1)
    finally:
        proc.send_signal(signal.SIGTERM)
        output = proc.communicate(timeout=60)[0].decode(errors="replace")
    lines = [line for line in output.splitlines() if "uvicorn" in line]
    assert any("uvicorn.access" in line and "/healthz" in line for line in lines), output
    assert lines and all(STAMPED.match(line) for line in lines), output
