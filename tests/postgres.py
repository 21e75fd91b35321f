"""A throwaway PostgreSQL server for the tests and benchmarks: Debian's `postgresql` package (`make test`
installs it when missing), a fresh cluster in a temporary directory on a free loopback port, stopped
and deleted at the end. No Docker, nothing left behind.

PostgreSQL refuses to run as root; as root the cluster is made and run as the `postgres` user the
Debian package creates.
"""

from __future__ import annotations

import glob
import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import psycopg

from tests.ports import free_port

USER = "sleuth"


class PostgresMissing(RuntimeError):
    """No PostgreSQL server binaries on this machine (`make test` installs Debian's package)."""


def _bindir() -> Path:
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"), key=lambda p: int(p.split("/")[4]))
    if found:
        return Path(found[-1]).parent
    initdb = shutil.which("initdb")
    if initdb:
        return Path(initdb).parent
    raise PostgresMissing("no PostgreSQL server here: `apt-get install postgresql` (make test does it)")


class Postgres:
    """A running cluster: `url(db)` for SQLAlchemy/Sleuth, `create_database()` for a fresh database,
    `stop()`/`start()` to take it away and bring it back (a database outage)."""

    def __init__(self, root: Path, port: int, start: list[str], stop: list[str]) -> None:
        self.root, self.port = root, port
        self._start, self._stop = start, stop
        self._count = 0

    def stop(self, mode: str = "immediate") -> None:
        """`immediate`: a crash (with this cluster's `synchronous_commit=off`, the last commits may be
        lost); `fast`: a restart as an operator does one (`systemctl restart`), every commit kept."""
        argv = list(self._stop)
        argv[argv.index("-m") + 1] = mode
        subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)

    def start(self) -> None:
        subprocess.run(self._start, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, check=True)

    def url(self, database: str = "postgres") -> str:
        return f"postgresql://{USER}@127.0.0.1:{self.port}/{database}"

    def create_database(self, prefix: str = "t") -> str:
        """A new empty database; returns its URL."""
        self._count += 1
        name = f"{prefix}_{os.getpid()}_{self._count}"
        with psycopg.connect(self.url(), autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{name}"')
        return self.url(name)

    def drop_database(self, url: str) -> None:
        name = url.rsplit("/", 1)[1]
        with psycopg.connect(self.url(), autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def _as_owner(argv: list[str]) -> list[str]:
    return ["runuser", "-u", "postgres", "--", *argv] if os.geteuid() == 0 else argv


@contextmanager
def throwaway_postgres() -> Iterator[Postgres]:
    """Start a fresh cluster (about a second) and stop it, deleting its files, at the end."""
    bindir = _bindir()
    root = Path(tempfile.mkdtemp(prefix="sleuth-pg-"))
    data = root / "data"
    if os.geteuid() == 0:
        os.chmod(root, 0o755)
        shutil.chown(root, "postgres", "postgres")
    port = free_port()
    quiet = {"stdout": subprocess.DEVNULL, "stderr": subprocess.PIPE, "check": True}
    try:
        subprocess.run(
            _as_owner([str(bindir / "initdb"), "-D", str(data), "-A", "trust", "-U", USER, "--no-sync"]),
            **quiet,  # type: ignore[call-overload]
        )
        options = (
            f"-k {root} -p {port} -c listen_addresses=127.0.0.1 -c fsync=off "
            "-c synchronous_commit=off -c full_page_writes=off -c max_connections=300"
        )
        pg_ctl = str(bindir / "pg_ctl")
        start = _as_owner([pg_ctl, "-D", str(data), "-o", options, "-l", str(root / "log"), "-w", "start"])
        stop = _as_owner([pg_ctl, "-D", str(data), "-m", "immediate", "-w", "stop"])
        subprocess.run(start, **quiet)  # type: ignore[call-overload]
        try:
            yield Postgres(root, port, start, stop)
        finally:
            subprocess.run(stop, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)
    finally:
        shutil.rmtree(root, ignore_errors=True)
