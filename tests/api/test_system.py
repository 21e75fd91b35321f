"""`GET /version` (no auth, sandbox probe), `GET /auth` and `GET /project` over real HTTP."""

from __future__ import annotations

import importlib.metadata
from pathlib import Path

import pytest

import sleuth
from sleuth.agent.turn import Runtime
from sleuth.sandbox import SandboxHost
from sleuth.server.sandbox_probe import sandbox_report
from sleuth.server.state import Server
from sleuth.settings import Settings
from sleuth.store.contexts.home import Home
from sleuth.store.records.server_db import ServerDB
from tests.api.support import ServerFactory


def test_version_needs_no_key_and_reports_the_sandbox(make_server: ServerFactory) -> None:
    server = make_server(auth=True)
    response = server.client.get("/api/version")
    assert response.status_code == 200, response.text
    body = response.json()
    # one version string: the package metadata is built from `sleuth.__version__`
    assert body["sleuth_version"] == sleuth.__version__ == importlib.metadata.version("sleuth")
    assert body["api_versions"] == ["2026-07", "unstable"]
    assert body["default_api_version"] == "2026-07" and body["auth"] == "api_key"
    sandbox = body["sandbox"]
    assert set(sandbox) >= {"ok", "backend", "mode", "layers", "missing"}
    assert sandbox["backend"] == "zygote"
    # This host runs the sandbox suite, so it meets the default floor.
    assert sandbox["ok"] is True and sandbox["missing"] == [], sandbox
    assert sandbox["mode"] in ("root", "userns", "nons") and "seccomp" in sandbox["layers"]
    again = server.client.get("/api/v0/version", headers={"X-Pinecone-Api-Version": "unstable"})
    assert again.status_code == 200 and again.json()["sandbox"] == sandbox  # cached per host
    assert again.headers["X-Pinecone-Api-Version"] == "unstable"


def test_version_in_no_auth_mode(make_server: ServerFactory) -> None:
    server = make_server()
    assert server.client.get("/api/version").json()["auth"] == "none"


def test_version_reports_the_settings_the_server_uses(
    make_server: ServerFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The environment as read at each use, with the server's flags on top (`sleuth.settings`)."""
    server = make_server(max_concurrent_turns=2, project_name="Research")
    monkeypatch.setenv("SLEUTH_MAX_FILE_BYTES", "4096")
    monkeypatch.setenv("SLEUTH_MAX_CONCURRENT_TURNS", "9")  # the flag wins
    settings = server.client.get("/api/version").json()["settings"]
    assert settings["max_file_bytes"] == 4096 and settings["max_concurrent_turns"] == 2
    assert settings["project_name"] == "Research" and settings["max_queued_turns"] == 32
    assert set(settings) == set(Settings.model_fields)


def test_auth_and_project_show_the_configured_project(make_server: ServerFactory) -> None:
    server = make_server(project_id="prj_7", project_name="Research")
    assert server.client.get("/api/auth").json() == {
        "user": "local",
        "project_id": "prj_7",
        "project_name": "Research",
        "workspace_name": None,
        "org_id": None,
    }
    assert server.client.get("/api/project").json() == {
        "id": "prj_7",
        "name": "Research",
        "workspaces_required": False,
    }


def test_probe_without_a_curated_context_says_so(tmp_path: Path) -> None:
    """Nothing to mount means nothing to probe: reported, not cached, and no zygote is started."""
    home = Home(tmp_path / "empty")
    with ServerDB.for_home(home) as db, SandboxHost() as host:
        state = Server(home=home, db=db, runtime=Runtime(home, db=db, sandbox_host=host))
        report = sandbox_report(state)
        assert report["ok"] is False and report["mode"] is None and report["layers"] == []
        assert "curated context" in report["detail"]
        assert host.info == {}
