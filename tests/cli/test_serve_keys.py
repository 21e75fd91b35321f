"""`sleuth keys create|list|revoke`, the auth defaults of `sleuth serve`, and the server's start-up
duties (restart recovery, `SLEUTH_API_KEY` seeding), run in-process."""

from __future__ import annotations

import json
import re

import pytest
from typer.testing import CliRunner

from sleuth.api.server import ServeOptions, is_loopback, resolve_auth
from sleuth.cli import app
from sleuth.server.build import ServeError, open_server
from sleuth.store.contexts.home import Home
from sleuth.store.database import new_id
from sleuth.store.records.keys import KeyStore
from sleuth.store.records.server_db import ServerDB

KEY = re.compile(r"^slk_[0-9A-Za-z]{40}$")


@pytest.fixture
def runner(home: Home) -> CliRunner:
    return CliRunner()


def test_create_prints_the_key_once_and_stores_its_hash(runner: CliRunner, home: Home) -> None:
    created = runner.invoke(app, ["keys", "create", "--name", "agent", "--role", "query"])
    assert created.exit_code == 0, created.output
    secret = created.stdout.strip()
    assert KEY.match(secret), created.stdout
    assert "not shown again" in created.stderr
    raw = (home.root / "server.sqlite").read_bytes()
    assert secret.encode() not in raw
    with ServerDB.for_home(home) as db:
        key = KeyStore(db).verify(secret)
        assert key is not None and (key.name, key.role) == ("agent", "query")

    listed = runner.invoke(app, ["keys", "list"])
    assert listed.exit_code == 0 and "agent" in listed.stdout and "query" in listed.stdout
    assert secret not in listed.output and secret[4:] not in listed.output

    assert runner.invoke(app, ["keys", "create", "--name", "agent"]).exit_code == 2  # name taken
    assert runner.invoke(app, ["keys", "create", "--name", "x", "--role", "root"]).exit_code == 2
    admin = runner.invoke(app, ["keys", "create", "--name", "ops", "--role", "admin"])
    assert admin.exit_code == 0 and admin.stdout.strip() != secret


def test_revoke_by_name_and_by_id(runner: CliRunner, home: Home) -> None:
    first = runner.invoke(app, ["keys", "create", "--name", "agent"]).stdout.strip()
    second = runner.invoke(app, ["keys", "create", "--name", "ci", "--role", "admin"]).stdout.strip()
    revoked = runner.invoke(app, ["keys", "revoke", "agent"])
    assert revoked.exit_code == 0 and "agent" in revoked.stdout

    keys = json.loads(runner.invoke(app, ["keys", "list", "--json", "--all"]).stdout)
    by_name = {k["name"]: k for k in keys}
    assert by_name["agent"]["revoked_at"] is not None and by_name["ci"]["revoked_at"] is None
    assert all("hash" not in k for k in keys)
    active = json.loads(runner.invoke(app, ["keys", "list", "--json"]).stdout)
    assert [k["name"] for k in active] == ["ci"]

    assert runner.invoke(app, ["keys", "revoke", by_name["ci"]["id"]]).exit_code == 0
    missing = runner.invoke(app, ["keys", "revoke", "nobody"])
    assert missing.exit_code == 1 and "no active key" in missing.stderr
    with ServerDB.for_home(home) as db:
        store = KeyStore(db)
        assert store.verify(first) is None and store.verify(second) is None
    # The name is free again once its key is revoked.
    assert runner.invoke(app, ["keys", "create", "--name", "agent"]).exit_code == 0


