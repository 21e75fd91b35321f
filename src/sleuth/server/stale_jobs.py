"""`sleuth db prune-jobs`: the queue's jobs left `doing` that no worker will ever finish.

A job carries only the id of its Sleuth record (`queue._register`: a turn's query, a task's row), and
Sleuth, not procrastinate, decides what a record's end means: a worker that dies leaves its job `doing`
in procrastinate's table while Sleuth's leases fail the turn or queue the curate again as a new job. So
a `doing` job is stale when

- its record ended longer ago than the limit, or no longer exists; or
- its worker is gone (no procrastinate worker holds it, or the holder's heartbeat stopped: procrastinate's
  own rule for a stalled job) and it started longer ago than the limit.

A job a live worker runs is never touched while its record is live; one whose record just ended is left
to its worker for the limit. A stale job is deleted through procrastinate's own function
(`procrastinate_finish_job_v1`, which refuses a job that has left `doing` meanwhile).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import select, text
from sqlalchemy.exc import DBAPIError

from sleuth.errors import Invalid
from sleuth.server.queue import PART_JOB, TASK_JOB, TURN_JOB
from sleuth.store.database import Database
from sleuth.store.records.server_db import TERMINAL_STATUSES
from sleuth.store.records.server_schema import queries_t
from sleuth.store.records.task_schema import tasks_t
from sleuth.store.records.tasks import TERMINAL_STATES

#: Each job's record: the argument that names it, and what it is.
RECORDS = {TURN_JOB: ("query_id", "query"), TASK_JOB: ("task_id", "task"), PART_JOB: ("task_id", "task")}

_DOING = text(
    """
    SELECT job.id, job.task_name, job.args,
           EXTRACT(EPOCH FROM now() - (
               SELECT max(event.at) FROM procrastinate_events event
                WHERE event.job_id = job.id AND event.type = 'started'
           )) AS running_s,
           (job.worker_id IS NULL
            OR worker.last_heartbeat < now() - make_interval(secs => :stalled_s)) AS orphaned
      FROM procrastinate_jobs job
      LEFT JOIN procrastinate_workers worker ON worker.id = job.worker_id
     WHERE job.status = 'doing'
     ORDER BY job.id
    """
)


class NoQueue(Invalid, LookupError):
    """The database holds no job queue: SQLite (one machine runs its jobs in its server), or a
    PostgreSQL database `sleuth db init` has not prepared."""


@dataclass(frozen=True)
class StaleJob:
    id: int
    task_name: str
    why: str  # "task tsk_… ended 2.0 h ago", "its worker is gone and it started 3.1 h ago"


@dataclass
class Pruned:
    """What `prune_jobs` found: the jobs `doing`, the stale ones, and how many of them it deleted (a
    job that left `doing` meanwhile is not counted)."""

    doing: int = 0
    stale: list[StaleJob] = field(default_factory=list)
    removed: int = 0


def _ended(database: Database, kind: str, ids: set[str]) -> dict[str, float | None]:
    """Of `ids`, the records that ended: seconds since they ended (None: the record is gone)."""
    if not ids:
        return {}
    table, state, stamp, final = (
        (queries_t, queries_t.c.status, queries_t.c.updated, TERMINAL_STATUSES)
        if kind == "query"
        else (tasks_t, tasks_t.c.state, tasks_t.c.finished_at, TERMINAL_STATES)
    )
    with database.reading() as conn:
        rows = {
            row[0]: row for row in conn.execute(select(table.c.id, state, stamp).where(table.c.id.in_(ids)))
        }
    now = time.time()
    found: dict[str, float | None] = {record: None for record in ids if record not in rows}
    for record, row in rows.items():
        if row[1] in final:
            found[record] = now - float(row[2] or 0.0)
    return found


def _hours(seconds: float) -> str:
    return f"{seconds / 3600:.1f} h"


def find_stale(database: Database, *, older_than_s: float, stalled_s: float) -> tuple[int, list[StaleJob]]:
    """(jobs `doing`, the stale ones among them)."""
    with database.reading() as conn:
        rows = conn.execute(_DOING, {"stalled_s": stalled_s}).all()
    wanted: dict[str, set[str]] = {"query": set(), "task": set()}
    named: dict[int, tuple[str, str]] = {}
    for row in rows:
        argument, kind = RECORDS.get(row.task_name, ("", ""))
        record = _args(row.args).get(argument)
        if kind and isinstance(record, str):
            wanted[kind].add(record)
            named[row.id] = (kind, record)
    ended = {kind: _ended(database, kind, ids) for kind, ids in wanted.items()}
    stale = []
    for row in rows:
        running = float(row.running_s) if row.running_s is not None else 0.0
        kind, record = named.get(row.id, ("", ""))
        if kind and record in ended[kind]:
            since = ended[kind][record]
            if since is None:
                stale.append(StaleJob(row.id, row.task_name, f"{kind} {record} no longer exists"))
                continue
            if since > older_than_s:
                stale.append(StaleJob(row.id, row.task_name, f"{kind} {record} ended {_hours(since)} ago"))
                continue
        if row.orphaned and running > older_than_s:
            why = f"its worker is gone and it started {_hours(running)} ago"
            stale.append(StaleJob(row.id, row.task_name, why))
    return len(rows), stale


def _args(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def prune_jobs(database: Database, *, older_than_s: float, stalled_s: float, dry_run: bool) -> Pruned:
    """Find the stale `doing` jobs and, unless `dry_run`, delete them, one transaction each."""
    if not database.is_postgres:
        raise NoQueue("there is no job queue without SLEUTH_DATABASE_URL=postgresql://…")
    with database.reading() as conn:
        if conn.execute(text("SELECT to_regclass('procrastinate_jobs')")).scalar() is None:
            raise NoQueue("the job queue's schema is not installed: run `sleuth db init`")
    doing, stale = find_stale(database, older_than_s=older_than_s, stalled_s=stalled_s)
    pruned = Pruned(doing, stale)
    if dry_run:
        return pruned
    for job in stale:
        try:
            with database.writing() as conn:
                conn.execute(text("SELECT procrastinate_finish_job_v1(:id, 'aborted', true)"), {"id": job.id})
        except DBAPIError:  # it left `doing` meanwhile (its worker finished it): not ours to delete
            continue
        pruned.removed += 1
    return pruned
