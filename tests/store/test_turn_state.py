"""The conformance suite of the turn store's ports, on both backends: one transaction admits (session, claim,
comparison group, turn places), leases say which worker holds a turn until when, a cancel is a row any
server can write, and the turns of a dead worker are failed, never left `in_progress`. Every test runs
on SQLite and on a throwaway PostgreSQL (`database_target`)."""

from __future__ import annotations

import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from sleuth.store.contexts.lock import claims_lock
from sleuth.store.database import Database, forget_database, new_id, open_database
from sleuth.store.records.keys import KeyStore
from sleuth.store.records.rows import QueryDocument, SessionRow, TurnRecord
from sleuth.store.records.server_db import (
    NEVER_STARTED_ERROR,
    WORKER_LOST_ERROR,
    ComparisonGroupFull,
    ServerDB,
    SessionBusy,
    TurnPlaces,
    TurnPlacesFull,
)
from sleuth.store.records.tasks import TaskStore
from tests.postgres import Postgres

#: What a worker would run the turns of these tests from.
RECORD: TurnRecord = {
    "request": {"ask": "q"},
    "contexts": [["kb", "v000001"]],
    "models": [],
    "workflow": "search",
    "ignored": [],
}


def query_for(session_id: str) -> QueryDocument:
    return {
        "id": new_id("qry"),
        "object": "query",
        "session_id": session_id,
        "status": "in_progress",
        "created": int(time.time()),
        "input": [{"role": "user", "content": "q"}],
    }


def admit(
    db: ServerDB,
    *,
    places: TurnPlaces | None = None,
    group: str | None = None,
    session: SessionRow | None = None,
) -> QueryDocument:
    new = session is None
    session = session or db.new_session(["kb"], "q")
    query = query_for(session["id"])
    db.admit_turn(
        query,
        session=session,
        new_session=new,
        workflow="search",
        comparison_group=group,
        places=places,
        request=RECORD,
    )
    return query


def test_admission_stores_session_claim_and_turn_together(db: ServerDB) -> None:
    query = admit(db)
    session = db.get_session(query["session_id"])
    assert session is not None and session["active_query_id"] == query["id"]
    assert db.get_query(query["id"])["status"] == "in_progress"  # type: ignore[index]
    assert db.turn_request(query["id"]) == RECORD
    with pytest.raises(SessionBusy):  # the session's one turn in flight
        admit(db, session=session)
    db.check_places(TurnPlaces(capacity=2))
    with pytest.raises(TurnPlacesFull):
        db.check_places(TurnPlaces(capacity=1))


def test_turn_places_hold_under_racing_admissions(db: ServerDB) -> None:
    """Twelve requests at once for four places, and a key with a share of two: never more pass."""
    places = TurnPlaces(capacity=4, key="key_a", key_share=2)
    outcomes: list[str] = []
    lock = threading.Lock()

    def one(_: int) -> None:
        try:
            admit(db, places=places)
            outcome = "admitted"
        except TurnPlacesFull as exc:
            outcome = exc.code
        with lock:
            outcomes.append(outcome)

    with ThreadPoolExecutor(6) as pool:
        list(pool.map(one, range(6)))
    assert outcomes.count("admitted") == 2 and outcomes.count("key_turn_limit") == 4
    others = TurnPlaces(capacity=4, key=None)
    with ThreadPoolExecutor(6) as pool:
        results = list(pool.map(lambda _: _try(lambda: admit(db, places=others)), range(6)))
    assert results.count(None) == 2  # the two places the key left
    assert {type(r) for r in results if r is not None} == {TurnPlacesFull}
    with pytest.raises(TurnPlacesFull, match="running or queueing 4 turns"):
        db.check_places(TurnPlaces(capacity=4))
    with pytest.raises(TurnPlacesFull, match="this key is running or queueing 2 turns") as refused:
        db.check_places(TurnPlaces(capacity=10, key="key_a", key_share=2))
    assert refused.value.code == "key_turn_limit" and refused.value.limit == 2


def _try(fn: Any) -> BaseException | None:
    try:
        fn()
    except BaseException as exc:
        return exc
    return None


def test_a_comparison_group_never_passes_three_turns(db: ServerDB) -> None:
    with ThreadPoolExecutor(5) as pool:
        results = list(pool.map(lambda _: _try(lambda: admit(db, group="run-1")), range(5)))
    assert results.count(None) == 3
    assert all(isinstance(r, ComparisonGroupFull) for r in results if r is not None)
    # A refused admission stored nothing: no session was left behind.
    assert len(db.list_sessions(limit=100)) == 3


