"""One task's work shared by many workers (a curate's sources): its parts, each taken by one worker at a
time, renewed by that worker's heartbeat and opened again when the worker stops renewing it.

`TaskParts` is the part of `TaskStore` (`store.tasks`) that keeps the `task_parts` table.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TypedDict

from sqlalchemy import func, insert, select, update

from sleuth.store.database import SqlStore
from sleuth.store.records.outage import durable
from sleuth.store.records.task_schema import parts_t


class TaskPart(TypedDict):
    """A part of a task, its state (`todo`, `taken` or `done`) and the worker that took it last."""

    part: str
    state: str
    worker: str | None


class TaskParts(SqlStore):
    """The parts of the server database's tasks."""

    @durable
    def add_parts(self, task_id: str, parts: Sequence[str]) -> None:
        """Split the task into `parts` (again after a restart: parts done stay done, parts taken by a
        worker that may be gone are open again)."""
        with self.writing() as conn:
            now = self.database.clock(conn)
            have = {
                row.part: row.state
                for row in conn.execute(
                    select(parts_t.c.part, parts_t.c.state).where(parts_t.c.task_id == task_id)
                )
            }
            for position, part in enumerate(dict.fromkeys(parts)):
                if part not in have:
                    conn.execute(
                        insert(parts_t).values(
                            task_id=task_id, part=part, position=position, state="todo", updated_at=now
                        )
                    )
            conn.execute(
                update(parts_t)
                .where(parts_t.c.task_id == task_id, parts_t.c.state == "taken")
                .values(state="todo", worker=None, updated_at=now)
            )

    @durable
    def take_part(self, task_id: str, worker: str) -> str | None:
        """The next open part of the task, now taken by `worker`; None when none is open."""
        with self.writing() as conn:
            part = conn.execute(
                select(parts_t.c.part)
                .where(parts_t.c.task_id == task_id, parts_t.c.state == "todo")
                .order_by(parts_t.c.position)
                .limit(1)
            ).scalar()
            if part is None:
                return None
            conn.execute(
                update(parts_t)
                .where(parts_t.c.task_id == task_id, parts_t.c.part == part)
                .values(state="taken", worker=worker, updated_at=self.database.clock(conn))
            )
            return str(part)

    def renew_parts(self, worker: str) -> None:
        """A worker's heartbeat: the parts it is doing are still being done."""
        with self.writing() as conn:
            conn.execute(
                update(parts_t)
                .where(parts_t.c.worker == worker, parts_t.c.state == "taken")
                .values(updated_at=self.database.clock(conn))
            )

    @durable
    def reopen_stale_parts(self, task_id: str, older_than_s: float) -> int:
        """Open again the parts whose worker stopped renewing them (it died); returns how many."""
        with self.writing() as conn:
            result = conn.execute(
                update(parts_t)
                .where(
                    parts_t.c.task_id == task_id,
                    parts_t.c.state == "taken",
                    parts_t.c.updated_at < self.database.clock(conn) - older_than_s,
                )
                .values(state="todo", worker=None)
            )
            return int(result.rowcount)

    @durable
    def finish_part(self, task_id: str, part: str) -> None:
        with self.writing() as conn:
            conn.execute(
                update(parts_t)
                .where(parts_t.c.task_id == task_id, parts_t.c.part == part)
                .values(state="done", updated_at=self.database.clock(conn))
            )

    def parts(self, task_id: str) -> list[TaskPart]:
        """The task's parts: `part`, `state` and the `worker` that took each last."""
        stmt = select(parts_t).where(parts_t.c.task_id == task_id).order_by(parts_t.c.part)
        with self.reading() as conn:
            return [TaskPart(part=r.part, state=r.state, worker=r.worker) for r in conn.execute(stmt)]

    @durable
    def part_counts(self, task_id: str) -> dict[str, int]:
        stmt = (
            select(parts_t.c.state, func.count())
            .where(parts_t.c.task_id == task_id)
            .group_by(parts_t.c.state)
        )
        with self.reading() as conn:
            return {str(row[0]): int(row[1]) for row in conn.execute(stmt)}
