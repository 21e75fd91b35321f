"""Connectors as the server runs them (issue 27): one sync of one connector (`sync_connector`, shared by
the API's import task and `sleuth connectors sync`), the `import` task that runs it and curates after
(`start_sync`), and the schedule that starts it every `every` (`ConnectorSchedule`). Routes are
`api/connectors.py`."""

from __future__ import annotations

import datetime
import logging
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from sleuth.compile.connectors import registry
from sleuth.compile.connectors.base import Connector, Limits
from sleuth.compile.connectors.kinds import build
from sleuth.compile.connectors.sync import SyncReport, sync
from sleuth.errors import Error, ToldConflict, ToldNotFound
from sleuth.server.context_files import EXCLUSIVE_WORKFLOWS, conflict_check, has_sources, update_extra
from sleuth.server.curation import start_curate_task
from sleuth.server.state import Server
from sleuth.server.task_handle import Job, TaskHandle
from sleuth.server.task_service import TaskService
from sleuth.settings import Settings
from sleuth.store.contexts.home import ContextDir, Home, now_iso
from sleuth.store.contexts.lock import curate_lock
from sleuth.store.database import Database
from sleuth.store.records.rows import TaskRow
from sleuth.store.records.secrets import SecretBox

log = logging.getLogger(__name__)
SCHEDULE_TICK_S = 30.0


class ConnectorSchedule:
    """Syncs on a schedule (`every`): each tick, every connector whose period has passed since its last
    attempt (or since it was added) gets a sync task, as `POST /contexts/{slug}/import` would start it.
    On many machines each server ticks; the task claim lets one of them start a given sync and the
    others see it running (409) and skip it."""

    def __init__(self, state: Server, service: TaskService, tick_s: float = SCHEDULE_TICK_S) -> None:
        self.state, self.service, self.tick_s = state, service, tick_s
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="sleuth-connector-schedule", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()

    def _run(self) -> None:
        while not self._stop.wait(self.tick_s):
            try:
                self.run_once()
            except Exception:  # a tick that failed is logged; the next one tries again
                log.exception("connector schedule: a tick failed")

    def run_once(self, now: float | None = None) -> list[str]:
        """Start the syncs that are due; the ids of the tasks started. A connector that cannot even be
        started (anything but a busy context) has that recorded as its attempt, so it waits a period
        like a failed sync, and the connectors after it still get their turn."""
        moment = time.time() if now is None else now
        started = []
        for ctx, info in self.state.home.contexts():
            try:
                entries = list(registry.load(ctx).values())
            except Exception:  # an unreadable connectors.json: the other contexts still sync
                log.exception("connector schedule: the connectors of %s cannot be read", info.slug)
                continue
            for entry in entries:
                since = entry.last_attempt_at or entry.created_at
                if entry.every_s is None or moment - _epoch(since) < entry.every_s:
                    continue
                try:
                    task = start_sync(self.state, self.service, ctx, entry.name, "schedule", True, "schedule")
                except ToldConflict as exc:  # busy (a curate, another import): the next tick tries again
                    log.info("connector %s/%s: not synced now: %s", info.slug, entry.name, exc.message)
                    continue
                except Exception as exc:
                    log.exception("connector %s/%s: the sync could not start", info.slug, entry.name)
                    record_failure(ctx, entry.name, now_iso(), exc)
                    continue
                started.append(str(task["id"]))
        return started


def _epoch(iso: str) -> float:
    return datetime.datetime.fromisoformat(iso.replace("Z", "+00:00")).timestamp()


#: The most of a failure's message kept in `last_error`.
ERROR_CHARS = 1000


def failure_text(exc: BaseException) -> str:
    """What a failed sync keeps in `last_error`: Sleuth's own errors in their words, anything else (a
    client library's, the disk's, a bug) with its type, so a person can tell them apart."""
    text = str(exc) if isinstance(exc, Error) else f"{type(exc).__name__}: {exc}"
    return text[:ERROR_CHARS] or type(exc).__name__


def record_failure(ctx: ContextDir, name: str, attempt: str, exc: BaseException) -> None:
    """Record a failed attempt; a failure to record it is logged (the schedule must go on)."""
    try:
        registry.record(ctx, name, attempt, None, failure_text(exc))
    except Exception:
        log.exception("connector %s: its failure could not be recorded", name)


