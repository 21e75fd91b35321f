"""The `tasks` table of `server.sqlite` (spec/api.md §7.1): long context operations (import, curate, pack,
restore) with their state, progress, output and errors, so a client can poll them and they survive a
restart of the server.

It follows `server_db`: SQLAlchemy Core (no ORM) on the same file, the same engine set-up (WAL,
busy timeout, `BEGIN IMMEDIATE` for writes), one short transaction per method, so a `TaskStore` may be
used from the worker threads and the request threads at once. The tables are in `store.task_schema`;
a task split for many workers keeps its parts through `store.task_parts`.

State changes are conditional UPDATEs (`WHERE state IN (...)`), so a cancel racing a worker that
finishes can never move a terminal task back to a live state. What a task stores is bounded whatever
its job returns (`store.task_output`).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from sqlalchemy import case, delete, func, insert, or_, select, update
from sqlalchemy.engine import Connection, Row

from sleuth.errors import NotFound
from sleuth.store.database import Database, add_missing_columns, dumps, loads, new_id
from sleuth.store.records.outage import durable
from sleuth.store.records.rows import ContextStats, TaskJob, TaskProgress, TaskRow, TaskStep
from sleuth.store.records.task_output import bound_error, bound_output
from sleuth.store.records.task_parts import TaskParts
from sleuth.store.records.task_schema import metadata, tasks_t

__all__ = [
    "ACTIVE_STATES",
    "LOST_ERROR",
    "NOT_STARTED_ERROR",
    "RESTARTED_ERROR",
    "STATES",
    "TERMINAL_STATES",
    "TaskNotFound",
    "TaskStore",
    "bound_output",  # a listing bounds outputs further with the same rule (`store.task_output`)
    "runtime_seconds",
]

#: Every state a task can be in; the contract's `starting` and `provisioning` are never used.
STATES = ("scheduled", "running", "stopping", "completed", "failed", "cancelled")
ACTIVE_STATES = ("scheduled", "running", "stopping")
TERMINAL_STATES = ("completed", "failed", "cancelled")
RESTARTED_ERROR = "server restarted"
LOST_ERROR = "worker lost: the process running this task stopped answering"
NOT_STARTED_ERROR = "not started: no worker took this task in time"


class TaskNotFound(NotFound, LookupError):
    """No such task (`404 task_not_found` over HTTP)."""


def _task_dict(row: Row[Any]) -> TaskRow:
    return {
        "id": row.id,
        "context_id": row.context_id,
        "context_slug": row.context_slug,
        "workflow": row.workflow,
        "state": row.state,
        "created_by": row.created_by,
        "error": row.error,
        "input": loads(row.input),
        "output": loads(row.output),
        "steps": loads(row.steps),
        "progress": loads(row.progress),
        "tokens_prompt": row.tokens_prompt,
        "tokens_completion": row.tokens_completion,
        "timeout_seconds": row.timeout_seconds,
        "created_at": row.created_at,
        "running_from": row.running_from,
        "finished_at": row.finished_at,
        "last_activity_at": row.last_activity_at,
        "worker": row.worker,
        "lease_until": row.lease_until,
        "job": loads(row.job),
        "attempts": row.attempts or 0,
    }


def runtime_seconds(task: TaskRow, now: float | None = None) -> float:
    """Seconds the task has run: from `running_from` to its end (or now while it runs)."""
    began = task.get("running_from")
    if began is None:
        return 0.0
    end = task.get("finished_at") or (time.time() if now is None else now)
    return round(max(0.0, float(end) - float(began)), 3)


def _upgrade(conn: Connection) -> None:
    add_missing_columns(conn, metadata)


class TaskStore(TaskParts):
    """The tasks of the server database. Close with `close()` (or `with`)."""

    def __init__(self, target: Path | str | Database) -> None:
        super().__init__(target)
        self.database.prepare(metadata, _upgrade)

    # --- create and read --------------------------------------------------------------------------

    def create(
        self,
        workflow: str,
        *,
        context_id: str | None,
        context_slug: str | None,
        created_by: str | None,
        input: dict[str, Any] | None = None,
        state: str = "scheduled",
        output: Any = None,
        timeout_seconds: int | None = None,
    ) -> TaskRow:
        """A new task; `state="completed"` (with `output`) records work already done in the request."""
        if state not in STATES:
            raise ValueError(f"unknown task state {state!r}")
        now = time.time()
        terminal = state in TERMINAL_STATES
        values: dict[str, Any] = {
            "id": new_id("tsk"),
            "context_id": context_id,
            "context_slug": context_slug,
            "workflow": workflow,
            "state": state,
            "created_by": created_by,
            "error": None,
            "input": dumps(bound_output(input or {})),
            "output": None if output is None else dumps(bound_output(output)),
            "steps": dumps([]),
            "progress": dumps({"phase": None, "phases": [], "label": None, "pct": 100 if terminal else 0}),
            "tokens_prompt": 0,
            "tokens_completion": 0,
            "timeout_seconds": timeout_seconds,
            "created_at": now,
            "running_from": now if state != "scheduled" else None,
            "finished_at": now if terminal else None,
            "last_activity_at": now,
        }
        with self.writing() as conn:
            conn.execute(insert(tasks_t).values(**values))
            row = conn.execute(select(tasks_t).where(tasks_t.c.id == values["id"])).one()
        return _task_dict(row)

    @durable
    def get(self, task_id: str) -> TaskRow | None:
        with self.reading() as conn:
            row = conn.execute(select(tasks_t).where(tasks_t.c.id == task_id)).first()
        return None if row is None else _task_dict(row)

    def require(self, task_id: str) -> TaskRow:
        task = self.get(task_id)
        if task is None:
            raise TaskNotFound(f"no task {task_id!r}")
        return task

    def page(
        self,
        *,
        workflow: str | None = None,
        state: str | None = None,
        context: Sequence[str] | None = None,
        q: str | None = None,
        limit: int = 30,
        offset: int = 0,
    ) -> tuple[list[TaskRow], int]:
        """One page, newest first, and the number of tasks that match. `context` lists the ids and
        slugs a task's context may have; `q` is a substring of the id, workflow or context slug."""
        conditions: list[Any] = []
        if workflow is not None:
            conditions.append(tasks_t.c.workflow == workflow)
        if state is not None:
            conditions.append(tasks_t.c.state == state)
        if context is not None:
            names = list(context)
            conditions.append(or_(tasks_t.c.context_id.in_(names), tasks_t.c.context_slug.in_(names)))
        if q:
            pattern = "%" + q.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"
            conditions.append(
                or_(
                    tasks_t.c.id.ilike(pattern, escape="\\"),
                    tasks_t.c.workflow.ilike(pattern, escape="\\"),
                    tasks_t.c.context_slug.ilike(pattern, escape="\\"),
                )
            )
        stmt = (
            select(tasks_t)
            .where(*conditions)
            .order_by(tasks_t.c.created_at.desc(), tasks_t.c.id.desc())
            .limit(max(0, int(limit)))
            .offset(max(0, int(offset)))
        )
        count = select(func.count()).select_from(tasks_t).where(*conditions)
        with self.reading() as conn:
            total = int(conn.execute(count).scalar_one())
            return [_task_dict(row) for row in conn.execute(stmt)], total

    def active(self, context_id: str, workflows: Sequence[str] | None = None) -> list[TaskRow]:
        """The context's tasks that are not terminal yet, oldest first."""
        conditions = [tasks_t.c.context_id == context_id, tasks_t.c.state.in_(ACTIVE_STATES)]
        if workflows is not None:
            conditions.append(tasks_t.c.workflow.in_(list(workflows)))
        stmt = select(tasks_t).where(*conditions).order_by(tasks_t.c.created_at, tasks_t.c.id)
        with self.reading() as conn:
            return [_task_dict(row) for row in conn.execute(stmt)]

    def context_stats(self, context_id: str) -> ContextStats:
        """The Context `stats` object (spec/api.md §6.1) over every task of the context."""
        c = tasks_t.c

        def count_in(states: Sequence[str]) -> Any:
            return func.coalesce(func.sum(case((c.state.in_(list(states)), 1), else_=0)), 0)

        ended = func.coalesce(c.finished_at, c.last_activity_at)
        stmt = select(
            func.count(),
            count_in(ACTIVE_STATES),
            count_in(["completed"]),
            count_in(["failed"]),
            count_in(["cancelled"]),
            func.coalesce(func.sum(c.tokens_prompt + c.tokens_completion), 0),
            func.coalesce(func.sum(case((c.running_from.is_not(None), ended - c.running_from), else_=0)), 0),
        ).where(c.context_id == context_id)
        with self.reading() as conn:
            row = conn.execute(stmt).one()
        return {
            "tasks_total": int(row[0]),
            "tasks_active": int(row[1]),
            "tasks_completed": int(row[2]),
            "tasks_failed": int(row[3]),
            "tasks_cancelled": int(row[4]),
            "tokens_total": int(row[5]),
            "runtime_seconds": round(float(row[6]), 3),
        }

    # --- state changes ----------------------------------------------------------------------------

    @durable
    def start(self, task_id: str, worker: str | None = None, lease_s: float | None = None) -> bool:
        """`scheduled → running`; False when the task is no longer scheduled (cancelled meanwhile, or
        another worker took it). With `worker`, the task is held by it until now + `lease_s` (renewed by
        its heartbeat, `renew`)."""
        now = time.time()
        values: dict[str, Any] = {
            "state": "running",
            "running_from": now,
            "last_activity_at": now,
            "attempts": func.coalesce(tasks_t.c.attempts, 0) + 1,  # every run begun, held or not
        }
        with self.writing() as conn:
            if worker is not None:
                values.update(worker=worker, lease_until=self.database.clock(conn) + (lease_s or 30.0))
            result = conn.execute(
                update(tasks_t)
                .where(tasks_t.c.id == task_id, tasks_t.c.state == "scheduled")
                .values(**values)
            )
            return result.rowcount == 1

    def state_counts(self) -> dict[str, int]:
        """Tasks per live state on every server (`/metrics`)."""
        stmt = (
            select(tasks_t.c.state, func.count())
            .where(tasks_t.c.state.in_(ACTIVE_STATES))
            .group_by(tasks_t.c.state)
        )
        with self.reading() as conn:
            found = {str(row[0]): int(row[1]) for row in conn.execute(stmt)}
        return {state: found.get(state, 0) for state in ACTIVE_STATES}

    @durable
    def set_job(self, task_id: str, job: TaskJob) -> None:
        """What a worker runs the task from: `{"kind", "args", "phases"}` (before it is queued)."""
        with self.writing() as conn:
            conn.execute(update(tasks_t).where(tasks_t.c.id == task_id).values(job=dumps(job)))

    def renew(self, worker: str, lease_s: float) -> list[tuple[str, str]]:
        """A worker's heartbeat: extend its holds; returns `(task_id, state)` of each (a `stopping`
        one was asked to stop, from any server)."""
        with self.writing() as conn:
            now = self.database.clock(conn)
            conn.execute(
                update(tasks_t)
                .where(tasks_t.c.worker == worker, tasks_t.c.state.in_(("running", "stopping")))
                .values(lease_until=now + lease_s)
            )
            rows = conn.execute(
                select(tasks_t.c.id, tasks_t.c.state).where(
                    tasks_t.c.worker == worker, tasks_t.c.state.in_(("running", "stopping"))
                )
            ).all()
        return [(row.id, row.state) for row in rows]

    def fail_unstarted(self, older_than_s: float) -> list[str]:
        """Fail the queued tasks (with a job) no worker began within `older_than_s`: a task whose job
        was lost (its process died between storing and queueing it) must not stay `scheduled`."""
        now = time.time()
        with self.writing() as conn:
            ids = list(
                conn.execute(
                    select(tasks_t.c.id).where(
                        tasks_t.c.state == "scheduled",
                        tasks_t.c.job.is_not(None),
                        tasks_t.c.last_activity_at < now - older_than_s,
                    )
                ).scalars()
            )
            if ids:
                conn.execute(
                    update(tasks_t)
                    .where(tasks_t.c.id.in_(ids), tasks_t.c.state == "scheduled")
                    .values(state="failed", error=NOT_STARTED_ERROR, finished_at=now, last_activity_at=now)
                )
        return ids

    @durable
    def release(self, task_id: str, worker: str) -> bool:
        """Hand a running task back to the queue (its worker is stopping): `scheduled` again, held by
        nobody. False when `worker` does not hold it running."""
        with self.writing() as conn:
            result = conn.execute(
                update(tasks_t)
                .where(tasks_t.c.id == task_id, tasks_t.c.worker == worker, tasks_t.c.state == "running")
                .values(
                    state="scheduled",
                    worker=None,
                    lease_until=None,
                    running_from=None,
                    last_activity_at=time.time(),
                )
            )
            return result.rowcount == 1

    def requeue_lost(self, max_attempts: int, now: float | None = None) -> tuple[list[str], list[str]]:
        """The tasks whose worker's lease ran out: a running one with attempts left goes back to
        `scheduled` (the caller queues it again), the rest end `failed` (a stopping one `cancelled`).
        Returns (requeued, ended)."""
        requeued: list[str] = []
        ended: list[str] = []
        with self.writing() as conn:
            stamp = self.database.clock(conn) if now is None else now
            rows = conn.execute(
                select(tasks_t.c.id, tasks_t.c.state, tasks_t.c.attempts, tasks_t.c.job).where(
                    tasks_t.c.state.in_(("running", "stopping")),
                    tasks_t.c.worker.is_not(None),
                    tasks_t.c.lease_until < stamp,
                )
            ).all()
            for row in rows:
                if row.state == "running" and row.job is not None and (row.attempts or 0) < max_attempts:
                    values: dict[str, Any] = {
                        "state": "scheduled",
                        "worker": None,
                        "lease_until": None,
                        "running_from": None,
                        "last_activity_at": stamp,
                    }
                    requeued.append(row.id)
                else:
                    state = "cancelled" if row.state == "stopping" else "failed"
                    values = {
                        "state": state,
                        "error": LOST_ERROR if state == "failed" else "cancelled",
                        "finished_at": stamp,
                        "last_activity_at": stamp,
                    }
                    ended.append(row.id)
                conn.execute(update(tasks_t).where(tasks_t.c.id == row.id).values(**values))
        return requeued, ended

    @durable
    def report(
        self,
        task_id: str,
        *,
        progress: TaskProgress | None = None,
        steps: list[TaskStep] | None = None,
        tokens_prompt: int | None = None,
        tokens_completion: int | None = None,
        worker: str | None = None,
    ) -> None:
        """Progress, steps or token counts of a live task (a terminal task is left alone; with `worker`,
        only while that worker holds it)."""
        values: dict[str, Any] = {"last_activity_at": time.time()}
        if progress is not None:
            values["progress"] = dumps(progress)
        if steps is not None:
            values["steps"] = dumps(steps)
        if tokens_prompt is not None:
            values["tokens_prompt"] = tokens_prompt
        if tokens_completion is not None:
            values["tokens_completion"] = tokens_completion
        conditions = [tasks_t.c.id == task_id, tasks_t.c.state.in_(ACTIVE_STATES)]
        if worker is not None:
            conditions.append(tasks_t.c.worker == worker)
        with self.writing() as conn:
            conn.execute(update(tasks_t).where(*conditions).values(**values))

    @durable
    def finish(
        self,
        task_id: str,
        state: str,
        *,
        output: Any = None,
        error: str | None = None,
        progress: TaskProgress | None = None,
        steps: list[TaskStep] | None = None,
        worker: str | None = None,
    ) -> bool:
        """A live task ends in `state` (completed, failed or cancelled); False if it had ended already,
        or, with `worker`, if that worker no longer holds it (it lost its hold and the task was begun
        again elsewhere: that run's ending is the one that counts)."""
        if state not in TERMINAL_STATES:
            raise ValueError(f"{state!r} is not a terminal state")
        now = time.time()
        values: dict[str, Any] = {
            "state": state,
            "error": bound_error(error),
            "finished_at": now,
            "last_activity_at": now,
        }
        if output is not None:
            values["output"] = dumps(bound_output(output))
        if progress is not None:
            values["progress"] = dumps(progress)
        if steps is not None:
            values["steps"] = dumps(steps)
        conditions = [tasks_t.c.id == task_id, tasks_t.c.state.in_(ACTIVE_STATES)]
        if worker is not None:
            conditions.append(tasks_t.c.worker == worker)
        with self.writing() as conn:
            result = conn.execute(update(tasks_t).where(*conditions).values(**values))
            return result.rowcount == 1

    def request_stop(self, task_id: str, reason: str | None = None) -> TaskRow:
        """A cancel: a scheduled task is cancelled at once, a running one becomes `stopping` (its
        worker ends it); a terminal one is returned unchanged."""
        now = time.time()
        message = bound_error(f"cancelled: {reason}" if reason else "cancelled")
        with self.writing() as conn:
            row = conn.execute(select(tasks_t.c.state).where(tasks_t.c.id == task_id)).first()
            if row is None:
                raise TaskNotFound(f"no task {task_id!r}")
            if row.state == "scheduled":
                conn.execute(
                    update(tasks_t)
                    .where(tasks_t.c.id == task_id)
                    .values(state="cancelled", error=message, finished_at=now, last_activity_at=now)
                )
            elif row.state == "running":
                conn.execute(
                    update(tasks_t)
                    .where(tasks_t.c.id == task_id)
                    .values(state="stopping", error=message, last_activity_at=now)
                )
            found = conn.execute(select(tasks_t).where(tasks_t.c.id == task_id)).one()
        return _task_dict(found)

    def recover_interrupted(self, error: str = RESTARTED_ERROR) -> int:
        """Fail every task left live by a process that stopped; call once when a server starts.

        Like `ServerDB.recover_interrupted`, every process sharing the home counts as "the" server, so
        do not call it while another server may be running tasks on the same database.
        """
        now = time.time()
        with self.writing() as conn:
            result = conn.execute(
                update(tasks_t)
                .where(tasks_t.c.state.in_(ACTIVE_STATES))
                .values(state="failed", error=error, finished_at=now, last_activity_at=now)
            )
            return int(result.rowcount)

    def delete(self, task_id: str) -> bool:
        """Remove one task row (housekeeping; the API cancels tasks, it never deletes them)."""
        with self.writing() as conn:
            return conn.execute(delete(tasks_t).where(tasks_t.c.id == task_id)).rowcount == 1
