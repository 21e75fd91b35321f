"""Tasks over real HTTP (spec/api.md §7.1): listing with filters and pages, stats, cancel (honoured, and
one that does not stop in time), `task_in_flight` conflicts, context deletion that waits for its
tasks, and recovery of tasks a stopped server left live. Slow compiles are simulated by replacing the
compiler the server calls (the server runs in this process)."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from sleuth.compile import pipeline
from sleuth.compile.pipeline import CompileReport, Progress
from sleuth.server.task_handle import Job, TaskHandle
from sleuth.server.task_service import TaskService
from sleuth.settings import Settings
from sleuth.store.records.tasks import TaskStore
from tests.api.support import ServerFactory, error, unique_slug, upload, wait_task


class SlowRun:
    """Stands in for `CompileRun`: works until released, reporting progress (so a cancel can stop
    it) unless `ignore_cancel` is set, in which case it never calls back and cannot be stopped."""

    release = threading.Event()
    ignore_cancel = False

    def __init__(
        self,
        ctx: Any,
        home: Any,
        manifest: Any,
        force: bool,
        progress: Progress,
        extractor: Any,
        *,
        settings: Settings,
    ):
        self.progress = progress
        self.ctx = ctx

    def execute(self) -> CompileReport:
        if not self.ignore_cancel:
            self.progress.start("parse", 1_000_000)
        deadline = time.monotonic() + 30
        while not self.release.is_set() and time.monotonic() < deadline:
            if not self.ignore_cancel:
                self.progress.advance("parse")
            time.sleep(0.01)
        return CompileReport(self.ctx.info().slug, None, None, False, "empty")


@pytest.fixture
def slow(monkeypatch: pytest.MonkeyPatch) -> Iterator[type[SlowRun]]:
    class Run(SlowRun):
        release = threading.Event()

    monkeypatch.setattr(pipeline, "CompileRun", Run)
    yield Run
    Run.release.set()


def new_context(client: httpx.Client) -> str:
    slug = unique_slug()
    assert client.post("/api/contexts", json={"slug": slug, "name": "tasks"}).status_code == 200
    assert upload(client, slug, "a.md", b"# A\n\nText.\n").status_code == 200
    return slug


def wait_state(client: httpx.Client, task_id: str, state: str, timeout: float = 10) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    while True:
        task: dict[str, Any] = client.get(f"/api/tasks/{task_id}").json()
        if task["state"] == state:
            return task
        assert time.monotonic() < deadline, task
        time.sleep(0.02)


def test_list_filters_pages_and_stats(make_server: ServerFactory) -> None:
    client = make_server().client
    slug = new_context(client)
    other = new_context(client)
    try:
        for name in ("b.md", "c.md"):
            upload(client, slug, name, b"text")
        page = client.get("/api/tasks", params={"context": slug, "limit": 2}).json()
        assert page["total"] == 3 and page["pages"] == 2 and page["page"] == 1 and len(page["items"]) == 2
        assert page["items"][0]["input"]["filename"] == "c.md"  # newest first
        second = client.get("/api/tasks", params={"context": slug, "limit": 2, "page": 2}).json()
        assert [t["input"]["filename"] for t in second["items"]] == ["a.md"] and second["offset"] == 2
        shifted = client.get(
            "/api/tasks", params={"context": slug, "limit": 2, "page": 9, "offset": 1}
        ).json()
        assert shifted["offset"] == 1 and shifted["page"] == 1 and len(shifted["items"]) == 2
        ctx_id = client.get(f"/api/contexts/{slug}").json()["id"]
        assert client.get("/api/tasks", params={"context": ctx_id}).json()["total"] == 3
        assert (
            client.get("/api/tasks", params={"workflow": "import", "state": "completed"}).json()["total"] == 4
        )
        assert client.get("/api/tasks", params={"q": other}).json()["total"] == 1
        assert client.get("/api/tasks", params={"workflow": "search"}).json() == {
            "items": [],
            "total": 0,
            "limit": 30,
            "offset": 0,
            "page": 1,
            "pages": 0,
        }
        task = page["items"][0]
        assert (
            task["project_id"] == "local" and task["workflow"] == "import" and task["created_by"] == "local"
        )
        assert task["context_id"] == ctx_id and "steps" not in task and task["progress"]["pct"] == 100
        stats = client.get(f"/api/tasks/{task['id']}/stats").json()
        assert stats["task_id"] == task["id"] and stats["tokens_total"] == 0 and stats["captured_at"]

        for params in ({"state": "bogus"}, {"limit": 0}, {"limit": 1001}, {"page": 0}, {"offset": -1}):
            error(client.get("/api/tasks", params=params), 400, "invalid_request")
        missing = "tsk_00000000-0000-7000-8000-000000000000"
        error(client.get(f"/api/tasks/{missing}"), 404, "task_not_found")
        error(client.get(f"/api/tasks/{missing}/stats"), 404, "task_not_found")
        error(client.delete(f"/api/tasks/{missing}"), 404, "task_not_found")
        error(client.get(f"/api/tasks/{missing}/files/list"), 404, "task_not_found")
        error(client.get(f"/api/tasks/{task['id']}/files/read/none.txt"), 404, "path_not_found")
        error(client.get(f"/api/tasks/{task['id']}/files/read/%2e%2e/x"), 400, "unsafe_path")
        assert client.get(f"/api/tasks/{task['id']}/files/list").json()["entries"] == []
        # Cancelling a finished task returns it unchanged.
        same = client.request(
            "DELETE", f"/api/tasks/{task['id']}", json={"reason": "late", "target": "x", "pushed": True}
        )
        assert same.status_code == 200 and same.json()["state"] == "completed"
        error(client.request("DELETE", f"/api/tasks/{task['id']}", json={"why": 1}), 400, "invalid_request")
    finally:
        client.delete(f"/api/contexts/{slug}")
        client.delete(f"/api/contexts/{other}")


def test_cancel_a_running_curate_and_conflicts(make_server: ServerFactory, slow: type[SlowRun]) -> None:
    client = make_server().client
    slug = new_context(client)
    try:
        started = client.post(f"/api/contexts/{slug}/curate", json={"force": True})
        task_id = started.json()["task_id"]
        running = wait_state(client, task_id, "running")
        assert running["input"]["force"] is True and running["running_from"] is not None
        ctx = client.get(f"/api/contexts/{slug}").json()
        assert ctx["is_curating"] is True and ctx["curate_task_id"] == task_id
        assert client.get("/api/contexts").json()[0]["stats"]["tasks_active"] == 1

        # A second curate (or a delete-sources curate) conflicts; uploads do not.
        conflict = error(client.post(f"/api/contexts/{slug}/curate"), 409, "task_in_flight")
        assert conflict["task_id"] == task_id
        body = {"sources": ["uploads/a.md"]}
        error(client.post(f"/api/contexts/{slug}/curate/delete-sources", json=body), 409, "task_in_flight")
        error(client.post(f"/api/contexts/{slug}/pack"), 409, "task_in_flight")
        assert upload(client, slug, "late.md", b"late").status_code == 200

        # Progress is written while it runs.
        deadline = time.monotonic() + 5
        while client.get(f"/api/tasks/{task_id}").json()["progress"]["phase"] != "parse":
            assert time.monotonic() < deadline
            time.sleep(0.02)
        listed = client.get("/api/tasks", params={"state": "running", "workflow": "curate"}).json()
        assert [t["id"] for t in listed["items"]] == [task_id]

        cancelled = client.request("DELETE", f"/api/tasks/{task_id}", json={"reason": "changed my mind"})
        assert cancelled.status_code == 200, cancelled.text
        task = cancelled.json()
        assert task["state"] == "cancelled" and "changed my mind" in task["error"]
        assert task["steps"][-1]["status"] == "cancelled"
        assert client.get(f"/api/contexts/{slug}").json()["is_curating"] is False
        assert client.get(f"/api/contexts/{slug}/tasks/stats").json()["tasks_cancelled"] == 1
        # The context is free again.
        slow.release.set()
        again = client.post(f"/api/contexts/{slug}/curate")
        assert wait_task(client, again.json()["task_id"])["state"] == "completed"
    finally:
        slow.release.set()
        client.delete(f"/api/contexts/{slug}")


def test_stop_timeout_and_context_delete(
    make_server: ServerFactory, slow: type[SlowRun], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SLEUTH_TASK_STOP_TIMEOUT_S", "0.3")
    client = make_server().client
    slug = new_context(client)
    slow.ignore_cancel = True
    try:
        task_id = client.post(f"/api/contexts/{slug}/curate").json()["task_id"]
        wait_state(client, task_id, "running")
        body = error(client.delete(f"/api/tasks/{task_id}"), 504, "task_stop_timeout")
        assert body["task_id"] == task_id
        assert client.get(f"/api/tasks/{task_id}").json()["state"] == "stopping"
        error(client.delete(f"/api/contexts/{slug}"), 504, "task_stop_timeout")
        assert client.get(f"/api/contexts/{slug}").status_code == 200  # nothing was deleted
        slow.release.set()
        done = wait_task(client, task_id)
        assert done["state"] == "completed"  # it finished before it noticed the cancel
    finally:
        slow.release.set()
    deleted = client.delete(f"/api/contexts/{slug}")
    assert deleted.status_code == 200, deleted.text


def test_delete_context_cancels_its_tasks(make_server: ServerFactory, slow: type[SlowRun]) -> None:
    client = make_server().client
    slug = new_context(client)
    task_id = client.post(f"/api/contexts/{slug}/curate").json()["task_id"]
    wait_state(client, task_id, "running")
    assert client.delete(f"/api/contexts/{slug}").json() == {"deleted": True, "slug": slug}
    task = client.get(f"/api/tasks/{task_id}").json()
    assert task["state"] == "cancelled" and "context deleted" in task["error"]
    error(client.get(f"/api/contexts/{slug}"), 404, "context_not_found")


def test_interrupted_tasks_fail_at_start(make_server: ServerFactory, tmp_path: Path) -> None:
    with TaskStore(tmp_path / "server.sqlite") as store:
        left = store.create("curate", context_id="ctx_gone", context_slug="gone", created_by="local")
        store.start(left["id"])
        queued = store.create("import", context_id="ctx_gone", context_slug="gone", created_by="local")
    client = make_server().client
    for task_id in (left["id"], queued["id"]):
        task = client.get(f"/api/tasks/{task_id}").json()
        assert task["state"] == "failed" and task["error"] == "server restarted"
    assert client.get("/api/tasks", params={"context": "gone"}).json()["total"] == 2


def test_a_task_counts_the_runs_begun(make_server: ServerFactory, tmp_path: Path) -> None:
    """spec/api.md §7.1: `attempts` counts the runs of a task; a curate its worker handed back (it
    stopped, or died) and another began again has 2, one never begun 0."""
    with TaskStore(tmp_path / "server.sqlite") as store:
        twice = store.create("curate", context_id="ctx_gone", context_slug="gone", created_by="local")
        assert store.start(twice["id"], "worker:a", 30.0)
        assert store.release(twice["id"], "worker:a")  # its worker stopped: back to the queue
        assert store.start(twice["id"], "worker:b", 30.0)
        never = store.create("import", context_id="ctx_gone", context_slug="gone", created_by="local")
    client = make_server().client
    assert client.get(f"/api/tasks/{twice['id']}").json()["attempts"] == 2
    assert client.get(f"/api/tasks/{never['id']}").json()["attempts"] == 0
    slug = new_context(client)
    try:
        task_id = client.post(f"/api/contexts/{slug}/curate").json()["task_id"]
        assert wait_task(client, task_id)["attempts"] == 1
        listed = client.get("/api/tasks", params={"workflow": "curate", "context": slug}).json()["items"]
        assert [task["attempts"] for task in listed] == [1]
    finally:
        client.delete(f"/api/contexts/{slug}")


def test_store_state_changes(tmp_path: Path) -> None:
    """A cancel never moves a terminal task, and a finished task cannot finish twice."""
    with TaskStore(tmp_path / "tasks.sqlite") as store:
        task = store.create(
            "curate", context_id="c", context_slug="s", created_by="me", input={"force": False}
        )
        assert store.request_stop(task["id"])["state"] == "cancelled"
        assert store.start(task["id"]) is False
        other = store.create("curate", context_id="c", context_slug="s", created_by="me")
        assert store.start(other["id"]) is True
        assert store.request_stop(other["id"], "why")["state"] == "stopping"
        assert store.finish(other["id"], "completed", output={"ok": True}) is True
        assert store.finish(other["id"], "failed", error="late") is False
        final = store.require(other["id"])
        assert final["state"] == "completed" and final["output"] == {"ok": True} and final["error"] is None
        assert store.request_stop(other["id"])["state"] == "completed"
        stats = store.context_stats("c")
        assert stats["tasks_total"] == 2 and stats["tasks_cancelled"] == 1 and stats["tasks_completed"] == 1
        items, total = store.page(q="cur", limit=1)
        assert total == 2 and [t["id"] for t in items] == [other["id"]]
        assert store.page(q="%")[1] == 0  # LIKE wildcards are literal


def test_a_run_another_worker_took_over_ends_quietly(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A worker that froze past its lease wakes to a task begun again elsewhere, and its run then fails
    (here: its database session was ended while it was frozen). That run is no failure of the task: the
    successor's run counts, so it logs that it lost its hold, ends nothing, and runs no clean-up."""
    cleaned: list[str] = []
    with TaskStore(tmp_path / "tasks.sqlite") as store:
        service = TaskService(
            store,
            tmp_path / "files",
            1,
            1.0,
            worker="worker:a:1:x",
            kinds={"curate": _taken_over(store, cleaned)},
        )
        task = store.create("curate", context_id="c", context_slug="s", created_by="me")
        store.set_job(task["id"], {"kind": "curate", "args": {}, "phases": []})
        with caplog.at_level("WARNING", logger="sleuth"):
            service.run_queued(task["id"])
        service.close()
        row = store.require(task["id"])
    assert row["state"] == "running" and row["worker"] == "worker:b:1:y", row  # the successor's, untouched
    assert "lost its hold" in caplog.text and "failed" not in caplog.text, caplog.text
    assert cleaned == []


