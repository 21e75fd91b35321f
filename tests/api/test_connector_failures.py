"""A sync that fails, however it fails, is recorded on its connector and waits a period (issue 40,
item 11), over real HTTP: a bucket moto's S3 server does not have (boto3's own error), and a disk that
is full (an `OSError` from the sync). Before, only the connector's own errors were recorded: anything
else left `last_error` and `last_attempt_at` untouched, so the schedule started the same failing sync
at every 30 s tick."""

from __future__ import annotations

import datetime
import errno
from collections.abc import Iterator
from typing import Any

import pytest

from sleuth.compile.connectors import registry
from sleuth.server import connectors as connector_service
from sleuth.server.connectors import ConnectorSchedule
from sleuth.server.jobs import task_service
from tests.api.support import LiveServer, ServerFactory, unique_slug, wait_task
from tests.s3 import S3Server


@pytest.fixture
def server(make_server: ServerFactory) -> LiveServer:
    return make_server(connector_allow="127.0.0.1")


@pytest.fixture
def slug(server: LiveServer) -> Iterator[str]:
    name = unique_slug()
    server.client.post("/api/contexts", json={"slug": name, "name": "Failing"}).raise_for_status()
    yield name
    server.client.delete(f"/api/contexts/{name}")


def add_missing_bucket(server: LiveServer, slug: str, s3_server: S3Server) -> None:
    secret = {"access_key_id": "testing", "secret_access_key": "testing"}
    config = {"bucket": "no-such-bucket-here", "endpoint_url": s3_server.endpoint}
    made = server.client.post(
        f"/api/contexts/{slug}/connectors",
        json={"name": "bucket", "kind": "s3", "config": config, "secret": secret, "every": "1h"},
    )
    assert made.status_code == 200, made.text


def connector(server: LiveServer, slug: str) -> dict[str, Any]:
    [entry] = server.client.get(f"/api/contexts/{slug}/connectors").json()["connectors"]
    return dict(entry)


def added_hours_ago(server: LiveServer, slug: str, hours: float) -> None:
    """As if the connector had been added `hours` ago: its first scheduled sync is due now."""
    ctx = server.state.home.find(slug)
    with ctx.editing():
        entries = registry.load(ctx)
        then = datetime.datetime.now(datetime.UTC) - datetime.timedelta(hours=hours)
        entries["bucket"].created_at = then.strftime("%Y-%m-%dT%H:%M:%SZ")
        registry.save(ctx, entries)


def test_a_client_librarys_error_is_recorded(server: LiveServer, slug: str, s3_server: S3Server) -> None:
    add_missing_bucket(server, slug, s3_server)
    started = server.client.post(
        f"/api/contexts/{slug}/import", json={"connector": "bucket", "curate": False}
    )
    task = wait_task(server.client, started.json()["task_id"])
    assert task["state"] == "failed" and "NoSuchBucket" in task["error"], task
    entry = connector(server, slug)
    assert entry["last_attempt_at"] is not None, entry  # before: None, the failure was not recorded
    assert "NoSuchBucket" in entry["last_error"]


def test_any_failure_is_recorded_and_the_schedule_waits_a_period(
    server: LiveServer, slug: str, s3_server: S3Server, monkeypatch: pytest.MonkeyPatch
) -> None:
    add_missing_bucket(server, slug, s3_server)

    def disk_full(*args: object, **kwargs: object) -> Any:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(connector_service, "sync", disk_full)
    added_hours_ago(server, slug, 2)  # every 1h: due now
    schedule = ConnectorSchedule(server.state, task_service(server.state))
    [task_id] = schedule.run_once()
    task = wait_task(server.client, task_id)
    assert task["state"] == "failed" and "No space left" in task["error"], task
    entry = connector(server, slug)
    assert entry["last_error"] == "OSError: [Errno 28] No space left on device", entry
    assert entry["last_attempt_at"] is not None
    assert schedule.run_once() == []  # the next tick: not due again (before: a new sync every tick)
    later = datetime.datetime.fromisoformat(entry["last_attempt_at"].replace("Z", "+00:00")).timestamp()
    [again] = schedule.run_once(later + 3601)  # a period after the failed attempt
    assert wait_task(server.client, again)["state"] == "failed"
