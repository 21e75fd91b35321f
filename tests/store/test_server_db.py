"""The server's state on both backends (the conformance suite: every test taking `db` runs on SQLite and on
a throwaway PostgreSQL): sessions, one turn per session, events, cascade, crash recovery. The tests of
`server.sqlite` itself (its file settings, its upgrades, two processes on one file) are SQLite's own."""

from __future__ import annotations

import sqlite3
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import text

from sleuth.store.contexts.home import Home
from sleuth.store.database import new_id
from sleuth.store.records.keys import KeyStore, digest
from sleuth.store.records.replay_log import read_replay_log, write_replay_log
from sleuth.store.records.rows import QueryDocument, QueryStatus
from sleuth.store.records.server_db import (
    INTERRUPTED_ERROR,
    ComparisonGroupFull,
    QueryNotFound,
    ServerDB,
    ServerDBError,
    SessionBusy,
    SessionNotFound,
)
from sleuth.store.records.server_schema import SCHEMA_VERSION


@pytest.fixture
def sqlite_db(tmp_path: Path) -> Iterator[ServerDB]:
    store = ServerDB.for_home(Home(tmp_path))
    yield store
    store.close()


def rows(db: ServerDB, sql: str) -> list[tuple[Any, ...]]:
    with db.reading() as conn:
        return [tuple(row) for row in conn.execute(text(sql))]


def make_query(
    session_id: str,
    status: QueryStatus = "in_progress",
    *,
    created: int = 1764460800,
    model: str | None = None,
    runtime_ms: int | None = None,
) -> QueryDocument:
    query: QueryDocument = {
        "id": new_id("qry"),
        "object": "query",
        "session_id": session_id,
        "status": status,
        "error": None,
        "created": created,
        "input": [{"role": "user", "content": "How long do returns take?"}],
        "output": [],
        "feedback": None,
    }
    if model is not None:
        query["model"] = model
    if runtime_ms is not None:
        query["runtime_ms"] = runtime_ms
    return query


def raw(path: Path, sql: str) -> list[tuple[Any, ...]]:
    with sqlite3.connect(path) as conn:
        return conn.execute(sql).fetchall()


def test_new_id_is_time_ordered_and_uuid_shaped() -> None:
    ids = [new_id("qry") for _ in range(5000)]
    assert ids == sorted(ids)
    assert len(set(ids)) == len(ids)
    head = ids[0]
    assert head.startswith("qry_") and len(head) == 40
    assert [len(part) for part in head[4:].split("-")] == [8, 4, 4, 4, 12]
    assert head[4:][14] == "7"  # UUID version nibble


def test_file_settings(sqlite_db: ServerDB, tmp_path: Path) -> None:
    db = sqlite_db
    assert db.path == tmp_path.resolve() / "server.sqlite"
    assert raw(db.path, "PRAGMA journal_mode") == [("wal",)]
    assert raw(db.path, "SELECT value FROM meta WHERE key = 'schema_version'") == [(str(SCHEMA_VERSION),)]
    assert db.schema_version == SCHEMA_VERSION


def test_newer_schema_refused(tmp_path: Path) -> None:
    ServerDB(tmp_path / "s.sqlite").close()
    with sqlite3.connect(tmp_path / "s.sqlite") as conn:
        conn.execute("UPDATE meta SET value = '999' WHERE key = 'schema_version'")
    with pytest.raises(ServerDBError, match="newer than this Sleuth"):
        ServerDB(tmp_path / "s.sqlite")


V1_SCHEMA = """
CREATE TABLE meta (key VARCHAR(64) PRIMARY KEY, value TEXT NOT NULL);
INSERT INTO meta VALUES ('schema_version', '1');
CREATE TABLE sessions (id VARCHAR(80) PRIMARY KEY, scope TEXT NOT NULL, title VARCHAR(80) NOT NULL,
    system_prompt TEXT, guardrails TEXT, models TEXT NOT NULL, tools TEXT, workflow VARCHAR(64) NOT NULL,
    last_query_id VARCHAR(80), active_query_id VARCHAR(80), created_at FLOAT NOT NULL,
    updated_at FLOAT NOT NULL);
CREATE TABLE queries (id VARCHAR(80) PRIMARY KEY,
    session_id VARCHAR(80) NOT NULL REFERENCES sessions (id) ON DELETE CASCADE, status VARCHAR(32) NOT NULL,
    created INTEGER NOT NULL, updated FLOAT NOT NULL, document TEXT NOT NULL, feedback TEXT);
INSERT INTO sessions VALUES ('ses_old', '["kb"]', 'old', NULL, NULL, '[]', NULL, 'search', NULL, NULL, 1, 1);
INSERT INTO queries VALUES ('qry_old', 'ses_old', 'completed', 1, 1,
    '{"id": "qry_old", "session_id": "ses_old", "status": "completed"}', NULL);
"""


