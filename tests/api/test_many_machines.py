"""Many machines on one: a throwaway PostgreSQL, a shared storage directory (`file://`, as an NFS or
EFS volume is mounted), two `sleuth serve` processes and two `sleuth worker` processes on loopback, each
with a `$SLEUTH_HOME` of its own: they share nothing but the database and the storage. The sample
context is moved there first with `sleuth share`. Everything below goes through their HTTP APIs and
real process signals:

- a question asked on server A, streamed from server B and cancelled from server B;
- a stream broken on A and resumed on B without a gap or a duplicate;
- a worker killed (SIGKILL) mid-turn leaves the turn `failed`, never `in_progress`;
- a curate started on A whose worker is killed completes on the other worker; one whose worker is
  frozen (SIGSTOP) completes once on the other, the frozen one publishing nothing when it wakes;
- admission limits (places, busy session) hold across the two servers;
- a context made and curated through one server is read, asked and packed through the other, each
  node with its own home;
- a connector's sync, an archive import, a pack and a restore, asked of a server, run on workers, as
  every named job does (issue 41); an upload reaches the worker through the storage.

The model is the one double: an OpenAI-compatible HTTP server on 127.0.0.1 (`tests/models/slow.py`) whose
every step sleeps, so turns last long enough to be streamed, cancelled and killed, and whose extraction
replies come slowly, so curates are still running when their worker is killed, stopped or frozen.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import threading
import time
import zipfile
from collections.abc import Callable, Iterator
from io import BytesIO
from pathlib import Path
from typing import Any

import httpx
import pytest

from sleuth.compile.pipeline import CompileReport
from sleuth.store.contexts.home import Home
from sleuth.store.records.server_db import WORKER_LOST_ERROR
from sleuth.store.records.tasks import TaskStore
from tests import loopback
from tests.api.support import unique_slug, upload, wait_task
from tests.cluster import Cluster
from tests.models.slow import NOTES_MANIFEST, SlowModel, catalog_entry, notes
from tests.models.wire import Canned, WireServer, wire_server
from tests.postgres import Postgres

MODEL = "test/slow"
STEP_S = 1.0
#: A hold lasts three beats: 7.5 s, so a loaded test machine (the whole suite on 2 cores, two clusters, a
#: curate's embedding on every core) that starves a heartbeat thread for a few seconds does not hand a
#: running turn or curate to another worker (at 1.5 s, a 4.5 s hold lapsed once in six clean runs).
HEARTBEAT_S = 2.5
#: Each extraction call of a curate of notes takes this long: the curates below are still running when
#: their worker is killed, stopped or frozen, whatever the machine's speed.
EXTRACTION_S = 2.0


@pytest.fixture(scope="module")
def llm() -> Iterator[WireServer]:
    with wire_server(
        Canned(500, {"error": {"message": "unused"}}), "/v1", SlowModel(STEP_S, EXTRACTION_S)
    ) as wire:
        yield wire


@pytest.fixture(scope="module")
def cluster(
    postgres: Postgres,
    sample_home: tuple[Home, CompileReport],
    llm: WireServer,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[Cluster]:
    root = tmp_path_factory.mktemp("many")
    home = root / "seed"  # a single machine's home, shared below; each process gets its own
    shutil.copytree(sample_home[0].root, home)
    (home / "config.toml").write_text(
        'default = "sleuth/offline"\n\n' + catalog_entry(llm.url, MODEL),
        encoding="utf-8",
    )
    url = postgres.create_database("many")
    (root / "shared").mkdir()  # the storage, as a volume mounted there
    env = {
        **os.environ,
        "SLEUTH_HOME": str(home),
        "SLEUTH_DATABASE_URL": url,
        "SLEUTH_STORAGE_URL": (root / "shared").as_uri(),
        "SLEUTH_WORKER_HEARTBEAT_S": str(HEARTBEAT_S),
        "SLEUTH_MAX_CONCURRENT_TURNS": "2",
        "SLEUTH_MAX_QUEUED_TURNS": "1",
        "SLEUTH_WORKER_CONCURRENCY": "2",
        "SLEUTH_TASK_STOP_TIMEOUT_S": "1.5",
        "SLEUTH_CONNECTOR_FOLDERS": str(root / "shares"),
    }
    (root / "shares").mkdir()
    env.pop("SLEUTH_MODEL", None)
    shared = subprocess.run(
        [sys.executable, "-m", "sleuth", "share"], env=env, capture_output=True, text=True, timeout=120
    )
    assert shared.returncode == 0 and "acme: shared (live v" in shared.stdout, shared.stdout + shared.stderr
    logs = root / "logs"
    logs.mkdir()
    cluster = Cluster(url, home, env, logs=logs)
    try:
        cluster.start_server()
        cluster.start_server()
        cluster.start_worker()
        cluster.start_worker()
        yield cluster
    finally:
        cluster.close()


def _ask(base: str, **body: Any) -> httpx.Response:
    body.setdefault("scope", ["acme"])
    body.setdefault("model", MODEL)
    body.setdefault("background", True)
    return loopback.post(f"{base}/api/query", json=body, timeout=60)


def _query(base: str, query_id: str) -> dict[str, Any]:
    found: dict[str, Any] = loopback.get(f"{base}/api/queries/{query_id}", timeout=30).json()
    return found


def _task_worker(tasks: TaskStore, task_id: str) -> str | None:
    """The worker holding the task now; None while none does (or the task is gone)."""
    task = tasks.get(task_id)
    return None if task is None else task["worker"]


def _until(check: Callable[[], Any], timeout_s: float = 60.0, what: str = "condition") -> Any:
    deadline = time.monotonic() + timeout_s
    while True:
        value = check()
        if value:
            return value
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.1)


def _frames(
    base: str,
    query_id: str,
    last_event_id: int | None = None,
    stop_after: int | None = None,
    out: list[tuple[int | None, str]] | None = None,
) -> list[tuple[int | None, str]]:
    """(id, event) of each SSE frame, appended to `out` as it arrives, until the stream ends or
    `stop_after` frames with ids arrived."""
    headers = {} if last_event_id is None else {"Last-Event-ID": str(last_event_id)}
    out = [] if out is None else out
    with loopback.stream(
        "GET", f"{base}/api/queries/{query_id}/events", headers=headers, timeout=120
    ) as resp:
        assert resp.status_code == 200
        frame: dict[str, str] = {}
        for line in resp.iter_lines():
            if line == "":
                if "event" in frame:
                    out.append((int(frame["id"]) if "id" in frame else None, frame["event"]))
                    if stop_after is not None and sum(1 for i, _ in out if i is not None) >= stop_after:
                        return out
                frame = {}
            elif not line.startswith(":") and ":" in line:
                name, _, value = line.partition(":")
                frame[name] = value.strip()
    return out


def test_asked_on_one_server_streamed_and_cancelled_on_the_other(cluster: Cluster) -> None:
    a, b = cluster.servers
    asked = _ask(a, ask="How many days a week can employees work remotely?", max_steps=8)
    assert asked.status_code == 202, asked.text
    query_id = asked.json()["id"]
    seen: list[tuple[int | None, str]] = []
    streaming = threading.Thread(target=lambda: _frames(b, query_id, out=seen))
    streaming.start()
    try:
        _until(lambda: any(e == "response.step" for _, e in seen), 60, "a step")
    except AssertionError:
        raise AssertionError(f"{seen} {_query(a, query_id)}") from None
    cancelled = loopback.post(f"{b}/api/queries/{query_id}/cancel", timeout=60).json()
    assert cancelled["status"] == "cancelled", cancelled
    streaming.join(timeout=60)
    events = [e for _, e in seen]
    assert events[-2:] == ["response.cancelled", "query"], events
    assert _query(a, query_id)["status"] == "cancelled"
    with cluster.db() as db:
        worker, _ = db.holder(query_id)
    assert worker is not None and worker.startswith("worker:")  # a worker ran it, not a server


def test_a_stream_broken_on_one_server_resumes_on_the_other(cluster: Cluster) -> None:
    a, b = cluster.servers
    query_id = _ask(a, ask="What is the refund window?", max_steps=3).json()["id"]
    first = _frames(a, query_id, stop_after=3)  # then the connection is dropped
    last = max(i for i, _ in first if i is not None)
    rest = _frames(b, query_id, last_event_id=last + 1)
    ids = [i for i, _ in first + rest if i is not None]
    assert ids == list(range(1, len(ids) + 1)), ids  # no gap, no duplicate
    assert rest[-1][1] == "query" and rest[-2][1] in ("response.completed", "response.failed")
    with cluster.db() as db:
        assert [e["seq"] for e in db.events(query_id)] == ids


def test_a_stopping_server_ends_its_streams_and_they_resume_elsewhere(cluster: Cluster) -> None:
    b = cluster.servers[1]
    c = cluster.start_server()
    server_c = cluster.processes[-1]
    query_id = _ask(c, ask="What is the travel policy?", max_steps=4).json()["id"]
    seen: list[tuple[int | None, str]] = []
    streaming = threading.Thread(target=lambda: _frames(c, query_id, out=seen))
    streaming.start()
    _until(lambda: any(e == "response.step" for _, e in seen), 60, "a step")
    server_c.send_signal(signal.SIGTERM)
    streaming.join(timeout=20)
    assert not streaming.is_alive(), "the stream outlived its server's drain"
    assert server_c.wait(timeout=40) in (0, -signal.SIGTERM)  # uvicorn re-raises the signal once drained
    assert seen[-1][1] != "query"  # cut before the end: no terminal event, no query frame
    last = max(i for i, _ in seen if i is not None)
    rest = _frames(b, query_id, last_event_id=last + 1)
    ids = [i for i, _ in seen + rest if i is not None]
    assert ids == list(range(1, len(ids) + 1)) and rest[-1][1] == "query", (seen, rest)
    cluster.servers.remove(c)


def test_a_worker_killed_mid_turn_leaves_the_turn_failed(cluster: Cluster) -> None:
    a, b = cluster.servers
    query_id = _ask(a, ask="Which policies cover travel?", max_steps=8).json()["id"]
    with cluster.db() as db:
        holder = _until(lambda: db.holder(query_id)[0], 60, "a worker to take the turn")
    cluster.kill(cluster.worker_pid(holder))
    ended = _until(lambda: (q := _query(b, query_id))["status"] != "in_progress" and q, 60, "the turn to end")
    assert ended["status"] == "failed" and ended["error"] == WORKER_LOST_ERROR, ended
    events = [e for _, e in _frames(b, query_id)]
    assert events[-2:] == ["response.failed", "query"]
    cluster.start_worker()  # the next tests have two workers again


def test_admission_limits_hold_across_servers(cluster: Cluster) -> None:
    a, b = cluster.servers
    # 2 running + 1 queued places in all: the two servers share them.
    first = _ask(a, ask="one", max_steps=6)
    second = _ask(b, ask="two", max_steps=6)
    third = _ask(a, ask="three", max_steps=6)
    assert [r.status_code for r in (first, second, third)] == [202, 202, 202], third.text
    refused = _ask(b, ask="four", max_steps=6)
    assert refused.status_code == 429 and refused.json()["code"] == "too_many_queries", refused.text
    # One turn per session, whichever server is asked.
    busy = _ask(b, ask="again", session_id=first.json()["session_id"])
    assert busy.status_code == 409 and busy.json()["code"] == "session_busy", busy.text
    for response, base in ((first, b), (second, a), (third, b)):
        loopback.post(f"{base}/api/queries/{response.json()['id']}/cancel", timeout=60)
    for response in (first, second, third):
        assert _query(a, response.json()["id"])["status"] in ("cancelled", "completed", "failed")


def _upload_corpus(client: httpx.Client, slug: str) -> None:
    assert client.post("/api/contexts", json={"slug": slug, "name": "Shared"}).status_code == 200
    corpus = Path(__file__).parents[2] / "examples" / "acme-corpus"
    for path in sorted(p for p in corpus.rglob("*") if p.is_file()):
        assert upload(client, slug, path.name, path.read_bytes()).status_code == 200


def _notes(client: httpx.Client, slug: str, files: int, seed: int) -> str:
    """A context of `files` new notes whose curate waits on the slow model (`EXTRACTION_S` a call);
    returns the curate's task id."""
    made = client.post("/api/contexts", json={"slug": slug, "name": "Notes", "manifest": NOTES_MANIFEST})
    assert made.status_code == 200, made.text
    for name, text in notes(files, seed).items():
        assert upload(client, slug, name, text.encode()).status_code == 200
    started = client.post(f"/api/contexts/{slug}/curate", json={"model": MODEL})
    assert started.status_code == 200, started.text
    return str(started.json()["task_id"])


