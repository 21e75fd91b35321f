"""A turn never outlives its client or its server (issue 39, item 3): `sleuth ask` whose reader left
(`| head -1`) or that got Ctrl-C ends its turn `cancelled`; a server that starts beside a live process
on the same home fails only the turns no live process holds."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

from sleuth.compile.pipeline import CompileReport
from sleuth.server.build import open_server
from sleuth.store.contexts.home import Home
from sleuth.store.database import new_id
from sleuth.store.records.outage import Reachability
from sleuth.store.records.rows import QueryDocument
from sleuth.store.records.server_db import Holder, ServerDB, worker_alive, worker_name
from tests.models.slow import SlowModel, catalog_entry
from tests.models.wire import Canned, wire_server

REMOTE = "How many days a week can employees work remotely?"


def _ask(home: Home, group: bool = False, model: list[str] | None = None) -> subprocess.Popen[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("SLEUTH_")}
    env["SLEUTH_HOME"] = str(home.root)
    return subprocess.Popen(
        [sys.executable, "-m", "sleuth", "ask", "--context", "acme", *(model or []), REMOTE],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        start_new_session=group,  # its own process group, as a terminal's foreground job is
        preexec_fn=_default_sigint,
    )


def _default_sigint() -> None:
    """A terminal starts its foreground job with Ctrl-C at its default (a process started with SIGINT
    ignored keeps it ignored, and Python then installs no KeyboardInterrupt): whatever the test
    process inherited, the child starts as from a shell."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def _catches_sigint(pid: int) -> bool:
    """Whether the process has a handler for SIGINT (`SigCgt` in /proc): Python's KeyboardInterrupt."""
    status = Path(f"/proc/{pid}/status").read_text()
    caught = int(next(line.split()[1] for line in status.splitlines() if line.startswith("SigCgt:")), 16)
    return bool(caught & (1 << (signal.SIGINT - 1)))


def _latest_turn(home: Home, session_title: str = REMOTE) -> QueryDocument:
    with ServerDB.for_home(home) as db:
        sessions = [s for s in db.list_sessions(limit=100) if s["title"] == session_title[:80]]
        newest = sessions[0]  # newest first
        query_id = newest["last_query_id"] or newest["active_query_id"]
        assert query_id is not None
        return _stored(db, query_id)


def _stored(db: ServerDB, query_id: str) -> QueryDocument:
    query = db.get_query(query_id)
    assert query is not None, query_id
    return query


def test_a_reader_that_leaves_cancels_the_turn(sample_home: tuple[Home, CompileReport]) -> None:
    """`sleuth ask … | head -1`: the first write after the pipe closed stops the turn between steps."""
    home, _ = sample_home
    ask = _ask(home)
    assert ask.stdout is not None
    first = ask.stdout.readline()
    assert first.startswith("▶ step_1")
    ask.stdout.close()  # what `head -1` does after its line
    assert ask.stderr is not None
    with ask.stderr:
        assert ask.wait(timeout=120) == 141, ask.stderr.read()
        assert ask.stderr.read() == ""  # no traceback, no complaint
    turn = _latest_turn(home)
    assert turn["status"] == "cancelled", turn
    assert len(turn["steps"]) == 1  # the second step never started


def test_ctrl_c_cancels_the_turn(sample_home: tuple[Home, CompileReport], tmp_path: Path) -> None:
    home = Home(tmp_path / "home")
    shutil.copytree(sample_home[0].root, home.root)
    # every step sleeps 5 s: the offline planner's whole turn (850 ms) could end before a loaded machine
    # delivers the Ctrl-C sent once step 1 is shown
    with wire_server(Canned(500, {}), "/v1", SlowModel(step_s=5.0, extraction_s=0.0)) as llm:
        (home.root / "config.toml").write_text(
            catalog_entry(llm.url),
            encoding="utf-8",
        )
        ask = _ask(home, group=True, model=["--model", "test/slow"])
        assert ask.stdout is not None and ask.stderr is not None
        first = ask.stdout.readline()
        assert first.startswith("▶ step_1"), first + ask.stderr.read()
        assert _catches_sigint(ask.pid)
        os.killpg(ask.pid, signal.SIGINT)  # Ctrl-C reaches the whole foreground group, sandbox included
        out, err = ask.communicate(timeout=120)
    assert ask.returncode == 130, (out, err)
    assert "interrupted: cancelling the turn" in err
    assert _latest_turn(home)["status"] == "cancelled"