def test_a_worker_holds_a_waiting_turn_until_its_lease_runs_out(db: ServerDB) -> None:
    query = admit(db)
    assert db.hold_turn(query["id"], "worker-a", lease_s=30)
    assert not db.hold_turn(query["id"], "worker-b", lease_s=30)  # held: the other worker leaves it
    worker, until = db.holder(query["id"])
    assert worker == "worker-a" and until is not None and until > time.time()
    assert db.fail_lost_turns() == []  # a live lease is left alone
    held = db.renew_holds("worker-a", lease_s=30, query_ids=[query["id"]])
    assert [h.query_id for h in held] == [query["id"]] and not held[0].cancel_requested
    # worker-a dies: its lease runs out and anyone's reaper fails the turn, stream and session included.
    assert db.fail_lost_turns(now=time.time() + 60) == [query["id"]]
    stored = db.get_query(query["id"])
    assert stored is not None and stored["status"] == "failed" and stored["error"] == WORKER_LOST_ERROR
    assert [e["type"] for e in db.events(query["id"])] == ["response.created", "response.failed"]
    session = db.get_session(query["session_id"])
    assert session is not None and session["active_query_id"] is None
    assert session["last_query_id"] == query["id"]
    assert db.renew_holds("worker-a", lease_s=30, query_ids=[query["id"]]) == []  # lost: stop, write nothing
    stored_before = db.get_query(query["id"])
    late: QueryDocument = {**query, "status": "completed"}
    assert not db.update_query(late, event={"type": "response.completed"})  # a lost runner is fenced off
    assert db.append_event(query["id"], {"type": "response.step"}) == 0
    assert db.get_query(query["id"]) == stored_before
    assert [e["type"] for e in db.events(query["id"])] == ["response.created", "response.failed"]


def test_a_turn_no_worker_takes_fails_after_the_longest_wait(db: ServerDB) -> None:
    query = admit(db)
    assert db.fail_lost_turns(max_wait_s=3600) == []
    assert db.fail_lost_turns(now=time.time() + 7200, max_wait_s=3600) == [query["id"]]
    assert db.get_query(query["id"])["error"] == NEVER_STARTED_ERROR  # type: ignore[index]


def test_a_cancel_is_recorded_for_the_holder_to_see(db: ServerDB) -> None:
    waiting, held = admit(db), admit(db)
    assert db.hold_turn(held["id"], "worker-a", lease_s=30)
    assert db.request_cancel(waiting["id"]) == "waiting"
    assert db.request_cancel(held["id"]) == "asked"
    assert db.cancel_asked(held["id"])
    assert [h.cancel_requested for h in db.renew_holds("worker-a", 30, [held["id"]])] == [True]
    # The canceller ends a waiting turn itself; a second ending changes nothing.
    assert db.end_turn(waiting["id"], "cancelled", "cancelled")
    assert not db.end_turn(waiting["id"], "cancelled", "cancelled")
    assert db.request_cancel(waiting["id"]) == "done"
    assert db.turn_ended(waiting["id"]) and not db.turn_ended(held["id"])


def test_task_rows_on_both_backends(database_target: str) -> None:
    store = TaskStore(database_target)
    try:
        task = store.create(
            "curate", context_id="ctx_1", context_slug="kb", created_by="admin", input={"a": 1}
        )
        assert store.start(task["id"])
        assert store.request_stop(task["id"], "enough")["state"] == "stopping"
        assert store.finish(task["id"], "cancelled", error="cancelled: enough")
        page, total = store.page(q="kb")
        assert total == 1 and page[0]["state"] == "cancelled"
        assert store.context_stats("ctx_1")["tasks_cancelled"] == 1
    finally:
        store.close()


def test_keys_on_both_backends(db: ServerDB) -> None:
    keys = KeyStore.for_db(db)
    key, secret = keys.create("ci", role="query", contexts=["ctx_1"])
    found = keys.verify(secret)
    assert found is not None and found.id == key.id
    assert [k.name for k in keys.list_keys(include_revoked=False)] == ["ci"]
    keys.revoke("ci")
    assert keys.verify(secret) is None


def test_servers_seeding_the_operator_key_at_once_agree_on_one(db: ServerDB) -> None:
    keys = KeyStore.for_db(db)
    with ThreadPoolExecutor(6) as pool:
        seeded = list(pool.map(lambda _: keys.seed("slk_operator-secret-value"), range(6)))
    assert len({key.id for key in seeded if key is not None}) == 1 and None not in seeded
    assert [k.name for k in keys.list_keys(include_revoked=True)] == ["SLEUTH_API_KEY"]


def test_two_processes_preparing_one_new_database_at_once(database_target: str, tmp_path: Path) -> None:
    """Schema set-up runs under a lock: servers starting together never both create or upgrade it."""
    import subprocess
    import sys

    opener = (
        "import sys; from pathlib import Path; from sleuth.store.records.server_db import ServerDB; "
        "from sleuth.store.records.tasks import TaskStore; "
        "ServerDB(sys.argv[1], replay_root=Path(sys.argv[2])).close(); TaskStore(sys.argv[1]).close()"
    )
    procs = [
        subprocess.Popen([sys.executable, "-c", opener, database_target, str(tmp_path)]) for _ in range(4)
    ]
    assert [p.wait(timeout=120) for p in procs] == [0, 0, 0, 0]
    with ServerDB(database_target, replay_root=tmp_path) as db:
        assert db.schema_version >= 4