def test_a_curate_fans_out_over_the_workers(cluster: Cluster) -> None:
    """Each source is embedded and summarised by whichever worker takes it; the finalize then finds every
    vector."""
    a = cluster.servers[0]
    slug = unique_slug()
    with loopback.client(base_url=a, timeout=60) as on_a:
        task_id = _notes(on_a, slug, files=8, seed=11)
        done = wait_task(on_a, task_id, timeout=180)
    assert done["state"] == "completed", done
    with TaskStore(cluster.database_url) as tasks:
        parts = tasks.parts(task_id)
    assert len(parts) == 8 and {p["state"] for p in parts} == {"done"}
    assert len({p["worker"] for p in parts}) == 2, parts  # both workers took sources
    usage = done["output"]["counts"]
    # every note's chunks were embedded by the parts; the finalize embeds only the 8 summaries
    assert usage["embedded"] == 8 and usage["embedded_from_cache"] >= 8, usage


def test_two_servers_asked_to_curate_one_context_at_once_start_one_curate(cluster: Cluster) -> None:
    a, b = cluster.servers[0], cluster.servers[-1]
    slug = unique_slug()
    with loopback.client(base_url=a, timeout=60) as on_a:
        _upload_corpus(on_a, slug)
    answers: list[httpx.Response] = []
    barrier = threading.Barrier(4)

    def curate(base: str) -> None:
        barrier.wait()
        answers.append(loopback.post(f"{base}/api/contexts/{slug}/curate", json={}, timeout=60))

    threads = [threading.Thread(target=curate, args=(base,)) for base in (a, b, a, b)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    codes = sorted(r.status_code for r in answers)
    assert codes == [200, 409, 409, 409], [r.text for r in answers]
    started = next(r for r in answers if r.status_code == 200).json()["task_id"]
    with loopback.client(base_url=b, timeout=60) as on_b:
        task = wait_task(on_b, started, timeout=180)
        assert task["state"] == "completed", task


def test_a_curate_whose_worker_is_killed_completes_on_the_other(cluster: Cluster) -> None:
    a, b = cluster.servers
    slug = unique_slug()
    with loopback.client(base_url=a, timeout=60) as on_a, loopback.client(base_url=b, timeout=120) as on_b:
        _upload_corpus(on_a, slug)
        task_id = on_a.post(f"/api/contexts/{slug}/curate", json={}).json()["task_id"]
        with TaskStore(cluster.database_url) as tasks:
            holder = _until(lambda: _task_worker(tasks, task_id), 60, "a worker to take the curate")
            cluster.kill(cluster.worker_pid(holder))
            done = wait_task(on_b, task_id, timeout=180)
            assert done["state"] == "completed", done
            row = tasks.get(task_id)
            assert row is not None
        assert row["attempts"] == 2 and row["worker"] != holder  # begun again, on the other worker
        ask = {"ask": "How many days a week can employees work remotely?", "scope": [slug]}
        answer = on_b.post("/api/query", json=ask).json()
        assert answer["status"] == "completed" and answer["citations"], answer
    cluster.start_worker()


def test_a_worker_stopped_mid_curate_hands_it_back_and_it_completes(cluster: Cluster) -> None:
    """SIGTERM: the worker takes no new job and gives its curate the grace period (1.5 s here); a curate
    still running then is handed back to the queue, and another worker completes it, never `failed`.
    Its model takes 2 s a call, so the curate outlasts the grace."""
    a, b = cluster.servers[0], cluster.servers[-1]
    slug = unique_slug()
    with loopback.client(base_url=a, timeout=60) as on_a, loopback.client(base_url=b, timeout=120) as on_b:
        task_id = _notes(on_a, slug, files=6, seed=7)
        with TaskStore(cluster.database_url) as tasks:
            holder = _until(lambda: _task_worker(tasks, task_id), 60, "a worker to take the curate")
            proc = next(p for p in cluster.workers if p.pid == cluster.worker_pid(holder))
            proc.send_signal(signal.SIGTERM)
            assert proc.wait(timeout=90) in (0, -signal.SIGTERM)
            cluster.workers.remove(proc)
            done = wait_task(on_b, task_id, timeout=300)
            row = tasks.get(task_id)
            assert row is not None
        assert done["state"] == "completed", done
        assert row["attempts"] == 2 and row["worker"] != holder, row  # handed back, begun again elsewhere
    cluster.start_worker()


def test_a_curate_whose_worker_freezes_completes_once_on_the_other(cluster: Cluster) -> None:
    """SIGSTOP (a paused VM, a stalled host): the frozen worker stops renewing its holds, so its curate
    is begun again on the other worker, which waits for the frozen one's curate lock to lapse instead
    of failing at once. Woken (SIGCONT), the first worker finds it lost the task and its lock, and
    publishes nothing over its successor."""
    a, b = cluster.servers[0], cluster.servers[-1]
    slug = unique_slug()
    with loopback.client(base_url=a, timeout=60) as on_a, loopback.client(base_url=b, timeout=120) as on_b:
        task_id = _notes(on_a, slug, files=4, seed=13)
        with TaskStore(cluster.database_url) as tasks:
            holder = _until(lambda: _task_worker(tasks, task_id), 60, "a worker to take the curate")
            frozen = cluster.worker_pid(holder)
            os.kill(frozen, signal.SIGSTOP)
            try:
                done = wait_task(on_b, task_id, timeout=300)
            finally:
                os.kill(frozen, signal.SIGCONT)
            row = tasks.get(task_id)
            assert row is not None
        assert done["state"] == "completed", done
        assert row["attempts"] == 2 and row["worker"] != holder, row
        log = next(
            p for p in cluster.logs.glob("worker-*.log") if f":{frozen}:" in p.read_text(errors="replace")
        )
        _until(lambda: "lost its hold" in log.read_text(errors="replace"), 60, "the woken worker to stop")
        live = on_a.get(f"/api/contexts/{slug}").json()["live_version"]
        assert live == done["output"]["live_version"], (live, done["output"])
        answer = on_b.post("/api/query", json={"ask": "What is note 1 about?", "scope": [slug]}).json()
        assert answer["status"] == "completed", answer


def test_nodes_with_homes_of_their_own_share_contexts_through_the_storage(cluster: Cluster) -> None:
    """Made and curated through A (a worker runs the curate), read, asked, packed and deleted through B:
    each process has its own home, so all of it went through the database and the storage."""
    a, b = cluster.servers[0], cluster.servers[-1]
    assert len(set(cluster.homes)) == len(cluster.homes) >= 4
    slug = unique_slug()
    with loopback.client(base_url=a, timeout=60) as on_a, loopback.client(base_url=b, timeout=120) as on_b:
        _upload_corpus(on_a, slug)
        assert (
            on_a.put(f"/api/contexts/{slug}", json={"guide": "Answer from the handbook."}).status_code == 200
        )
        listed = on_b.get(f"/api/contexts/{slug}/source/list/uploads").json()
        assert len(listed["entries"]) >= 3, listed
        task_id = on_a.post(f"/api/contexts/{slug}/curate", json={}).json()["task_id"]
        done = wait_task(on_b, task_id, timeout=180)
        assert done["state"] == "completed", done
        report = on_b.get(f"/api/tasks/{task_id}/files/read/curate-report.json")  # written on a worker
        assert report.status_code == 200 and report.json()["flipped"] is True
        seen = on_b.get(f"/api/contexts/{slug}").json()
        assert (
            seen["live_version"] == done["output"]["live_version"]
            and seen["guide"] == "Answer from the handbook."
        )
        answer = on_b.post(
            "/api/query", json={"ask": "How many days a week can employees work remotely?", "scope": [slug]}
        ).json()
        assert answer["status"] == "completed" and answer["citations"], answer
        trace = on_a.get(f"/api/queries/{answer['id']}/trace")
        assert trace.status_code == 200, trace.text
        victim = listed["entries"][0]["name"]  # deleted through B, curated by a worker, listed on A
        gone = on_b.post(
            f"/api/contexts/{slug}/curate/delete-sources", json={"sources": [f"uploads/{victim}"]}
        ).json()
        assert gone["deleted"] == [f"uploads/{victim}"], gone
        deleted = wait_task(on_a, gone["task_id"], timeout=180)
        assert deleted["state"] == "completed" and deleted["output"]["delta"]["deleted"] == 1, deleted
        names = [e["name"] for e in on_a.get(f"/api/contexts/{slug}/source/list/uploads").json()["entries"]]
        assert victim not in names and len(names) == len(listed["entries"]) - 1, names
        pack_task = on_b.post(f"/api/contexts/{slug}/pack", json={}).json()["task_id"]
        assert wait_task(on_b, pack_task, timeout=120)["state"] == "completed"
        packed = on_a.get(f"/api/tasks/{pack_task}/files/read/{slug}.context.zip")  # packed on B
        assert packed.status_code == 200 and packed.content[:2] == b"PK"
        assert on_a.delete(f"/api/contexts/{slug}").status_code == 200
        assert on_b.get(f"/api/contexts/{slug}").status_code == 404
    shared = Path(cluster.env["SLEUTH_STORAGE_URL"].removeprefix("file://"))
    assert (shared / "blobs").is_dir()
    for home in cluster.homes:  # no home holds a server database: the state is in PostgreSQL
        assert not (home / "server.sqlite").exists()


def test_a_connector_sync_runs_on_a_worker(cluster: Cluster) -> None:
    """The import task is a named job (`sync` with JSON arguments): a worker takes it from the queue,
    syncs the folder into the shared context and starts the curate, which a worker runs too."""
    a, b = cluster.servers[0], cluster.servers[-1]
    folder = cluster.home.parent / "shares" / unique_slug()
    folder.mkdir()
    (folder / "leave.md").write_text("# Leave\n\nEvery employee has 31 days of parental leave.\n")
    slug = unique_slug()
    with loopback.client(base_url=a, timeout=60) as on_a:
        on_a.post("/api/contexts", json={"slug": slug, "name": "Synced on a worker"}).raise_for_status()
        made = on_a.post(
            f"/api/contexts/{slug}/connectors",
            json={"name": "share", "kind": "folder", "config": {"path": str(folder)}},
        )
        assert made.status_code == 200, made.text
        task_id = on_a.post(f"/api/contexts/{slug}/import", json={"connector": "share"}).json()["task_id"]
        done = wait_task(on_a, task_id, timeout=120)
        assert done["state"] == "completed", done
        assert done["output"]["added"] == ["leave.md"]
        curated = wait_task(on_a, done["output"]["curate_task_id"], timeout=180)
        assert curated["state"] == "completed", curated
    with TaskStore(cluster.database_url) as tasks:
        for held in (tasks.get(task_id), tasks.get(curated["id"])):
            assert held is not None and str(held["worker"]).startswith("worker:"), held
    with loopback.client(base_url=b, timeout=60) as on_b:
        sources = on_b.post(f"/api/contexts/{slug}/sql", json={"sql": "SELECT path FROM _sources"})
        assert sources.status_code == 200 and sources.json()["rows"] == [["share/leave.md"]], sources.text
        stored = on_b.get(f"/api/contexts/{slug}/source/read/share/leave.md")
        assert stored.status_code == 200 and "31 days" in stored.text, stored.text


def test_an_archive_import_a_pack_and_a_restore_run_on_workers(cluster: Cluster) -> None:
    """Uploaded to A, an archive is expanded by a worker (the upload reaches it through the storage); the
    context is packed by a worker, and the pack, uploaded to B, is restored and curated by workers."""
    a, b = cluster.servers[0], cluster.servers[-1]
    slug, copy = unique_slug(), unique_slug()
    archive = BytesIO()
    with zipfile.ZipFile(archive, "w") as zf:
        zf.writestr("leave.md", "# Leave\n\nEvery employee has 31 days of parental leave.\n")
        zf.writestr("travel/rules.md", "# Travel\n\nTrains under four hours; flights above.\n")
    with loopback.client(base_url=a, timeout=60) as on_a, loopback.client(base_url=b, timeout=60) as on_b:
        on_a.post("/api/contexts", json={"slug": slug, "name": "Imported"}).raise_for_status()
        imported = upload(on_a, slug, "policies.zip", archive.getvalue())
        assert imported.status_code == 200 and imported.json()["state"] == "importing", imported.text
        import_task = imported.json()["task_id"]
        done = wait_task(on_b, import_task, timeout=120)
        assert done["state"] == "completed" and done["output"]["counts"]["extracted"] == 2, done
        listed = on_b.get(f"/api/contexts/{slug}/source/list/uploads/policies/travel").json()
        assert [e["name"] for e in listed["entries"]] == ["rules.md"], listed
        pack_task = on_a.post(f"/api/contexts/{slug}/pack", json={}).json()["task_id"]
        assert wait_task(on_a, pack_task, timeout=120)["state"] == "completed"
        packed = on_b.get(f"/api/tasks/{pack_task}/files/read/{slug}.context.zip")
        assert packed.status_code == 200 and packed.content[:2] == b"PK"
        on_b.post("/api/contexts", json={"slug": copy, "name": "Restored"}).raise_for_status()
        restored = on_b.post(
            f"/api/contexts/{copy}/restore", files={"file": (f"{slug}.context.zip", packed.content)}
        )
        assert restored.status_code == 200, restored.text
        restore_task = restored.json()["task_id"]
        done = wait_task(on_a, restore_task, timeout=180)
        assert done["state"] == "completed" and done["output"]["sources_files"] == 2, done
        assert on_a.get(f"/api/contexts/{copy}").json()["live_version"] == done["output"]["live_version"]
        read = on_a.get(f"/api/contexts/{copy}/source/read/uploads/policies/leave.md")
        assert read.status_code == 200 and "31 days" in read.text, read.text
    with TaskStore(cluster.database_url) as tasks:
        for task_id in (import_task, pack_task, restore_task):
            held = tasks.get(task_id)
            assert held is not None and str(held["worker"]).startswith("worker:"), held
            assert held["job"] is not None and held["job"]["kind"] in ("import", "pack", "restore"), held
    shared = Path(cluster.env["SLEUTH_STORAGE_URL"].removeprefix("file://"))
    assert not list((shared / "uploads").rglob("*.*")), "an upload outlived its task in the storage"