def _workdir(ctx: ContextDir) -> Path:
    return ctx.root / "connectors" / "cache"


def connector_of(
    home: Home,
    ctx: ContextDir,
    entry: registry.ConnectorEntry,
    settings: Settings,
    *,
    adding: bool = False,
    machine_user: bool = False,
) -> Connector:
    """The connector `entry` describes, its credentials unsealed, checked against the settings.
    `machine_user`: the CLI, run by the machine's own user (any folder; S3 with the user's keys)."""
    secret = SecretBox(home.root).open(entry.secret)
    return build(
        entry.kind, entry.config, secret, settings, _workdir(ctx), any_folder=machine_user, adding=adding,
        home=home.root,
    )  # fmt: skip


def entry_of(ctx: ContextDir, name: str) -> registry.ConnectorEntry:
    entry = registry.load(ctx).get(name)
    if entry is None:
        raise ToldNotFound("connector_not_found", f"no connector {name!r} in this context", connector=name)
    return entry


def sync_connector(
    home: Home,
    ctx: ContextDir,
    entry: registry.ConnectorEntry,
    settings: Settings,
    *,
    machine_user: bool = False,
    stop: Callable[[], None] | None = None,
    database: Database | None = None,
) -> SyncReport:
    """One sync of one connector, as the API's import task and `sleuth connectors sync` both run it:
    under the context's curate lock (no compile reads the sources meanwhile), its outcome recorded with
    the connector (the report, or any failure in words: so the schedule waits a period before the
    next attempt instead of retrying every tick), and the context's `last_source_import_at` set.
    `stop` raises when the sync should end now (its task was cancelled)."""
    attempt = now_iso()
    try:
        connector = connector_of(home, ctx, entry, settings, machine_user=machine_user)
        with curate_lock(ctx.lock_file, ctx.info().id, database), ctx.editing():
            report = sync(ctx, entry.name, connector, Limits.of(settings), stop=stop)
    except Exception as exc:
        record_failure(ctx, entry.name, attempt, exc)
        raise
    registry.record(ctx, entry.name, attempt, report.to_json(), None)
    update_extra(ctx, last_source_import_at=now_iso())
    return report


def start_sync(
    state: Server, service: TaskService, ctx: ContextDir, name: str, who: str, curate: bool, trigger: str
) -> TaskRow:
    """An `import` task that syncs connector `name`, then curates when anything changed. Refused
    (409) while a curate, restore, pack or another import of the context runs."""
    entry = entry_of(ctx, name)
    info = ctx.info()
    with service.claiming():
        conflict_check(service, ctx, (*EXCLUSIVE_WORKFLOWS, "import"))
        task = service.store.create(
            "import",
            context_id=info.id,
            context_slug=info.slug,
            created_by=who,
            input={"connector": name, "kind": entry.kind, "curate": curate, "trigger": trigger},
        )

    args = {"context": info.id, "connector": name, "who": who, "curate": curate}
    service.submit(task, "sync", args, phases=("sync",))
    return task


def sync_job(state: Server, args: dict[str, Any]) -> Job:
    """A connector's sync from its JSON arguments, as `start_sync` queues it and a worker rebuilds it
    from the task row (`TaskService.kinds`): the sync, then a curate when anything changed."""
    ctx = state.home.find(str(args["context"]))
    name, who, curate = str(args["connector"]), str(args["who"]), bool(args.get("curate", True))

    def job(handle: TaskHandle) -> dict[str, Any]:
        entry = entry_of(ctx, name)  # as it is now, where the job runs
        report = sync_connector(
            state.home, ctx, entry, state.settings, stop=handle.check, database=state.db.database
        )
        output: dict[str, Any] = {"connector": name, "summary": report.summary, **report.to_json()}
        changed = report.added or report.changed or report.deleted
        if curate and changed and has_sources(ctx):
            curate_input = {"trigger": "connector", "connector": name}
            service = state.tasks  # the service running this job
            assert service is not None
            curate_task = start_curate_task(state, service, ctx, who, curate_input)
            output["curate_task_id"] = curate_task["id"]
        return output

    return job