def _taken_over(store: TaskStore, cleaned: list[str]) -> Callable[[dict[str, Any]], Job]:
    def build(_args: dict[str, Any]) -> Job:
        def job(handle: TaskHandle) -> None:
            handle.at_end.append(lambda: cleaned.append("input"))
            store.requeue_lost(3, now=time.time() + 3600)  # its lease ran out while it was frozen
            assert store.start(handle.task_id, "worker:b:1:y", lease_s=30)
            raise ConnectionError("the database ended this session while the process was stopped")

        return job

    return build


def test_a_run_that_takes_its_hold_during_a_heartbeat_is_not_lost(tmp_path: Path) -> None:
    """A clean clone's archive import ended `cancelled` ("this process lost its hold"): the heartbeat
    read the worker's holds, the run's `start` then committed its hold and the run marked itself held,
    and the heartbeat, looking at the runs after its read, took the new run for one whose lease had run
    out. The interleaving is forced here: the renewal lets the run start between its read and its check."""
    worker = "worker:a:1:x"
    renewed, holding, finish = threading.Event(), threading.Event(), threading.Event()
    handles: list[TaskHandle] = []

    def build(_args: dict[str, Any]) -> Job:
        def job(handle: TaskHandle) -> None:
            handles.append(handle)
            holding.set()
            assert finish.wait(30)

        return job

    with TaskStore(tmp_path / "tasks.sqlite") as store:
        service = TaskService(store, tmp_path / "files", 1, 60.0, worker=worker, kinds={"curate": build})
        task = store.create("curate", context_id="c", context_slug="s", created_by="me")
        store.set_job(task["id"], {"kind": "curate", "args": {}, "phases": []})
        start, renew = store.start, store.renew

        def late_start(*args: Any, **kwargs: Any) -> bool:
            assert renewed.wait(30)  # after the heartbeat read the holds
            return start(*args, **kwargs)

        def read_then_let_the_run_start(*args: Any, **kwargs: Any) -> list[tuple[str, str]]:
            held = renew(*args, **kwargs)
            renewed.set()
            assert holding.wait(30)  # the run has taken its hold and marked itself held
            return held

        store.start = late_start  # type: ignore[method-assign]
        store.renew = read_then_let_the_run_start  # type: ignore[method-assign]
        run = threading.Thread(target=service.run_queued, args=(task["id"],))
        run.start()
        try:
            service.beat()
            stopped = not handles or handles[0].cancelled
        finally:
            finish.set()
            run.join(30)
            service.close()
        assert not stopped, "a run that took its hold during a heartbeat was stopped as lost"
        assert store.require(task["id"])["state"] == "completed"