def test_a_version_1_database_is_upgraded_in_place(tmp_path: Path) -> None:
    """A server.sqlite written by the first release keeps its rows and gains the v2 columns."""
    path = tmp_path / "server.sqlite"
    with sqlite3.connect(path) as conn:
        conn.executescript(V1_SCHEMA)
    with ServerDB(path) as db:
        assert db.schema_version == SCHEMA_VERSION == 4
        assert db.get_session("ses_old")["created_by"] == "local"  # type: ignore[index]
        assert db.get_query("qry_old")["status"] == "completed"  # type: ignore[index]
        assert db.comparison_of("qry_old") is None
        new = db.create_session(["kb"], "q", created_by="alice")
        db.insert_query(make_query(new["id"]), workflow="search", comparison_group="g")
        assert db.comparison_group_size("g") == 1
    with ServerDB(path) as db:  # a second open finds nothing left to do
        assert db.schema_version == 4 and db.get_session(new["id"])["created_by"] == "alice"  # type: ignore[index]
        assert [s["id"] for s in db.list_sessions(created_by="local")] == ["ses_old"]  # NULL is "local"
    assert ("ix_queries_comparison_group",) in raw(
        path, "SELECT name FROM sqlite_master WHERE type = 'index'"
    )


OLD_SECRET = "slk_" + "o" * 40
V2_SCHEMA = (
    V1_SCHEMA.replace("'schema_version', '1'", "'schema_version', '2'")
    + f"""
ALTER TABLE sessions ADD COLUMN created_by VARCHAR(200);
ALTER TABLE queries ADD COLUMN workflow VARCHAR(64);
ALTER TABLE queries ADD COLUMN comparison_group VARCHAR(128);
CREATE INDEX ix_queries_comparison_group ON queries (comparison_group);
UPDATE sessions SET created_by = 'agent';
CREATE TABLE api_keys (id VARCHAR(80) NOT NULL PRIMARY KEY, name VARCHAR(64) NOT NULL,
    role VARCHAR(16) NOT NULL, hash VARCHAR(64) NOT NULL UNIQUE, created_at FLOAT NOT NULL, revoked_at FLOAT);
INSERT INTO api_keys VALUES ('key_old', 'agent', 'query', '{digest(OLD_SECRET)}', 1, NULL);
"""
)


def test_a_version_2_database_is_upgraded_in_place(tmp_path: Path) -> None:
    """A v2 server.sqlite keeps its rows and keys and gains the key-context table and the creator index,
    whether or not the process that opens it ever loaded the key store."""
    for keys_loaded in (False, True):
        path = tmp_path / f"keys-{keys_loaded}" / "server.sqlite"
        path.parent.mkdir()
        with sqlite3.connect(path) as conn:
            conn.executescript(V2_SCHEMA)
        if keys_loaded:
            ServerDB(path).close()  # this process imported `store.keys`: its tables join the metadata
        else:
            opener = (
                "from sleuth.store.records.server_db import ServerDB; "
                "ServerDB(__import__('sys').argv[1]).close()"
            )
            subprocess.run([sys.executable, "-c", opener, str(path)], check=True)
        assert raw(path, "SELECT value FROM meta WHERE key = 'schema_version'") == [("4",)]
        names = {row[0] for row in raw(path, "SELECT name FROM sqlite_master")}
        assert {"api_key_contexts", "ix_sessions_created_by", "ix_queries_comparison_group"} <= names
        with ServerDB(path) as db:
            assert db.schema_version == 4
            assert [s["id"] for s in db.list_sessions(created_by="agent")] == ["ses_old"]
            assert db.list_sessions(created_by="other") == []
            store = KeyStore(db)
            old = store.verify(OLD_SECRET)
            assert old is not None and (old.id, old.contexts) == ("key_old", None)
            limited, secret = store.create("narrow", "query", contexts=["ctx_b", "ctx_a", "ctx_a"])
            assert limited.contexts == ("ctx_a", "ctx_b")
            assert store.verify(secret) == limited
            assert [k.contexts for k in store.list_keys()] == [None, ("ctx_a", "ctx_b")]


