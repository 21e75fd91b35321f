"""`curate.lock`: one curate per context at a time, whether the CLI or a server runs it."""

from __future__ import annotations

import fcntl
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from sleuth.errors import Conflict


class CurateInFlight(Conflict, RuntimeError):
    """Another curate or restore holds the context's lock (`409 task_in_flight` over HTTP)."""


@contextmanager
def curate_lock(path: Path) -> Iterator[None]:
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise CurateInFlight(f"another compile of this context is running ({path})") from None
        try:
            yield
        finally:
            fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)
