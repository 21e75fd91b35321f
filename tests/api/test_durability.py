"""Restart durability (spec/api.md §9.2): a real `sleuth serve` process is killed with SIGKILL and started
again over the same home. Completed turns, their sessions and traces are still served; a turn that was in
flight is `failed` with `server restarted`. The restart also checks that `SLEUTH_API_KEY` is seeded."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import IO

import httpx
import pytest

from sleuth.compile.pipeline import CompileReport
from sleuth.store.contexts.home import Home
from sleuth.store.database import new_id
from sleuth.store.records.rows import QueryDocument
from sleuth.store.records.server_db import ServerDB
from tests import loopback
from tests.api.test_sse import read_stream
from tests.ports import free_port

SEEDED_KEY = "slk_" + "Durable0" * 5


class ServeProcess:
    """`python -m sleuth serve` on a free loopback port, its output in a log file."""

    def __init__(self, home: Path, log: Path, *args: str, env: dict[str, str] | None = None) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        environ = {k: v for k, v in os.environ.items() if k not in ("SLEUTH_MODEL", "SLEUTH_API_KEY")}
        environ.update(SLEUTH_HOME=str(home), **(env or {}))
        self._log: IO[bytes] = log.open("ab")
        self.log = log
        self.process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "sleuth",
                "serve",
                "--port",
                str(self.port),
                "--log-level",
                "warning",
                *args,
            ],
            env=environ,
            stdout=self._log,
            stderr=subprocess.STDOUT,
        )
        deadline = time.monotonic() + 60
        while True:
            if self.process.poll() is not None:
                raise RuntimeError(f"sleuth serve exited: {log.read_text(errors='replace')}")
            try:
                if loopback.get(f"{self.url}/healthz", timeout=1).text == "ok":
                    break
            except httpx.TransportError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError(f"sleuth serve did not start: {log.read_text(errors='replace')}")
            time.sleep(0.1)

    def kill(self) -> None:
        """SIGKILL: no shutdown hook runs, exactly like a crash."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGKILL)
            self.process.wait(timeout=30)
        self._log.close()


@pytest.fixture
def served_home(sample_home: tuple[Home, CompileReport], tmp_path: Path) -> Iterator[Path]:
    """A private copy of the compiled sample home, so the session fixture stays clean."""
    home, _ = sample_home
    copy = tmp_path / "home"

    def skip_turns(directory: str, names: list[str]) -> set[str]:  # other tests' turns stay behind
        if Path(directory) != home.root:
            return set()
        return {n for n in names if n.startswith("server.sqlite") or n == "queries"}

    shutil.copytree(home.root, copy, ignore=skip_turns)
    yield copy


def _in_flight_turn(home: Path) -> tuple[str, str]:
    """A turn a dying server left behind: stored `in_progress`, its session claimed."""
    with ServerDB.for_home(Home(home)) as db:
        session = db.create_session(["acme"], "a turn that never finished")
        query: QueryDocument = {
            "id": new_id("qry"),
            "object": "query",
            "session_id": session["id"],
            "status": "in_progress",
            "created": int(time.time()),
            "error": None,
            "output": [],
        }
        db.insert_query(query)
        assert db.claim_session(session["id"], query["id"])
        db.append_event(
            query["id"], {"type": "response.created", "query_id": query["id"], "session_id": session["id"]}
        )
        running = {"type": "response.step", "query_id": query["id"], "step_id": "step_1", "status": "running"}
        db.append_event(query["id"], running)
    return session["id"], query["id"]


def test_completed_turns_survive_and_in_flight_turns_fail_on_restart(
    served_home: Path, tmp_path: Path
) -> None:
    log = tmp_path / "serve.log"
    first = ServeProcess(served_home, log)
    try:
        with loopback.client(base_url=first.url, timeout=120) as client:
            done = client.post(
                "/api/query", json={"ask": "How many products are in the catalog?", "scope": ["acme"]}
            )
            assert done.status_code == 200, done.text
            completed = done.json()
            assert completed["status"] == "completed", completed
        busy_session, in_flight = _in_flight_turn(served_home)
    finally:
        first.kill()

    second = ServeProcess(served_home, log, "--auth", env={"SLEUTH_API_KEY": SEEDED_KEY})
    try:
        with ServerDB.for_home(Home(served_home)) as db:
            failed = db.get_query(in_flight)
            assert (
                failed is not None and failed["status"] == "failed" and failed["error"] == "server restarted"
            )
            session = db.get_session(busy_session)
            assert session is not None and session["active_query_id"] is None
            done_turn = db.get_query(completed["id"])
            assert done_turn is not None and done_turn["status"] == "completed"
            assert db.get_trace(completed["id"]) is not None

        with loopback.client(base_url=second.url, timeout=60) as client:
            assert client.get(f"/api/queries/{completed['id']}").status_code == 401  # keys now required
            client.headers["Authorization"] = f"Bearer {SEEDED_KEY}"
            assert client.get("/api/auth").json()["user"] == "SLEUTH_API_KEY"

            again = client.get(f"/api/queries/{completed['id']}")
            assert again.status_code == 200, again.text
            assert again.json()["status"] == "completed"
            assert again.json()["output"] == completed["output"]
            trace = client.get(f"/api/queries/{completed['id']}/trace")
            assert trace.status_code == 200 and trace.json()["query_id"] == completed["id"]
            ses = client.get(f"/api/sessions/{completed['session_id']}")
            assert ses.status_code == 200, ses.text
            assert [q["id"] for q in ses.json()["queries"]] == [completed["id"]]

            gone = client.get(f"/api/queries/{in_flight}")
            assert gone.status_code == 200, gone.text
            assert gone.json()["status"] == "failed" and gone.json()["error"] == "server restarted"
            # Its replayed stream ends as a live one would: `response.failed`, then the Query.
            with client.stream("GET", f"/api/queries/{in_flight}/events") as replay:
                assert replay.status_code == 200
                got = read_stream(replay)
            assert [(f.id, f.event) for f in got] == [
                (1, "response.created"),
                (2, "response.step"),
                (3, "response.failed"),
                (None, "query"),
            ]
            assert got[2].data == {
                "type": "response.failed",
                "query_id": in_flight,
                "error": "server restarted",
            }
            assert client.get(f"/api/sessions/{busy_session}").status_code == 200
    finally:
        second.kill()
