"""Forking a context (issue 27, item 3) over real HTTP and through the CLI: the fork answers at once
from the live version it shares, its files are hard links to the original's until one side changes
them, and after that the two go their own ways: a file added and curated in the fork is not in the
original, and the original's removal leaves the fork whole."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from typer.testing import CliRunner

from sleuth.cli import app
from sleuth.store.contexts.home import Home
from tests.api.support import ServerFactory, error, unique_slug, upload, wait_task

POLICY = b"# Parking\n\nStaff park in lot B. Visitors park in lot A near the gate.\n"
EXTRA = b"# Bicycles\n\nBicycles are stored in the shed behind building C.\n"


def curate(client: httpx.Client, slug: str) -> None:
    task = client.post(f"/api/contexts/{slug}/curate", json={}).json()["task_id"]
    assert wait_task(client, task, timeout=120)["state"] == "completed"


def search(client: httpx.Client, slug: str, ask: str) -> set[str]:
    body = {"ask": ask, "scope": [slug], "retrieval_only": True, "max_retrieved": 5}
    query = client.post("/api/query", json=body).json()
    assert query["status"] == "completed", query
    return {hit["source"] for hit in query["output_json"]["hits"] if hit["kind"] == "chunk"}


@pytest.fixture
def original(make_server: ServerFactory) -> Iterator[tuple[httpx.Client, str]]:
    client = make_server().client
    slug = unique_slug()
    client.post("/api/contexts", json={"slug": slug, "name": "Original", "description": "Site rules"})
    upload(client, slug, "parking.md", POLICY).raise_for_status()
    curate(client, slug)
    yield client, slug
    client.delete(f"/api/contexts/{slug}")


def test_a_fork_shares_files_then_diverges(original: tuple[httpx.Client, str], sample_home: object) -> None:
    client, slug = original
    fork = unique_slug()
    try:
        made = client.post(f"/api/contexts/{slug}/fork", json={"slug": fork, "name": "Fork"})
        assert made.status_code == 200, made.text
        body = made.json()
        before = client.get(f"/api/contexts/{slug}").json()
        assert body["slug"] == fork and body["name"] == "Fork" and body["id"] != before["id"]
        assert body["live_version"] == before["live_version"] and body["queryable"] is True
        assert body["description"] == "Site rules"
        assert search(client, fork, "Where do visitors park?") == {"uploads/parking.md"}

        # Shared, not copied: the source and the live version's files are the same inodes.
        home: Home = sample_home[0]  # type: ignore[index]
        a, b = home.find(slug), home.find(fork)
        same = [
            (a.sources / "uploads" / "parking.md", b.sources / "uploads" / "parking.md"),
            (
                a.version_dir(before["live_version"]) / "tables.sqlite",
                b.version_dir(body["live_version"]) / "tables.sqlite",
            ),
        ]
        for one, other in same:
            assert os.stat(one).st_ino == os.stat(other).st_ino and os.stat(one).st_nlink >= 2

        # Diverge: a new file curated into the fork only.
        upload(client, fork, "bicycles.md", EXTRA).raise_for_status()
        curate(client, fork)
        assert "uploads/bicycles.md" in search(client, fork, "Where are bicycles stored?")
        assert "uploads/bicycles.md" not in search(client, slug, "Where are bicycles stored?")
        assert client.get(f"/api/contexts/{slug}").json()["live_version"] == before["live_version"]
        assert not (a.sources / "uploads" / "bicycles.md").exists()

        # The original goes; the fork keeps every file it shared.
        assert client.delete(f"/api/contexts/{slug}").status_code == 200
        assert "uploads/parking.md" in search(client, fork, "Where do visitors park?")
    finally:
        client.delete(f"/api/contexts/{fork}")


def test_fork_errors(original: tuple[httpx.Client, str]) -> None:
    client, slug = original
    error(client.post(f"/api/contexts/{slug}/fork", json={"slug": slug}), 409, "slug_exists")
    error(
        client.post("/api/contexts/no-such-context/fork", json={"slug": unique_slug()}),
        404,
        "context_not_found",
    )
    bad = client.post(f"/api/contexts/{slug}/fork", json={"slug": "No Spaces!"})
    assert bad.status_code == 400 and bad.json()["field"] == "slug"
    assert client.post(f"/api/contexts/{slug}/fork", json={}).status_code == 400


def test_cli_fork(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SLEUTH_HOME", str(tmp_path / "home"))
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "parking.md").write_bytes(POLICY)
    runner = CliRunner()
    assert runner.invoke(app, ["compile", str(docs), "--context", "site"]).exit_code == 0
    forked = runner.invoke(app, ["fork", "site", "site-copy", "--name", "Site copy"])
    assert forked.exit_code == 0, forked.output
    assert "forked site into site-copy (live v000001)" in forked.output
    found = runner.invoke(app, ["search", "--context", "site-copy", "visitors park"])
    assert found.exit_code == 0 and "parking.md" in found.output
    again = runner.invoke(app, ["fork", "site", "site-copy"])
    assert again.exit_code == 2 and "already exists" in again.output