def test_a_task_held_by_a_dead_worker_is_begun_again_or_ended(database_target: str) -> None:
    with TaskStore(database_target) as store:
        queued = store.create("curate", context_id="c", context_slug="kb", created_by="admin")
        local = store.create("import", context_id="c", context_slug="kb", created_by="admin")
        stopping = store.create("curate", context_id="c", context_slug="kb", created_by="admin")
        store.set_job(queued["id"], {"kind": "curate", "args": {}, "phases": []})
        store.set_job(stopping["id"], {"kind": "curate", "args": {}, "phases": []})
        for task in (queued, local, stopping):
            assert store.start(task["id"], "worker-a", lease_s=30)
            assert not store.start(task["id"], "worker-b", lease_s=30)  # held: not taken twice
        store.request_stop(stopping["id"], "enough")
        assert sorted(store.renew("worker-a", 30)) == sorted(
            [(queued["id"], "running"), (local["id"], "running"), (stopping["id"], "stopping")]
        )
        assert store.requeue_lost(max_attempts=3) == ([], [])  # leases still live
        requeued, ended = store.requeue_lost(max_attempts=3, now=time.time() + 60)
        assert requeued == [queued["id"]] and sorted(ended) == sorted([local["id"], stopping["id"]])
        assert store.require(queued["id"])["state"] == "scheduled"
        assert store.require(local["id"])["state"] == "failed"  # nothing to begin it again from
        assert store.require(stopping["id"])["state"] == "cancelled"
        assert store.start(queued["id"], "worker-b", lease_s=30)  # another worker begins it again
        again = store.require(queued["id"])
        assert again["attempts"] == 2 and again["worker"] == "worker-b"
        # worker-a was not dead after all (a partition): its late ending does not count.
        assert not store.finish(queued["id"], "completed", output={"from": "a"}, worker="worker-a")
        store.report(
            queued["id"], progress={"phase": None, "phases": [], "label": None, "pct": 99}, worker="worker-a"
        )
        assert store.require(queued["id"])["state"] == "running"
        assert store.require(queued["id"])["progress"]["pct"] == 0
        assert store.release(queued["id"], "worker-b")  # a draining worker hands it back
        assert store.require(queued["id"])["state"] == "scheduled"


def test_a_split_task_gives_each_part_to_one_worker(database_target: str) -> None:
    with TaskStore(database_target) as store:
        task = store.create("curate", context_id="c", context_slug="kb", created_by="admin")
        store.add_parts(task["id"], [f"doc-{i:02d}" for i in range(20)])
        taken: list[str] = []
        lock = threading.Lock()

        def take_all(worker: str) -> None:
            while (part := store.take_part(task["id"], worker)) is not None:
                with lock:
                    taken.append(part)
                store.finish_part(task["id"], part)

        with ThreadPoolExecutor(4) as pool:
            list(pool.map(take_all, ["w1", "w2", "w3", "w4"]))
        assert sorted(taken) == [f"doc-{i:02d}" for i in range(20)]  # each exactly once
        assert store.part_counts(task["id"]) == {"done": 20}
        store.add_parts(task["id"], ["doc-00", "doc-20"])  # again after a restart: done stays done
        assert store.part_counts(task["id"]) == {"done": 20, "todo": 1}


def test_a_part_whose_worker_stopped_renewing_it_is_opened_again(database_target: str) -> None:
    with TaskStore(database_target) as store:
        task = store.create("curate", context_id="c", context_slug="kb", created_by="admin")
        store.add_parts(task["id"], ["big", "small"])  # the order given is the order taken
        assert store.take_part(task["id"], "alive") == "big"
        assert store.take_part(task["id"], "dead") == "small"
        assert store.reopen_stale_parts(task["id"], older_than_s=60) == 0
        time.sleep(0.3)
        store.renew_parts("alive")
        assert store.reopen_stale_parts(task["id"], older_than_s=0.2) == 1  # only the dead one's
        assert store.take_part(task["id"], "alive") == "small"


def test_a_queued_task_no_worker_began_is_failed_after_the_longest_wait(database_target: str) -> None:
    with TaskStore(database_target) as store:
        queued = store.create("curate", context_id="c", context_slug="kb", created_by="admin")
        local = store.create("import", context_id="c", context_slug="kb", created_by="admin")
        store.set_job(queued["id"], {"kind": "curate", "args": {}, "phases": []})
        assert store.fail_unstarted(older_than_s=3600) == []
        assert store.fail_unstarted(older_than_s=-1) == [queued["id"]]  # one with no job is not queued
        assert store.require(queued["id"])["state"] == "failed"
        assert store.require(local["id"])["state"] == "scheduled"


def test_task_claims_take_turns_across_processes(postgres: Postgres) -> None:
    """`claims_lock` (PostgreSQL): a second claimant, as another server would be, waits for the first."""
    url = postgres.create_database()
    order: list[str] = []
    inside = threading.Event()
    database = open_database(url)
    other = Database(url)  # its own pool, as another process has
    try:

        def first() -> None:
            with claims_lock(database):
                order.append("first in")
                inside.set()
                time.sleep(0.5)
                order.append("first out")

        def second() -> None:
            inside.wait()
            with claims_lock(other):
                order.append("second in")

        threads = [threading.Thread(target=first), threading.Thread(target=second)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert order == ["first in", "first out", "second in"]
    finally:
        other.close()
        forget_database(url)
