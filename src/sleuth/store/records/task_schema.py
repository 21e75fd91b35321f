"""The tables of the task store (`store.tasks`): one row per task, and the parts of a task that many
workers share. They live in their own `MetaData`, so the query store and the task store evolve
separately; `create_all` only adds what is missing.
"""

from __future__ import annotations

from sqlalchemy import Column, Float, Index, Integer, MetaData, String, Table, Text

metadata = MetaData()

tasks_t = Table(
    "tasks",
    metadata,
    Column("id", String(80), primary_key=True),
    Column("context_id", String(80)),
    Column("context_slug", String(80)),  # the slug when the task was made, for `GET /tasks?q=`
    Column("workflow", String(32), nullable=False),
    Column("state", String(32), nullable=False),
    Column("created_by", String(128)),
    Column("error", Text),
    Column("input", Text, nullable=False),  # JSON
    Column("output", Text),  # JSON or null
    Column("steps", Text, nullable=False),  # JSON list
    Column("progress", Text, nullable=False),  # JSON object
    Column("tokens_prompt", Integer, nullable=False, default=0),
    Column("tokens_completion", Integer, nullable=False, default=0),
    Column("timeout_seconds", Integer),
    Column("created_at", Float, nullable=False),
    Column("running_from", Float),
    Column("finished_at", Float),
    Column("last_activity_at", Float, nullable=False),
    # Many servers and workers: the worker running it and until when (its heartbeat renews), the job
    # kind and arguments a worker runs it from, and how many times a worker began it.
    Column("worker", String(200)),
    Column("lease_until", Float),
    Column("job", Text),  # JSON {"kind": ..., "args": {...}}, or null for a job run in-process
    Column("attempts", Integer),
    Index("ix_tasks_context_state", "context_id", "state"),
    Index("ix_tasks_state", "state"),
)


parts_t = Table(
    "task_parts",
    metadata,
    # A task split for many workers (a curate's sources): each part is taken by one worker at a time.
    Column("task_id", String(80), primary_key=True),
    Column("part", Text, primary_key=True),
    Column("position", Integer, nullable=False),  # taken in this order (the splitter puts big ones first)
    Column("state", String(16), nullable=False),  # todo | taken | done
    Column("worker", String(200)),
    Column("updated_at", Float, nullable=False),
)
