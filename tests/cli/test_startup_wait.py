"""A deployment's processes start before their dependencies (issue 42): `sleuth serve` started while
PostgreSQL is down waits for it and then serves; `sleuth worker` and `sleuth share` that wait in vain
exit 1 with one sentence, not a 530-line traceback a supervisor restarts over and over."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx

from tests import loopback
from tests.ports import free_port
from tests.postgres import throwaway_postgres


def _env(home: Path, **settings: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("SLEUTH_")}
    env.update({"SLEUTH_HOME": str(home), **{f"SLEUTH_{k.upper()}": v for k, v in settings.items()}})
    return env


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])  # closed again when the block ends: nothing listens there


def test_serve_waits_for_a_postgresql_that_starts_after_it(tmp_path: Path) -> None:
    with throwaway_postgres() as postgres:
        url = postgres.create_database()
        postgres.stop("fast")
        port = free_port()  # bound only once PostgreSQL answers, seconds from now
        log = (tmp_path / "serve.log").open("wb")
        proc = subprocess.Popen(
            [sys.executable, "-m", "sleuth", "serve", "--port", str(port)],
            env=_env(tmp_path / "home", database_url=url, startup_wait_s="120"),
            stdout=log,
            stderr=log,
        )
        try:
            deadline = time.monotonic() + 60
            while "waiting for a dependency" not in (tmp_path / "serve.log").read_text(errors="replace"):
                assert proc.poll() is None, (tmp_path / "serve.log").read_text()
                assert time.monotonic() < deadline, "serve never said it was waiting"
                time.sleep(0.2)
            postgres.start()
            deadline = time.monotonic() + 90
            while True:
                try:
                    if loopback.get(f"http://127.0.0.1:{port}/readyz", timeout=5).status_code == 200:
                        break
                except httpx.HTTPError:
                    pass
                assert proc.poll() is None, (tmp_path / "serve.log").read_text()
                assert time.monotonic() < deadline, "serve did not become ready"
                time.sleep(0.3)
        finally:
            proc.terminate()
            proc.wait(timeout=60)
            log.close()


def test_worker_and_share_that_wait_in_vain_say_why_in_one_sentence(tmp_path: Path) -> None:
    url = f"postgresql://sleuth@127.0.0.1:{_closed_port()}/sleuth"
    for argv, settings in (
        (["worker"], {"database_url": url}),
        (["share"], {"database_url": url, "storage_url": (tmp_path / "shared").as_uri()}),
    ):
        done = subprocess.run(
            [sys.executable, "-m", "sleuth", *argv],
            env=_env(tmp_path / "home", startup_wait_s="2", **settings),
            capture_output=True,
            text=True,
            timeout=120,
        )
        said = done.stderr + done.stdout
        assert done.returncode == 1, said
        assert "Traceback" not in said, said
        assert "did not answer: connection refused" in said and "gave up after 2 s" in said, said
