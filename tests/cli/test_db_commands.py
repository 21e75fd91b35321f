"""`sleuth db check|init|prune-jobs` (issue 42) against real databases: a throwaway PostgreSQL cluster
and SQLite files. A failure is one sentence and exit status 1, never a traceback."""

from __future__ import annotations

import os
import socket
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
from sqlalchemy import text, update
from typer.testing import CliRunner, Result

from sleuth.cli import app
from sleuth.server.queue import JobQueue
from sleuth.store.contexts.home import Home
from sleuth.store.database import Database, forget_database, open_database
from sleuth.store.records.task_schema import tasks_t
from sleuth.store.records.tasks import TaskStore
from tests.postgres import Postgres
from tests.s3 import S3Server


@pytest.fixture
def pg_url(postgres: Postgres, home: Home, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """A fresh PostgreSQL database as `SLEUTH_DATABASE_URL`, with no storage."""
    url = postgres.create_database()
    monkeypatch.setenv("SLEUTH_DATABASE_URL", url)
    monkeypatch.delenv("SLEUTH_STORAGE_URL", raising=False)
    yield url
    forget_database(url)
    postgres.drop_database(url)


def sleuth(*args: str) -> Result:
    return CliRunner().invoke(app, list(args))


def _lines(result: Result) -> dict[str, str]:
    """`sleuth db check`'s lines by what they check: `ok`, `failed` or `skipped`, then the sentence."""
    found = {}
    for line in result.output.splitlines():
        mark, name, sentence = line.split(maxsplit=2)
        found[name] = f"{mark} {sentence}"
    return found


def _no_traceback(result: Result) -> None:
    assert "Traceback" not in result.output
    assert result.exception is None or isinstance(result.exception, SystemExit)


def test_init_installs_the_schema_once_and_check_then_passes(pg_url: str, tmp_path: Path) -> None:
    before = sleuth("db", "check")
    assert before.exit_code == 1, before.output
    lines = _lines(before)
    assert lines["database"].startswith("ok PostgreSQL")
    assert lines["schema"] == "failed Sleuth's schema is not installed: run `sleuth db init`"
    assert lines["queue"].startswith("failed the job queue's schema (procrastinate's) is not installed")

    first = sleuth("db", "init")
    assert first.exit_code == 0, first.output
    assert "installed Sleuth's schema (version" in first.output
    assert "installed the job queue's schema (procrastinate" in first.output
    again = sleuth("db", "init")
    assert again.exit_code == 0, again.output
    assert "nothing to do: the schema was already installed and current" in again.output

    shared = tmp_path / "shared"
    shared.mkdir()
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("SLEUTH_STORAGE_URL", shared.as_uri())
        ready = sleuth("db", "check")
        assert ready.exit_code == 1  # a storage needs the heads' table, which only init makes
        assert "lacks the tables context_heads: run `sleuth db init`" in _lines(ready)["schema"]
        assert sleuth("db", "init").output.splitlines()[1] == "created the tables context_heads"
        ready = sleuth("db", "check")
    assert ready.exit_code == 0, ready.output
    assert [line.split()[0] for line in ready.output.splitlines()] == ["ok"] * 4
    assert _lines(ready)["storage"] == f"ok the storage {shared.as_uri()} answers"


def test_check_names_a_database_that_does_not_exist(
    postgres: Postgres, home: Home, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SLEUTH_DATABASE_URL", postgres.url("no_such_db"))
    result = sleuth("db", "check")
    assert result.exit_code == 1
    _no_traceback(result)
    lines = _lines(result)
    assert lines["database"] == (
        f"failed database no_such_db does not exist on 127.0.0.1:{postgres.port}: create it with `createdb "
        f"-h 127.0.0.1 -p {postgres.port} -O sleuth no_such_db` (as a role that may create databases)"
    )
    assert lines["schema"].startswith("skipped") and lines["queue"].startswith("skipped")
    assert sleuth("db", "init").exit_code == 1  # the same sentence, on stderr
    forget_database(postgres.url("no_such_db"))


def test_check_says_nothing_answers_on_a_closed_port(home: Home, monkeypatch: pytest.MonkeyPatch) -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]  # free once closed: nothing listens there
    url = f"postgresql://sleuth@127.0.0.1:{port}/sleuth"
    monkeypatch.setenv("SLEUTH_DATABASE_URL", url)
    result = sleuth("db", "check")
    assert result.exit_code == 1
    _no_traceback(result)
    assert _lines(result)["database"] == (
        f"failed PostgreSQL at 127.0.0.1:{port} did not answer: connection refused "
        "(is it running and listening there?)"
    )
    forget_database(url)


def test_sqlite_check_creates_nothing_and_init_repairs_a_missing_table(
    home: Home, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("SLEUTH_DATABASE_URL", raising=False)
    monkeypatch.delenv("SLEUTH_STORAGE_URL", raising=False)
    path = home.root / "server.sqlite"
    missing = sleuth("db", "check")
    assert missing.exit_code == 1
    assert (
        _lines(missing)["database"]
        == f"failed there is no server database at {path} yet: run `sleuth db init`"
    )
    assert not path.exists()

    assert sleuth("db", "init").exit_code == 0
    database = open_database(path)
    with database.writing() as conn:
        conn.execute(text("DROP TABLE api_key_contexts"))
    broken = sleuth("db", "check")
    assert broken.exit_code == 1
    assert _lines(broken)["schema"] == (
        "failed Sleuth's schema lacks the tables api_key_contexts: run `sleuth db init`"
    )
    repaired = sleuth("db", "init")
    assert repaired.exit_code == 0 and "created the tables api_key_contexts" in repaired.output
    assert sleuth("db", "check").exit_code == 0
    assert sleuth("db", "prune-jobs").exit_code == 2  # no queue on one machine
    forget_database(path)


# ------------------------------------------------------------------------------------- prune-jobs
def _take(database: Database, job_kind: str, *, gone: bool) -> int:
    """A procrastinate worker that takes the next job of `job_kind`'s queue, as `sleuth worker` does;
    `gone`: it then died and was pruned (its jobs stay `doing` with no worker)."""
    with database.writing() as conn:
        worker = conn.execute(text("SELECT worker_id FROM procrastinate_register_worker_v1()")).scalar_one()
        job = conn.execute(
            text("SELECT id FROM procrastinate_fetch_job_v2(ARRAY[:queue]::varchar[], :worker)"),
            {"queue": job_kind, "worker": worker},
        ).scalar_one()
        if gone:
            conn.execute(text("SELECT procrastinate_unregister_worker_v1(:worker)"), {"worker": worker})
    return int(job)


def _statuses(database: Database) -> dict[int, str]:
    with database.reading() as conn:
        return {row.id: row.status for row in conn.execute(text("SELECT id, status FROM procrastinate_jobs"))}


def test_prune_jobs_removes_the_stale_and_keeps_the_live(pg_url: str) -> None:
    assert sleuth("db", "init").exit_code == 0
    database = open_database(pg_url)
    store = TaskStore(database)
    ended, live, lost = (
        store.create("curate", context_id=None, context_slug=None, created_by=None) for _ in "abc"
    )
    for task in (ended, live, lost):
        store.start(task["id"], worker="w", lease_s=60)
    store.finish(ended["id"], "failed", error="boom")
    with database.writing() as conn:  # it ended two hours ago: its job was left behind
        conn.execute(
            update(tasks_t)
            .where(tasks_t.c.id == ended["id"])
            .values(finished_at=tasks_t.c.finished_at - 7200)
        )
    queue = JobQueue(database)
    try:
        for task in (ended, live, lost):
            queue.defer_task(task["id"])
        queue.defer_turn("qry_deleted-long-ago")
    finally:
        queue.close()
    stale_task = _take(database, "tasks", gone=False)  # a live worker, but its task ended
    kept = _take(database, "tasks", gone=False)  # a live worker running a live task
    lost_job = _take(database, "tasks", gone=True)  # its worker died; its task is still live
    no_query = _take(database, "turns", gone=True)
    with database.writing() as conn:  # the lost job began three hours ago
        conn.execute(
            text("UPDATE procrastinate_events SET at = at - interval '3 hours' WHERE job_id = :id"),
            {"id": lost_job},
        )

    dry = sleuth("db", "prune-jobs", "--dry-run")
    assert dry.exit_code == 0, dry.output
    assert f"job {stale_task} (sleuth.task): task {ended['id']} ended 2.0 h ago" in dry.output
    assert f"job {lost_job} (sleuth.task): its worker is gone and it started 3.0 h ago" in dry.output
    assert f"job {no_query} (sleuth.turn): query qry_deleted-long-ago no longer exists" in dry.output
    assert dry.output.splitlines()[-1] == "jobs doing: 4; stale: 3; nothing removed (--dry-run)"
    assert set(_statuses(database).values()) == {"doing"}

    pruned = sleuth("db", "prune-jobs")
    assert pruned.exit_code == 0, pruned.output
    assert pruned.output.splitlines()[-1] == "jobs doing: 4; stale: 3; removed: 3"
    assert _statuses(database) == {kept: "doing"}
    again = sleuth("db", "prune-jobs", "--older-than", "0s")  # a live worker's live task: never
    assert again.output.splitlines()[-1] == "jobs doing: 1; stale: 0; removed: 0"
    assert sleuth("db", "prune-jobs", "--older-than", "soon").exit_code == 2


def test_init_names_the_grant_a_role_without_rights_lacks(
    postgres: Postgres, pg_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    role = f"reader_{pg_url.rsplit('_', 1)[-1]}_{os.getpid()}"
    with psycopg.connect(postgres.url(), autocommit=True) as conn:
        conn.execute(f'CREATE ROLE "{role}" LOGIN')
    name = pg_url.rsplit("/", 1)[1]
    as_reader = f"postgresql://{role}@127.0.0.1:{postgres.port}/{name}"
    monkeypatch.setenv("SLEUTH_DATABASE_URL", as_reader)
    refused = sleuth("db", "init")  # PostgreSQL 15 on: only the owner may create in `public`
    assert refused.exit_code == 1
    _no_traceback(refused)
    assert f"role {role} may not create tables in database {name}" in refused.stderr
    assert f"`GRANT CREATE ON SCHEMA public TO {role}`" in " ".join(refused.stderr.split())
    forget_database(as_reader)


def test_check_says_the_queue_schema_is_older_than_procrastinate(pg_url: str) -> None:
    assert sleuth("db", "init").exit_code == 0
    with open_database(pg_url).writing() as conn:  # as a schema an older procrastinate installed
        conn.execute(text("DROP FUNCTION procrastinate_retry_job_v2"))
    result = sleuth("db", "check")
    assert result.exit_code == 1
    queue = _lines(result)["queue"]
    assert queue.startswith("failed the job queue's schema is older than procrastinate")
    assert "(it lacks procrastinate_retry_job_v2): apply procrastinate's migrations from" in queue
    init = sleuth("db", "init")  # only procrastinate's migrations upgrade it
    assert init.exit_code == 1 and "apply procrastinate's migrations" in init.stderr


def test_check_reaches_an_s3_storage(
    s3_server: S3Server, pg_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name, value in s3_server.env().items():
        monkeypatch.setenv(name, value)
    assert sleuth("db", "init").exit_code == 0
    monkeypatch.setenv("SLEUTH_STORAGE_URL", "s3://no-such-bucket/prod")
    missing = sleuth("db", "check")
    assert missing.exit_code == 1
    assert _lines(missing)["storage"] == (
        "failed bucket no-such-bucket does not exist: create it (`aws s3 mb s3://no-such-bucket`); "
        "Sleuth does not"
    )
    bucket = s3_server.new_bucket()
    monkeypatch.setenv("SLEUTH_STORAGE_URL", f"s3://{bucket}/prod")
    assert sleuth("db", "init").exit_code == 0  # the heads' table
    found = sleuth("db", "check")
    assert found.exit_code == 0, found.output
    assert _lines(found)["storage"] == f"ok the storage s3://{bucket}/prod answers"