def test_key_context_lists_are_for_query_keys_only(db: ServerDB) -> None:
    store = KeyStore(db)
    for role, contexts in (("admin", ["ctx_a"]), ("query", []), ("query", [" "])):
        with pytest.raises(ValueError, match="context"):
            store.create(f"k-{role}-{len(contexts)}", role, contexts=contexts)
    with pytest.raises(ValueError, match="no-auth"):
        store.create("local", "query")
    key, _ = store.create("narrow", "query", contexts=["ctx_a"])
    assert store.revoke("narrow").contexts == ("ctx_a",) and key.to_json()["contexts"] == ["ctx_a"]


def test_comparison_groups_are_stored_and_capped_at_three(db: ServerDB) -> None:
    ids = []
    for workflow in ("search", "search_rag", "search_cc"):
        ses = db.create_session(["kb"], "q")["id"]
        query = make_query(ses, model=f"model-{workflow}")
        db.insert_query(query, workflow=workflow, comparison_group="run-1")
        ids.append(query["id"])
    fourth = make_query(db.create_session(["kb"], "q")["id"])
    with pytest.raises(ComparisonGroupFull, match="already has 3 turns"):
        db.insert_query(fourth, comparison_group="run-1")
    assert db.get_query(fourth["id"]) is None
    assert db.comparison_group_size("run-1") == 3 and db.comparison_group_size("other") == 0
    assert db.comparison_of(ids[0]) == [
        {"workflow": "search_rag", "query_id": ids[1], "model": "model-search_rag"},
        {"workflow": "search_cc", "query_id": ids[2], "model": "model-search_cc"},
    ]
    loner = make_query(db.create_session(["kb"], "q")["id"])
    db.insert_query(loner)
    assert db.comparison_of(loner["id"]) is None and db.comparison_of("qry_missing") is None


def test_release_of_a_turn_that_never_ran_keeps_the_last_turn(db: ServerDB) -> None:
    ses = db.create_session(["kb"], "q")["id"]
    first, refused = new_id("qry"), new_id("qry")
    assert db.claim_session(ses, first)
    assert db.release_session(ses, first)
    assert db.claim_session(ses, refused)
    assert db.release_session(ses, refused, ran=False)
    session = db.get_session(ses)
    assert session is not None and session["last_query_id"] == first and session["active_query_id"] is None


def test_sessions_crud(db: ServerDB) -> None:
    ask = "  How long\ndo customers have to return an item? " + "x" * 100
    first = db.create_session(["support-kb"], ask, system_prompt="Be brief.", models=["sleuth/offline"])
    second = db.create_session(["a", "b"], "second", guardrails="No PII.", tools=["search"], workflow="rag")
    assert first["id"].startswith("ses_")
    assert first["title"] == ("How long do customers have to return an item? " + "x" * 100)[:80]
    assert len(first["title"]) == 80
    assert first["tools"] is None and first["models"] == ["sleuth/offline"]
    assert db.get_session(first["id"]) == first
    assert db.get_session(second["id"]) == second
    assert db.get_session("ses_missing") is None
    assert [s["id"] for s in db.list_sessions()] == [second["id"], first["id"]]
    assert [s["id"] for s in db.list_sessions(limit=1)] == [second["id"]]
    assert db.delete_session(first["id"]) is True
    assert db.delete_session(first["id"]) is False
    assert [s["id"] for s in db.list_sessions()] == [second["id"]]


