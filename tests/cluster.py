"""Sleuth processes on loopback, as a deployment runs them: `sleuth serve` and `sleuth worker` started as
real subprocesses over one database, stopped with real signals. With `SLEUTH_STORAGE_URL` in `env`
(`separate_homes`) each process gets a home of its own, as each machine has, and shares contexts
through the storage; else they share one home. The multi-process tests
(`tests/api/test_many_machines.py`) and `benchmarks/many_machines.py` both drive it."""

from __future__ import annotations

import shutil
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from sleuth.store.records.server_db import ServerDB
from tests import loopback
from tests.ports import free_port


@dataclass
class Cluster:
    database_url: str
    home: Path
    env: dict[str, str]
    servers: list[str] = field(default_factory=list)
    workers: list[subprocess.Popen[bytes]] = field(default_factory=list)
    processes: list[subprocess.Popen[bytes]] = field(default_factory=list)
    logs: Path = Path()
    files: list[Any] = field(default_factory=list)
    homes: list[Path] = field(default_factory=list)

    @property
    def separate_homes(self) -> bool:
        return bool(self.env.get("SLEUTH_STORAGE_URL"))

    def _env(self) -> dict[str, str]:
        """The environment of the next process: with shared storage, a new home holding only the seed
        home's `config.toml` (the node's model settings)."""
        if not self.separate_homes:
            return self.env
        home = self.logs.parent / f"{self.logs.name}-node-{len(self.processes)}"
        home.mkdir()
        if (self.home / "config.toml").is_file():
            shutil.copy(self.home / "config.toml", home / "config.toml")
        self.homes.append(home)
        return {**self.env, "SLEUTH_HOME": str(home)}

    def _log(self, kind: str) -> Any:
        handle = open(self.logs / f"{kind}-{len(self.processes)}.log", "wb")  # noqa: SIM115 (closed at exit)
        self.files.append(handle)
        return handle

    def start_worker(self, *args: str) -> subprocess.Popen[bytes]:
        """Start `sleuth worker` (with `args`) and wait until it takes jobs (its log says so)."""
        log = self._log("worker")
        path = Path(log.name)
        proc = subprocess.Popen(
            [sys.executable, "-m", "sleuth", "worker", *args], env=self._env(), stdout=log, stderr=log
        )
        self.workers.append(proc)
        self.processes.append(proc)
        deadline = time.monotonic() + 60
        while "Starting worker on queues" not in path.read_text(errors="replace"):
            assert proc.poll() is None, path.read_text(errors="replace")
            assert time.monotonic() < deadline, "a worker did not start"
            time.sleep(0.1)
        return proc

    def start_server(self) -> str:
        port = free_port()
        log = self._log("server")
        proc = subprocess.Popen(
            [sys.executable, "-m", "sleuth", "serve", "--port", str(port), "--log-level", "warning"],
            env=self._env(),
            stdout=log,
            stderr=log,
        )
        self.processes.append(proc)
        url = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 60
        while True:
            try:
                if loopback.get(f"{url}/healthz", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            assert proc.poll() is None, (self.logs / f"server-{len(self.processes) - 1}.log").read_text()
            assert time.monotonic() < deadline, "a server did not start"
            time.sleep(0.1)
        self.servers.append(url)
        return url

    def db(self) -> ServerDB:
        return ServerDB(self.database_url, replay_root=self.home)

    def worker_pid(self, holder: str | None) -> int:
        assert holder is not None and holder.startswith("worker:"), holder
        return int(holder.split(":")[2])

    def close(self) -> None:
        """SIGTERM every process (a worker drains), then wait; a process that hangs is killed."""
        for proc in self.processes:
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        for proc in self.processes:
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
        for handle in self.files:
            handle.close()

    def kill(self, pid: int) -> None:
        proc = next(p for p in self.workers if p.pid == pid)
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
        self.workers.remove(proc)