def _in_progress(db: ServerDB, title: str, holder: Holder | None) -> str:
    session = db.create_session(["acme"], title)
    query_id = new_id("qry")
    query: QueryDocument = {
        "id": query_id,
        "session_id": session["id"],
        "status": "in_progress",
        "created": 1,
    }
    db.admit_turn(query, session=session, new_session=False, holder=holder)
    return query_id


def _dead_pid() -> int:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    return child.pid


def test_a_server_fails_only_the_turns_no_live_process_holds(home: Home) -> None:
    """A second server on a home, or one starting while `sleuth ask` runs, leaves their turns alone; a
    turn nobody holds, one whose holder died on this host, or one whose lease ran out is failed."""
    live = Holder(worker_name("cli"), 30.0)
    dead_name = worker_name("server").split(":")
    dead_name[2] = str(_dead_pid())
    dead = Holder(":".join(dead_name), 30.0)
    assert worker_alive(live.worker) and not worker_alive(dead.worker)
    assert worker_alive("server:another-host:1:abcdefgh")  # its lease decides
    with ServerDB.for_home(home) as db:
        running = _in_progress(db, "held by a live process", live)
        orphan = _in_progress(db, "held by nobody", None)
        of_dead = _in_progress(db, "held by a process that died", dead)
        lapsed = _in_progress(db, "lease ran out", Holder("server:another-host:1:abcdefgh", -1.0))

    state = open_server(home)
    try:
        status = {q: _stored(state.db, q)["status"] for q in (running, orphan, of_dead, lapsed)}
        assert status == {
            running: "in_progress",
            orphan: "failed",
            of_dead: "failed",
            lapsed: "failed",
        }
        assert _stored(state.db, orphan)["error"] == "server restarted"
        # The live one's session stays busy with it; the others' are free again.
        claims = {s["title"]: s["active_query_id"] for s in state.db.list_sessions(limit=10)}
        assert claims["held by a live process"] == running and claims["held by nobody"] is None
    finally:
        state.close()


def test_the_heartbeat_fails_a_dead_processs_turns_without_a_restart(home: Home) -> None:
    """Two servers share a home: when one dies, the other's heartbeat fails its turns once their lease
    has run out, so a client polling them sees them end without waiting for a restart."""
    state = open_server(home)
    try:
        # held by a server on another host whose lease has just run out
        lapsed = _in_progress(state.db, "lease ran out", Holder("server:elsewhere:1:abcdefgh", -1.0))
        turns: Any = state.turns
        turns._reach = Reachability(turns.lease_s, trusted=True)  # connected for a whole lease already
        turns.beat()
        assert _stored(state.db, lapsed)["status"] == "failed"
    finally:
        state.close()


def test_a_turn_whose_hold_is_still_being_taken_is_not_lost(home: Home) -> None:
    """A clean clone's turn on a worker ended in 0.09 s ("this process lost its hold"): its runner
    registers before its hold commits, and a heartbeat in between read no hold for it and stopped it.
    Here the heartbeat beats at that point: the runner registered, the turn waiting, no hold yet."""
    state = open_server(home)
    try:
        waiting = _in_progress(state.db, "taken from the queue", None)
        turns: Any = state.turns
        stopped: list[str] = []
        turns.runtime.cancel = lambda query_id, *_: stopped.append(query_id)  # what a lost turn gets
        with turns._lock:
            turns._running.add(waiting)  # `_run_held` before `hold_turn` commits
        turns.beat()
        assert stopped == [], "a turn whose hold was being taken was stopped as lost"
        assert state.db.hold_turn(waiting, turns.worker, turns.lease_s)  # the hold, as the runner takes it
    finally:
        state.close()


def test_recover_orphans_keeps_what_recover_interrupted_cleared(tmp_path: Path) -> None:
    """A claim whose turn already ended is released; one whose turn is alive stays."""
    db = ServerDB(tmp_path / "server.sqlite")
    try:
        live = _in_progress(db, "alive", Holder(worker_name("cli"), 30.0))
        assert db.recover_orphans(worker_alive) == 0
        assert _stored(db, live)["status"] == "in_progress"
    finally:
        db.close()