def test_claim_and_release(db: ServerDB) -> None:
    ses = db.create_session(["kb"], "q")["id"]
    q1, q2 = new_id("qry"), new_id("qry")
    assert db.claim_session(ses, q1) is True
    assert db.claim_session(ses, q2) is False
    assert db.active_query_count() == 1
    with pytest.raises(SessionBusy):
        db.delete_session(ses)
    assert db.release_session(ses, q2) is False  # not the holder: nothing changes
    assert db.get_session(ses)["active_query_id"] == q1  # type: ignore[index]
    assert db.get_session(ses)["last_query_id"] is None  # type: ignore[index]
    assert db.release_session(ses, q1) is True
    session = db.get_session(ses)
    assert session is not None
    assert session["active_query_id"] is None and session["last_query_id"] == q1
    assert session["updated_at"] >= session["created_at"]
    assert db.claim_session(ses, q2) is True
    with pytest.raises(SessionNotFound):
        db.claim_session("ses_missing", q1)


def test_claim_race_has_one_winner(db: ServerDB) -> None:
    ses = db.create_session(["kb"], "race")["id"]
    n = 16
    barrier = threading.Barrier(n)
    results: dict[str, bool] = {}

    def contend(query_id: str) -> None:
        barrier.wait()
        results[query_id] = db.claim_session(ses, query_id)

    threads = [threading.Thread(target=contend, args=(new_id("qry"),)) for _ in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    winners = [qid for qid, won in results.items() if won]
    assert len(results) == n and len(winners) == 1
    assert db.get_session(ses)["active_query_id"] == winners[0]  # type: ignore[index]


def test_claim_race_across_connections(tmp_path: Path) -> None:
    """Two ServerDB objects (as two processes would have) on one file: still one winner."""
    path = tmp_path / "server.sqlite"
    a, b = ServerDB(path), ServerDB(path)
    ses = a.create_session(["kb"], "race")["id"]
    barrier = threading.Barrier(2)
    results: list[bool] = []

    def contend(store: ServerDB) -> None:
        barrier.wait()
        results.append(store.claim_session(ses, new_id("qry")))

    threads = [threading.Thread(target=contend, args=(s,)) for s in (a, b)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(results) == [False, True]
    a.close()
    b.close()


def test_queries(db: ServerDB) -> None:
    ses = db.create_session(["kb"], "q")["id"]
    q1 = make_query(ses, created=100)
    q2 = make_query(ses, created=100)
    q3 = make_query(ses, created=101)
    for q in (q3, q1, q2):  # insertion order does not matter: created, then id
        db.insert_query(q)
    assert db.get_query(q1["id"]) == q1
    assert db.get_query("qry_missing") is None
    assert [q["id"] for q in db.queries_for_session(ses)] == [q1["id"], q2["id"], q3["id"]]

    done: QueryDocument = {**q1, "status": "completed", "output": [{"role": "assistant", "content": []}]}
    db.update_query(done)
    assert db.get_query(q1["id"]) == done
    db.update_query({**q2, "status": "failed", "error": "boom"})
    db.update_query({**q3, "status": "completed"})
    history = db.previous_completed_queries(ses)
    assert [q["id"] for q in history] == [q1["id"], q3["id"]]
    assert [q["id"] for q in db.previous_completed_queries(ses, before_query_id=q3["id"])] == [q1["id"]]
    assert db.previous_completed_queries(ses, before_query_id=q1["id"]) == []
    assert len(db.previous_completed_queries(ses, before_query_id="qry_not_yet_stored")) == 2

    with pytest.raises(SessionNotFound):
        db.insert_query(make_query("ses_missing"))
    with pytest.raises(QueryNotFound):
        db.update_query(make_query(ses))
    untyped: Any = {"id": new_id("qry"), "session_id": ses}  # what a caller without types could send
    with pytest.raises(ValueError, match="status"):
        db.insert_query(untyped)


def test_feedback_replace(db: ServerDB) -> None:
    ses = db.create_session(["kb"], "q")["id"]
    q = make_query(ses, status="completed")
    db.insert_query(q)
    db.set_feedback(q["id"], {"rating": "up", "comment": "good"})
    db.set_feedback(q["id"], {"rating": "down", "comment": None})
    assert db.get_query(q["id"])["feedback"] == {"rating": "down", "comment": None}  # type: ignore[index]
    db.update_query(q)  # an older copy of the document does not lose the feedback
    assert db.get_query(q["id"])["feedback"] == {"rating": "down", "comment": None}  # type: ignore[index]
    db.set_feedback(q["id"], None)
    assert db.get_query(q["id"])["feedback"] is None  # type: ignore[index]
    with pytest.raises(QueryNotFound):
        db.set_feedback("qry_missing", {"rating": "up", "comment": None})


def test_events_order_and_since(db: ServerDB) -> None:
    ses = db.create_session(["kb"], "q")["id"]
    q, other = make_query(ses), make_query(ses)
    db.insert_query(q)
    db.insert_query(other)
    types = ["response.created", "response.step", "response.step", "response.completed"]
    seqs = [db.append_event(q["id"], {"type": t, "query_id": q["id"], "n": i}) for i, t in enumerate(types)]
    assert seqs == [1, 2, 3, 4]
    assert db.append_event(other["id"], {"type": "response.created"}) == 1
    stored = db.events(q["id"])
    assert [e["seq"] for e in stored] == [1, 2, 3, 4]
    assert [e["type"] for e in stored] == types
    assert stored[1] == {"type": "response.step", "query_id": q["id"], "n": 1, "seq": 2}
    assert [e["seq"] for e in db.events(q["id"], since_seq=3)] == [3, 4]  # inclusive
    assert db.events(q["id"], since_seq=5) == []
    assert rows(db, "SELECT type FROM events WHERE seq = 4") == [("response.completed",)]
    with pytest.raises(ValueError, match="type"):
        db.append_event(q["id"], {"delta": "no type"})
    with pytest.raises(QueryNotFound):
        db.append_event("qry_missing", {"type": "x"})


def test_concurrent_appends_get_distinct_seqs(db: ServerDB) -> None:
    ses = db.create_session(["kb"], "q")["id"]
    q = make_query(ses)
    db.insert_query(q)
    seqs: list[int] = []
    lock = threading.Lock()

    def append(worker: int) -> None:
        for i in range(10):
            seq = db.append_event(q["id"], {"type": "response.step", "worker": worker, "i": i})
            with lock:
                seqs.append(seq)

    threads = [threading.Thread(target=append, args=(w,)) for w in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(seqs) == list(range(1, 81))
    assert [e["seq"] for e in db.events(q["id"])] == list(range(1, 81))


def test_traces(db: ServerDB) -> None:
    ses = db.create_session(["kb"], "q")["id"]
    q = make_query(ses)
    db.insert_query(q)
    assert db.get_trace(q["id"]) is None
    db.save_trace(q["id"], {"query_id": q["id"], "steps": []})
    db.save_trace(q["id"], {"query_id": q["id"], "steps": [{"step_id": "step_1"}]})
    assert db.get_trace(q["id"]) == {"query_id": q["id"], "steps": [{"step_id": "step_1"}]}
    with pytest.raises(QueryNotFound):
        db.save_trace("qry_missing", {})
    assert db.trace_length("qry_missing") is None


def test_a_trace_is_read_in_pieces_that_join_to_the_stored_text(db: ServerDB) -> None:
    """A download streams the trace a piece at a time (issue 22, item 11); pieces count characters,
    so text beyond ASCII joins back exactly."""
    ses = db.create_session(["kb"], "q")["id"]
    q = make_query(ses)
    db.insert_query(q)
    db.save_trace(q["id"], {"query_id": q["id"], "steps": [{"output": "é€😀 " * 5_000}]})
    text, length = db.trace_text(q["id"]), db.trace_length(q["id"])
    assert text is not None and length == len(text)
    pieces = list(db.trace_chunks(q["id"], length, size=999))
    assert "".join(pieces) == text and max(len(p) for p in pieces) == 999


def test_delete_cascades_and_removes_replay_logs(db: ServerDB) -> None:
    keep = db.create_session(["kb"], "keep")["id"]
    gone = db.create_session(["kb"], "gone")["id"]
    kept_q, gone_q = make_query(keep), make_query(gone)
    for q in (kept_q, gone_q):
        db.insert_query(q)
        db.append_event(q["id"], {"type": "response.created"})
        db.save_trace(q["id"], {"query_id": q["id"]})
        write_replay_log(db.replay_root, q["id"], [{"kind": "model"}])

    assert db.delete_session(gone) is True
    assert db.get_query(gone_q["id"]) is None
    assert db.events(gone_q["id"]) == []
    assert db.get_trace(gone_q["id"]) is None
    for table in ("queries", "events", "traces"):
        column = "id" if table == "queries" else "query_id"
        assert rows(db, f"SELECT {column} FROM {table}") == [(kept_q["id"],)]
    assert not (db.replay_root / "queries" / gone_q["id"]).exists()
    assert read_replay_log(db.replay_root, kept_q["id"]) == [{"kind": "model"}]


def test_data_survives_reopen(tmp_path: Path) -> None:
    path = tmp_path / "server.sqlite"
    first = ServerDB(path)
    ses = first.create_session(["kb"], "persist", models=["m"])
    q = make_query(ses["id"])
    first.insert_query(q)
    first.append_event(q["id"], {"type": "response.created"})
    first.save_trace(q["id"], {"query_id": q["id"]})
    first.set_feedback(q["id"], {"rating": "up", "comment": None})
    first.close()

    second = ServerDB(path)
    assert second.get_session(ses["id"]) == ses
    assert second.get_query(q["id"]) == {**q, "feedback": {"rating": "up", "comment": None}}
    assert second.events(q["id"]) == [{"type": "response.created", "seq": 1}]
    assert second.get_trace(q["id"]) == {"query_id": q["id"]}
    second.close()


def test_a_queued_turn_failed_by_recovery_gets_a_whole_stream(tmp_path: Path) -> None:
    """A turn stored `in_progress` that never started (queued) had no events: recovery writes
    `response.created` then `response.failed`, so its replay starts at id 1 and ends terminal."""
    db = ServerDB(tmp_path / "server.sqlite")
    ses = db.create_session(["kb"], "queued")["id"]
    queued = make_query(ses)
    db.insert_query(queued)
    assert db.recover_interrupted(error="server restarted") == 1
    assert db.events(queued["id"]) == [
        {"type": "response.created", "query_id": queued["id"], "session_id": ses, "seq": 1},
        {"type": "response.failed", "query_id": queued["id"], "error": "server restarted", "seq": 2},
    ]
    db.close()


def test_recover_interrupted_after_crash(tmp_path: Path) -> None:
    path = tmp_path / "server.sqlite"
    crashed = ServerDB(path)
    ses = crashed.create_session(["kb"], "crash")["id"]
    idle = crashed.create_session(["kb"], "idle")["id"]
    done = make_query(ses, status="completed")
    crashed.insert_query(done)
    running = make_query(ses, runtime_ms=1200)
    assert crashed.claim_session(ses, running["id"])
    crashed.insert_query(running)
    crashed.append_event(running["id"], {"type": "response.created"})
    orphan = new_id("qry")  # claimed, but the process died before storing the query
    assert crashed.claim_session(idle, orphan)
    del crashed  # no close(): the process "died"

    fresh = ServerDB(path)
    assert fresh.claim_session(ses, new_id("qry")) is False  # still held until recovery
    assert fresh.recover_interrupted(now=1764461000.0) == 1
    failed = fresh.get_query(running["id"])
    assert failed == {**running, "status": "failed", "error": INTERRUPTED_ERROR}
    assert fresh.get_query(done["id"]) == done
    assert raw(path, f"SELECT status, updated FROM queries WHERE id = '{running['id']}'") == [
        ("failed", 1764461000.0)
    ]
    session = fresh.get_session(ses)
    assert session is not None
    assert session["active_query_id"] is None and session["last_query_id"] == running["id"]
    idle_session = fresh.get_session(idle)
    assert idle_session is not None
    assert idle_session["active_query_id"] is None and idle_session["last_query_id"] is None
    assert fresh.active_query_count() == 0
    # The stored stream ends as a live one would: with `response.failed` and the error.
    ended = {"type": "response.failed", "query_id": running["id"], "error": INTERRUPTED_ERROR, "seq": 2}
    assert fresh.events(running["id"]) == [{"type": "response.created", "seq": 1}, ended]
    assert fresh.recover_interrupted() == 0  # idempotent
    assert len(fresh.events(running["id"])) == 2
    assert fresh.claim_session(ses, new_id("qry")) is True
    fresh.close()
