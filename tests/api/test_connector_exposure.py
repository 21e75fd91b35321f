"""What connectors let a caller see or place, over real HTTP (issue 40, item 11):

- a query key sees a connector's name, kind and status, never its configuration (a folder, a URL) or
  error, and an admin's tasks without their input, output, error, steps or files;
- `GET /version` without an admin key shows no folders and no allow lists;
- an upload cannot land in a connector's folder, and removing a connector deletes only the files its
  syncs brought;
- a refusal names a folder as the client gave it, never the path a link resolves to, nor the server's
  own directories.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from sleuth.store.records.keys import KeyStore
from tests.api.support import LiveServer, ServerFactory, error, make_zip, unique_slug, upload, wait_task

CONNECTOR_VIEW = {"name", "kind", "every_s", "status", "last_attempt_at"}


def key(server: LiveServer, name: str, role: str = "query") -> dict[str, str]:
    _, secret = KeyStore.for_db(server.state.db).create(name, role)
    return {"Api-Key": secret}


def wait(server: LiveServer, headers: dict[str, str], task_id: str) -> dict[str, Any]:
    deadline = time.monotonic() + 60
    while True:
        task: dict[str, Any] = server.client.get(f"/api/tasks/{task_id}", headers=headers).json()
        if task["state"] in ("completed", "failed", "cancelled"):
            return task
        assert time.monotonic() < deadline, task
        time.sleep(0.05)


@pytest.fixture
def share(tmp_path: Path) -> Path:
    folder = tmp_path / "share"
    (folder / "hr").mkdir(parents=True)
    (folder / "hr" / "leave.md").write_text("# Leave\n\nTwenty-five days of leave a year.\n")
    return folder


@pytest.fixture
def secured(make_server: ServerFactory, tmp_path: Path) -> LiveServer:
    return make_server(auth=True, connector_folders=str(tmp_path), connector_allow="10.0.0.0/8")


@pytest.fixture
def local(make_server: ServerFactory, tmp_path: Path) -> LiveServer:
    return make_server(connector_folders=str(tmp_path))


@pytest.fixture
def slug(local: LiveServer) -> Iterator[str]:
    name = unique_slug()
    local.client.post("/api/contexts", json={"slug": name, "name": "Synced"}).raise_for_status()
    yield name
    local.client.delete(f"/api/contexts/{name}")


def add_and_sync(client: httpx.Client, slug: str, share: Path, headers: dict[str, str]) -> str:
    """Add the folder connector `docs` over `share` and start a sync without a curate; the task id."""
    made = client.post(
        f"/api/contexts/{slug}/connectors",
        json={"name": "docs", "kind": "folder", "config": {"path": str(share)}},
        headers=headers,
    )
    assert made.status_code == 200, made.text
    started = client.post(
        f"/api/contexts/{slug}/import", json={"connector": "docs", "curate": False}, headers=headers
    )
    assert started.status_code == 200, started.text
    return str(started.json()["task_id"])


# ------------------------------------------------------------------------------- what a key sees
def test_a_query_key_sees_connectors_by_name_and_status_and_no_admins_task_details(
    secured: LiveServer, share: Path
) -> None:
    admin, agent = key(secured, "ops", "admin"), key(secured, "agent")
    client, slug = secured.client, unique_slug()
    client.post("/api/contexts", json={"slug": slug, "name": "Synced"}, headers=admin).raise_for_status()
    try:
        task_id = add_and_sync(client, slug, share, admin)
        assert wait(secured, admin, task_id)["state"] == "completed"

        seen = client.get(f"/api/contexts/{slug}/connectors", headers=agent)
        assert seen.status_code == 200 and str(share) not in seen.text, seen.text  # before: config.path
        [entry] = seen.json()["connectors"]
        assert set(entry) == CONNECTOR_VIEW and entry["status"] == "ok" and entry["kind"] == "folder"
        [full] = client.get(f"/api/contexts/{slug}/connectors", headers=admin).json()["connectors"]
        assert full["config"]["path"] == str(share) and full["last_sync"]["added"] == ["hr/leave.md"]

        # the admin's import: its progress, not what it read (before: input, output and steps in full)
        task = client.get(f"/api/tasks/{task_id}", headers=agent).json()
        assert task["state"] == "completed" and task["workflow"] == "import"
        assert (task["input"], task["output"], task["error"], task["steps"]) == (None, None, None, [])
        listed = client.get("/api/tasks", params={"context": slug}, headers=agent).json()["items"]
        assert [(t["id"], t["input"], t["output"]) for t in listed] == [(task_id, None, None)]
        files = client.get(f"/api/tasks/{task_id}/files/list", headers=agent)
        error(files, 404, "task_not_found")
        mine = client.get(f"/api/tasks/{task_id}", headers=admin).json()
        assert mine["input"]["connector"] == "docs" and mine["output"]["added"] == ["hr/leave.md"]
    finally:
        client.delete(f"/api/contexts/{slug}", headers=admin)


def test_version_shows_folders_and_allow_lists_to_an_admin_only(secured: LiveServer, tmp_path: Path) -> None:
    admin, agent = key(secured, "ops", "admin"), key(secured, "agent")
    hidden = {"connector_allow", "connector_folders", "connector_s3_instance_credentials"}
    for headers in ({}, agent, {"Api-Key": "sk-not-a-key"}):
        response = secured.client.get("/api/version", headers=headers)
        assert response.status_code == 200, response.text
        settings = response.json()["settings"]
        assert not hidden & set(settings), headers  # before: both shown to anyone
        assert str(tmp_path) not in response.text and "10.0.0.0/8" not in response.text
        assert settings["max_file_bytes"] > 0  # the limits a client needs stay
    settings = secured.client.get("/api/version", headers=admin).json()["settings"]
    assert settings["connector_folders"] == str(tmp_path) and settings["connector_allow"] == "10.0.0.0/8"


# ------------------------------------------------------------------------------- a connector's folder
def test_an_upload_cannot_land_in_a_connectors_folder(local: LiveServer, slug: str, share: Path) -> None:
    client = local.client
    assert wait_task(client, add_and_sync(client, slug, share, {}))["state"] == "completed"
    note = b"# Note\n\nPassed off as the connector's.\n"
    for path in ("docs", "docs/hr"):
        refused = error(upload(client, slug, "note.md", note, path=path), 409, "connector_folder")
        assert refused["connector"] == "docs" and refused["field"] == "path"
    archive = make_zip({"note.md": note})
    error(upload(client, slug, "notes.zip", archive, path="docs"), 409, "connector_folder")
    assert upload(client, slug, "note.md", note, path="documents").status_code == 200  # not the folder
    listed = client.get(f"/api/contexts/{slug}/source/list/docs", params={"recursive": True}).text
    assert "note.md" not in listed


def test_removing_a_connector_deletes_only_what_it_brought(local: LiveServer, slug: str, share: Path) -> None:
    client = local.client
    assert wait_task(client, add_and_sync(client, slug, share, {}))["state"] == "completed"
    folder = local.state.home.find(slug).sources / "docs"
    assert (folder / "hr" / "leave.md").is_file()
    kept = folder / "hr" / "mine.md"  # a file the connector never listed (copied in by hand)
    kept.write_text("# Mine\n")
    assert client.delete(f"/api/contexts/{slug}/connectors/docs").json() == {
        "deleted": True,
        "connector": "docs",
    }
    assert not (folder / "hr" / "leave.md").exists()
    assert kept.read_text() == "# Mine\n"  # before: the whole folder was removed
    assert not (local.state.home.find(slug).root / "connectors" / "docs.state.json").exists()


# ------------------------------------------------------------------------------- what a refusal says
def test_a_refusal_names_the_path_as_given_never_where_a_link_leads(
    local: LiveServer, slug: str, tmp_path: Path
) -> None:
    client = local.client
    hidden = tmp_path.parent / f"{tmp_path.name}-server-layout" / "secret-place"
    hidden.mkdir(parents=True)
    link = tmp_path / "looks-allowed"
    link.symlink_to(hidden, target_is_directory=True)  # inside the allowed folder, leads outside it
    refused = client.post(
        f"/api/contexts/{slug}/connectors",
        json={"name": "docs", "kind": "folder", "config": {"path": str(link)}},
    )
    body = error(refused, 400, "connector_refused")
    assert str(link) in body["message"] and "secret-place" not in body["message"], body  # before: resolved
    (tmp_path / "real").mkdir()
    (tmp_path / "alias").symlink_to(tmp_path / "real", target_is_directory=True)
    missing = client.post(
        f"/api/contexts/{slug}/connectors",
        json={"name": "docs", "kind": "folder", "config": {"path": str(tmp_path / "alias" / "absent")}},
    )
    body = error(missing, 400, "invalid_request")
    assert "alias/absent" in body["message"] and str(tmp_path / "real") not in body["message"], body

    # a source that is a link out of the context: refused without naming the context's directory
    sources = local.state.home.find(slug).sources
    sources.mkdir(exist_ok=True)
    (sources / "elsewhere").symlink_to(hidden, target_is_directory=True)
    (hidden / "x.md").write_text("# X\n")
    read = client.get(f"/api/contexts/{slug}/source/read/elsewhere/x.md")
    body = error(read, 400, "unsafe_path")
    assert str(sources) not in body["message"] and "elsewhere/x.md" in body["message"], body
