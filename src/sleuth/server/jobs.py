"""The kinds of long job a task service runs (spec/api.md §9), each built from a task's JSON arguments:
the one registry that a local task service and every worker share, so a job runs the same on one
machine or many."""

from __future__ import annotations

import logging
from functools import partial

from sleuth.server.archives import import_job
from sleuth.server.connectors import sync_job
from sleuth.server.curation import curate_job, curate_part
from sleuth.server.packs import pack_job, restore_job
from sleuth.server.state import Server
from sleuth.server.task_service import JobKinds, PartKinds, TaskService
from sleuth.store.records.tasks import TaskStore

log = logging.getLogger("sleuth.server")


def job_kinds(state: Server) -> tuple[JobKinds, PartKinds]:
    """Each kind's builder, and the kinds whose parts other workers can help with (a curate's sources)."""
    kinds: JobKinds = {
        "curate": partial(curate_job, state),
        "sync": partial(sync_job, state),
        "import": partial(import_job, state),
        "pack": partial(pack_job, state),
        "restore": partial(restore_job, state),
    }
    return kinds, {"curate": partial(curate_part, state)}


def task_service(state: Server) -> TaskService:
    """The process's task service: `open_server`'s on PostgreSQL (the queue's), else this process's own,
    made on first use. Made, it opens the task table next to the server database and fails the tasks a
    previous process left live (spec/api.md §7.1)."""

    def make() -> TaskService:
        store = TaskStore(state.db.database)
        recovered = store.recover_interrupted()
        if recovered:
            log.warning("marked %d interrupted task(s) failed: server restarted", recovered)
        settings = state.settings
        return TaskService(
            store,
            state.home.root / "tasks",
            workers=settings.task_workers,
            stop_timeout_s=settings.task_stop_timeout_s,
            kinds=job_kinds(state)[0],
        )

    return state.own_tasks(make)
