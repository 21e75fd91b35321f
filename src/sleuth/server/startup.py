"""A process starting before its dependencies (a pod scheduled beside a PostgreSQL still starting, a
bucket being made by an init job) waits for them, a bounded time, instead of exiting with a traceback
for its supervisor to restart over and over.

`wait_for_dependencies` asks the database, then the shared storage, again with backoff for
`startup_wait_s`, logging one line per try; when it gives up, `DependencyUnavailable` carries one
sentence saying what is wrong and how to fix it (`db_admin.explain`, `storage_verdict`)."""

from __future__ import annotations

import logging
import time
from pathlib import Path

from sleuth.errors import Unavailable
from sleuth.server.db_admin import DatabaseUnreachable, open_checked, storage_verdict
from sleuth.settings import Settings

log = logging.getLogger("sleuth.server")
FIRST_DELAY_S = 1.0
MAX_DELAY_S = 10.0


class DependencyUnavailable(Unavailable, ConnectionError):
    """The database or the storage did not answer within `startup_wait_s`; the message says why."""


def wait_for_dependencies(settings: Settings, home_root: Path) -> None:
    """Return once the database (`SLEUTH_DATABASE_URL`, else the home's SQLite file) and the shared
    storage (`SLEUTH_STORAGE_URL`, if any) answer; `DependencyUnavailable` after `startup_wait_s`."""
    deadline = time.monotonic() + settings.startup_wait_s
    delay = FIRST_DELAY_S
    while True:
        problem = _problem(settings, home_root)
        if problem is None:
            return
        if time.monotonic() + delay > deadline:
            raise DependencyUnavailable(f"{problem} (gave up after {settings.startup_wait_s:.0f} s)")
        log.warning("waiting for a dependency: %s; again in %.0f s", problem, delay)
        time.sleep(delay)
        delay = min(MAX_DELAY_S, delay * 2)


def _problem(settings: Settings, home_root: Path) -> str | None:
    try:
        open_checked(settings, home_root)
    except DatabaseUnreachable as exc:
        return str(exc)
    verdict = storage_verdict(settings)
    return None if verdict.ok else verdict.text