def test_keys_limited_to_contexts(runner: CliRunner, home: Home) -> None:
    alpha, beta = home.create("alpha"), home.create("beta")
    ids = sorted([alpha.info().id, beta.info().id])
    created = runner.invoke(
        app, ["keys", "create", "--name", "agent", "--context", "alpha", "--context", beta.info().id]
    )
    assert created.exit_code == 0, created.output
    assert "limited to alpha, beta;" in " ".join(created.stderr.split())  # slugs, sorted
    with ServerDB.for_home(home) as db:
        key = KeyStore(db).verify(created.stdout.strip())
        assert key is not None and key.contexts == tuple(ids)
    runner.invoke(app, ["keys", "create", "--name", "ops", "--role", "admin"])

    listed = " ".join(runner.invoke(app, ["keys", "list"]).stdout.split())
    assert "active contexts: alpha, beta" in listed and listed.endswith("active all contexts")
    keys = json.loads(runner.invoke(app, ["keys", "list", "--json"]).stdout)
    slugs = {alpha.info().id: "alpha", beta.info().id: "beta"}
    assert keys[0]["contexts"] == [{"id": i, "slug": slugs[i]} for i in ids] and keys[1]["contexts"] is None

    missing = runner.invoke(app, ["keys", "create", "--name", "x", "--context", "nope"])
    assert missing.exit_code == 1 and "no context 'nope'" in missing.stderr
    admin = runner.invoke(app, ["keys", "create", "--name", "y", "--role", "admin", "--context", "alpha"])
    assert admin.exit_code == 2 and "only query keys" in admin.stderr


def test_auth_defaults_follow_the_address() -> None:
    for host in ("127.0.0.1", "127.0.0.2", "::1", "[::1]", "localhost"):
        assert is_loopback(host) and resolve_auth(ServeOptions(host=host)) is False
    for host in ("0.0.0.0", "::", "192.168.1.4", "example.com"):
        assert not is_loopback(host) and resolve_auth(ServeOptions(host=host)) is True
    assert resolve_auth(ServeOptions(auth=True)) is True
    with pytest.raises(ServeError, match="allow-remote"):
        resolve_auth(ServeOptions(host="0.0.0.0", auth=False))
    assert resolve_auth(ServeOptions(host="0.0.0.0", auth=False, allow_remote=True)) is False


def test_serve_refuses_no_auth_on_a_public_address(runner: CliRunner) -> None:
    refused = runner.invoke(app, ["serve", "--host", "0.0.0.0", "--no-auth"])
    assert refused.exit_code == 2 and "--allow-remote" in refused.stderr


def test_start_up_fails_interrupted_turns_and_seeds_the_env_key(home: Home) -> None:
    with ServerDB.for_home(home) as db:
        session = db.create_session(["acme"], "interrupted")
        query_id = new_id("qry")
        db.insert_query({"id": query_id, "session_id": session["id"], "status": "in_progress", "created": 1})
        assert db.claim_session(session["id"], query_id)

    state = open_server(home, auth=True, environ={"SLEUTH_API_KEY": "slk_" + "s" * 40})
    try:
        failed = state.db.get_query(query_id)
        assert failed is not None and (failed["status"], failed["error"]) == ("failed", "server restarted")
        reopened = state.db.get_session(session["id"])
        assert reopened is not None and reopened["active_query_id"] is None
        store = KeyStore.for_db(state.db)
        seeded = store.verify("slk_" + "s" * 40)
        assert seeded is not None and (seeded.name, seeded.role) == ("SLEUTH_API_KEY", "admin")
    finally:
        state.runtime.close()
        state.db.close()

    # Idempotent; a changed value replaces the old seeded key; a revoked value stays revoked.
    for value in ("slk_" + "s" * 40, "slk_" + "t" * 40):
        state = open_server(home, environ={"SLEUTH_API_KEY": value})
        state.runtime.close()
        state.db.close()
    with ServerDB.for_home(home) as db:
        store = KeyStore(db)
        assert store.verify("slk_" + "s" * 40) is None and store.verify("slk_" + "t" * 40) is not None
        assert len(store.list_keys()) == 2 and len(store.list_keys(include_revoked=False)) == 1
        store.revoke("SLEUTH_API_KEY")
        assert store.seed("slk_" + "t" * 40) is None
        assert store.list_keys(include_revoked=False) == []
