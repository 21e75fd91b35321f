"""Context routes over real HTTP (spec/api.md §6): create, upload files and archives, browse and delete
sources, curate in the background, read the ledger and the knowledge tree, delete; and the documented
error codes of each route. Every test makes its own uniquely named context and deletes it."""

from __future__ import annotations

import io
import json
import tarfile
import uuid
import zipfile
from typing import Any

import httpx
import pytest

from sleuth.compile.manifest import DETERMINISTIC_KINDS, parse_manifest
from sleuth.store.records.keys import KeyStore
from tests import loopback
from tests.api.support import ServerFactory, error, make_zip, unique_slug, upload, wait_task

NOTE = b"# Onboarding\n\nEvery hire receives a laptop on day one. Tickets use the code HW-1107.\n"
NESTED = b"# Refunds\n\nRefunds are paid within 14 days of the request.\n"


def raw_upload(client: httpx.Client, slug: str, filename: bytes, data: bytes) -> httpx.Response:
    """A multipart body written by hand: httpx would percent-encode a control character in a name."""
    boundary = b"sleuth-test-boundary"
    body = (
        b"--" + boundary + b"\r\n"
        b'Content-Disposition: form-data; name="file"; filename="' + filename + b'"\r\n'
        b"Content-Type: application/octet-stream\r\n\r\n" + data + b"\r\n--" + boundary + b"--\r\n"
    )
    return client.post(
        f"/api/contexts/{slug}/import/upload",
        content=body,
        headers={"content-type": f"multipart/form-data; boundary={boundary.decode()}"},
    )


def test_context_lifecycle(client: httpx.Client) -> None:
    slug = unique_slug()
    created = client.post(
        "/api/contexts",
        json={
            "slug": slug,
            "name": "Handbook",
            "description": "Company handbook",
            "guide": "Cite the handbook.",
            "manifest": {"curate": {"chunks": {"chunking": {"target_size": 128, "overlap": 16}}}},
            "kind": "search",
            "pinecone_api_key": "ignored",
        },
    )
    assert created.status_code == 200, created.text
    ctx = created.json()
    assert ctx["slug"] == slug and ctx["id"].startswith("ctx_") and ctx["kind"] == "search"
    assert ctx["description"] == "Company handbook" and ctx["guide"] == "Cite the handbook."
    assert ctx["created_by"] == "local" and ctx["has_sources"] is False and ctx["queryable"] is False
    assert ctx["live_version"] is None and ctx["semantic_index"] is None and not ctx["is_curating"]
    try:
        # Reads by slug and by id; the list carries stats and puts the newest first.
        assert client.get(f"/api/contexts/{ctx['id']}").json()["slug"] == slug
        listed = client.get("/api/contexts").json()
        assert listed[0]["slug"] == slug and listed[0]["stats"]["tasks_total"] == 0
        assert "stats" not in client.get(f"/api/contexts/{slug}").json()
        assert client.get(f"/api/contexts/{slug}/manifest").json()["curate"]["chunks"]["chunking"] == {
            "target_size": 128,
            "overlap": 16,
        }

        # A plain file is written before the answer; an archive is expanded by an import task.
        plain = upload(client, slug, "note.md", NOTE)
        assert plain.status_code == 200, plain.text
        body = plain.json()
        assert body["state"] == "completed" and body["files"][0]["path"] == "uploads/note.md"
        assert body["files"][0]["size"] == len(NOTE) and len(body["files"][0]["sha256"]) == 64
        archive = make_zip(
            {"nested/deep/refunds.md": NESTED, "../evil.md": b"x", "ok.txt": b"plain text"},
            links=("link.md",),
        )
        staged = upload(client, slug, "docs.zip", archive)
        assert staged.status_code == 200 and staged.json()["state"] == "importing"
        imported = wait_task(client, staged.json()["task_id"])
        assert imported["workflow"] == "import" and imported["state"] == "completed", imported
        actions = {row["member"]: row for row in imported["output"]["files"]}
        assert actions["nested/deep/refunds.md"]["action"] == "extracted"
        assert actions["nested/deep/refunds.md"]["path"] == "uploads/docs/nested/deep/refunds.md"
        assert actions["../evil.md"]["action"] == "skipped" and ".." in actions["../evil.md"]["reason"]
        assert actions["link.md"]["action"] == "skipped" and "link" in actions["link.md"]["reason"]
        assert imported["output"]["counts"] == {"extracted": 2, "skipped": 2, "failed": 0}

        # Browse the source tree.
        root = client.get(f"/api/contexts/{slug}/source/list").json()
        assert [(e["name"], e["kind"]) for e in root["entries"]] == [("uploads", "dir")]
        assert root["total"] == 1 and root["offset"] == 0 and root["next_offset"] is None
        uploads = client.get(f"/api/contexts/{slug}/source/list/uploads").json()
        assert [e["name"] for e in uploads["entries"]] == ["docs", "note.md"]
        stats = client.get(f"/api/contexts/{slug}/source/stats").json()
        assert stats["file_count"] == 3 and stats["used_files"] == 3
        assert stats["total_size"] == len(NOTE) + len(NESTED) + len(b"plain text")
        assert stats["max_files_per_context"] == 100_000 and stats["max_bytes_per_file"] == 250 * 1024**2
        manifest = client.get(f"/api/contexts/{slug}/source/manifest").json()
        assert manifest["total"] == 3
        assert {f["path"] for f in manifest["files"]} == {
            "uploads/note.md",
            "uploads/docs/nested/deep/refunds.md",
            "uploads/docs/ok.txt",
        }
        read = client.get(f"/api/contexts/{slug}/source/read/uploads/docs/nested/deep/refunds.md")
        assert read.status_code == 200 and read.content == NESTED
        assert read.headers["content-type"].startswith("text/markdown")
        assert read.headers["content-length"] == str(len(NESTED))
        removed = client.delete(f"/api/contexts/{slug}/source/delete/uploads/docs/ok.txt")
        assert removed.json() == {"deleted": True, "path": "uploads/docs/ok.txt"}
        assert client.get(f"/api/contexts/{slug}/source/read/uploads/docs/ok.txt").status_code == 404
        assert client.get(f"/api/contexts/{slug}").json()["last_source_import_at"] is not None

        # Before the first curate the knowledge tree is empty.
        assert client.get(f"/api/contexts/{slug}/knowledge/list").json()["entries"] == []
        assert client.get(f"/api/contexts/{slug}/knowledge/stats").json()["file_count"] == 0
        error(client.get(f"/api/contexts/{slug}/knowledge/read/pages/x.jsonl"), 404, "path_not_found")

        # Curate in the background and poll the task.
        started = client.post(f"/api/contexts/{slug}/curate", json={"scope": "all", "batch_size": 8})
        assert started.status_code == 200, started.text
        assert started.json()["state"] == "curating"
        task = wait_task(client, started.json()["task_id"])
        assert task["state"] == "completed", task
        output = task["output"]
        assert output["flipped"] is True and output["mode"] == "incremental"
        assert output["live_version"] == "v000001" and output["delta"]["new"] == 2
        assert output["delta"]["chunks_created"] >= 2 and output["usage"]["total_tokens"] == 0
        assert task["progress"]["pct"] == 100 and task["progress"]["phases"][:2] == ["snapshot", "parse"]
        assert [s["status"] for s in task["steps"]] == ["completed"] * len(task["steps"])
        assert task["running_from"] is not None and task["runtime_seconds"] > 0

        # The task's files hold the full compile report.
        files = client.get(f"/api/tasks/{task['id']}/files/list").json()
        assert [e["name"] for e in files["entries"]] == ["curate-report.json"]
        report = client.get(f"/api/tasks/{task['id']}/files/read/curate-report.json")
        assert report.json()["version"] == "v000001" and report.headers["x-nexus-stale"] == "false"
        meta = client.get(f"/api/tasks/{task['id']}/files/metadata/curate-report.json").json()
        assert meta["size"] == int(report.headers["x-nexus-file-size"])

        ctx = client.get(f"/api/contexts/{slug}").json()
        assert ctx["queryable"] is True and ctx["live_version"] == "v000001"
        assert ctx["semantic_index"] == "local:v000001" and ctx["keyword_index"] == "local:v000001"
        assert ctx["last_curated_at"] is not None and not ctx["is_curating"]

        # The ledger and the knowledge tree of the live version.
        ledger = client.get(f"/api/contexts/{slug}/curate").json()
        assert ledger["live_version"] == "v000001"
        assert set(ledger["manifest"]) == {"uploads/note.md", "uploads/docs/nested/deep/refunds.md"}
        assert set(ledger["chunk_ids"]) == set(ledger["manifest"])
        knowledge = client.get(f"/api/contexts/{slug}/knowledge/list").json()
        names = {e["name"] for e in knowledge["entries"]}
        assert {"pages", "chunks", "rosters"} <= names
        chunks = client.get(f"/api/contexts/{slug}/knowledge/read/chunks/uploads/note.md.jsonl")
        assert chunks.status_code == 200 and b"HW-1107" in chunks.content
        pages = client.get(f"/api/contexts/{slug}/knowledge/list/pages/uploads").json()
        assert {e["name"] for e in pages["entries"]} == {"note.md.jsonl", "docs"}
        kstats = client.get(f"/api/contexts/{slug}/knowledge/stats").json()
        assert kstats["file_count"] >= 4 and kstats["total_size"] > 0

        # Nothing changed: the next curate is empty and does not flip.
        again = wait_task(client, client.post(f"/api/contexts/{slug}/curate").json()["task_id"])
        assert again["output"]["delta"] == "empty" and again["output"]["flipped"] is False

        # delete-sources removes files and runs a deletion-only curate.
        deleting = client.post(
            f"/api/contexts/{slug}/curate/delete-sources",
            json={"sources": ["uploads/note.md", "uploads/missing.md"]},
        )
        assert deleting.status_code == 200, deleting.text
        body = deleting.json()
        assert body["deleted"] == ["uploads/note.md"] and body["not_found"] == ["uploads/missing.md"]
        done = wait_task(client, body["task_id"])
        assert done["state"] == "completed" and done["output"]["delta"]["deleted"] == 1
        assert done["input"]["deletion_only"] is True
        assert set(client.get(f"/api/contexts/{slug}/curate").json()["manifest"]) == {
            "uploads/docs/nested/deep/refunds.md"
        }

        # Update: rename, clear the description, reset the manifest.
        renamed = unique_slug()
        updated = client.put(
            f"/api/contexts/{slug}",
            json={"slug": renamed, "name": "Renamed", "description": "", "manifest": {}, "kind": "search"},
        )
        assert updated.status_code == 200, updated.text
        assert updated.json()["slug"] == renamed and updated.json()["description"] is None
        assert updated.json()["guide"] == "Cite the handbook." and updated.json()["manifest"] == {}
        slug = renamed

        stats = client.get(f"/api/contexts/{slug}/tasks/stats").json()
        assert stats["tasks_total"] == 5 and stats["tasks_completed"] == 5 and stats["tasks_active"] == 0
        assert stats["tokens_total"] == 0 and stats["runtime_seconds"] > 0
    finally:
        deleted = client.delete(f"/api/contexts/{slug}")
    assert deleted.json() == {"deleted": True, "slug": slug}
    error(client.get(f"/api/contexts/{slug}"), 404, "context_not_found")


def test_tar_archive_and_custom_path(client: httpx.Client, context: str) -> None:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as archive:
        for name, data in (("a/one.md", b"# One\n"), ("/abs.md", b"absolute")):
            info = tarfile.TarInfo(name)
            info.size = len(data)
            archive.addfile(info, io.BytesIO(data))
        link = tarfile.TarInfo("escape.md")
        link.type = tarfile.SYMTYPE
        link.linkname = "../../../../etc/passwd"
        archive.addfile(link)
    staged = upload(client, context, "bundle.tar.gz", buffer.getvalue(), path="inbox/2026")
    task = wait_task(client, staged.json()["task_id"])
    rows = {r["member"]: r for r in task["output"]["files"]}
    assert (
        rows["a/one.md"]["path"] == "inbox/2026/bundle/a/one.md" and rows["a/one.md"]["action"] == "extracted"
    )
    assert rows["/abs.md"]["action"] == "skipped" and rows["escape.md"]["action"] == "skipped"
    assert client.get(f"/api/contexts/{context}/source/read/inbox/2026/bundle/a/one.md").content == b"# One\n"

    broken = upload(client, context, "broken.zip", b"not a zip at all")
    failed = wait_task(client, broken.json()["task_id"])
    assert failed["state"] == "failed" and "not a readable archive" in failed["error"]

    # The same path replaces the old file.
    upload(client, context, "same.md", b"old")
    upload(client, context, "same.md", b"new")
    assert client.get(f"/api/contexts/{context}/source/read/uploads/same.md").content == b"new"


def test_create_and_update_errors(client: httpx.Client, context: str) -> None:
    def create(**body: Any) -> httpx.Response:
        return client.post("/api/contexts", json={"slug": unique_slug(), "name": "x", **body})

    error(create(kind="work"), 400, "unsupported_context_kind")
    assert error(create(kind="other"), 400, "invalid_request")["field"] == "kind"
    for bad in ("Bad-Slug", "ab", "1abc", "a_b-c", "x" * 65, "trailing-"):
        body = error(client.post("/api/contexts", json={"slug": bad, "name": "x"}), 400, "invalid_request")
        assert body["field"] == "slug", bad
    assert error(create(name=""), 400, "invalid_request")["field"] == "name"
    assert error(create(description="d" * 2001), 400, "invalid_request")["field"] == "description"
    assert error(create(max_step=3), 400, "invalid_request")["field"] == "max_step"
    invalid = error(
        create(manifest={"curate": {"chunks": {"chunking": {"target_size": 64, "overlap": 64}}}, "bogus": 1}),
        400,
        "invalid_manifest",
    )
    paths = {e["path"] for e in invalid["errors"]}
    assert "bogus" in paths and all(set(e) == {"path", "message"} for e in invalid["errors"])
    assert error(create(manifest=[1]), 400, "invalid_manifest")["errors"][0]["path"] == ""
    error(client.post("/api/contexts", json={"slug": "acme", "name": "taken"}), 409, "slug_exists")
    error(client.post("/api/contexts", json={"slug": context, "name": "taken"}), 409, "slug_exists")

    missing = unique_slug()
    error(client.get(f"/api/contexts/{missing}"), 404, "context_not_found")
    error(client.put(f"/api/contexts/{missing}", json={"name": "x"}), 404, "context_not_found")
    error(client.delete(f"/api/contexts/{missing}"), 404, "context_not_found")
    error(client.get(f"/api/contexts/{missing}/manifest"), 404, "context_not_found")
    error(client.get(f"/api/contexts/{missing}/tasks/stats"), 404, "context_not_found")
    error(client.put(f"/api/contexts/{context}", json={"slug": "acme"}), 409, "slug_exists")
    assert (
        error(client.put(f"/api/contexts/{context}", json={"kind": "work"}), 400, "invalid_request")["field"]
        == "kind"
    )
    error(
        client.put(
            f"/api/contexts/{context}", json={"manifest": {"curate": {"chunks": {"enabled": "maybe"}}}}
        ),
        400,
        "invalid_manifest",
    )
    error(client.put(f"/api/contexts/{context}", json={"nmae": "typo"}), 400, "invalid_request")
    # Nothing of a refused update was stored.
    assert client.get(f"/api/contexts/{context}").json()["manifest"] == {}


def test_source_and_knowledge_errors(client: httpx.Client, context: str) -> None:
    missing = unique_slug()
    error(upload(client, missing, "a.md", b"x"), 404, "context_not_found")
    for route in (
        "source/list",
        "source/stats",
        "source/manifest",
        "curate",
        "knowledge/list",
        "knowledge/stats",
    ):
        error(client.get(f"/api/contexts/{missing}/{route}"), 404, "context_not_found")
    error(client.get(f"/api/contexts/{missing}/source/read/a.md"), 404, "context_not_found")
    error(client.delete(f"/api/contexts/{missing}/source/delete/a.md"), 404, "context_not_found")
    error(client.post(f"/api/contexts/{missing}/curate"), 404, "context_not_found")

    # Unsafe names, in the upload's filename or path and in every path route.
    for name in ("../escape.md", "..", "a\\b.md", "x" * 256 + ".md"):
        error(upload(client, context, name, b"x"), 400, "unsafe_path")
    for raw in (b"bad\x01.md", b"a\\b.md", b"../../x.md"):
        error(raw_upload(client, context, raw, b"x"), 400, "unsafe_path")
    for path in ("../outside", "/etc", "a/../../b"):
        error(upload(client, context, "a.md", b"x", path=path), 400, "unsafe_path")
    for encoded in ("%2e%2e/%2e%2e/etc/passwd", "a%5Cb", "x%01y"):
        for route in ("source/read", "source/list", "knowledge/read", "knowledge/list"):
            error(client.get(f"/api/contexts/{context}/{route}/{encoded}"), 400, "unsafe_path")
        error(client.delete(f"/api/contexts/{context}/source/delete/{encoded}"), 400, "unsafe_path")
    error(
        client.post(f"/api/contexts/{context}/curate/delete-sources", json={"sources": ["../x"]}),
        400,
        "unsafe_path",
    )
    assert client.get(f"/api/contexts/{context}/source/manifest").json()["total"] == 0

    # Missing things and malformed uploads.
    error(client.get(f"/api/contexts/{context}/source/read/uploads/none.md"), 404, "path_not_found")
    error(client.get(f"/api/contexts/{context}/source/list/uploads"), 404, "path_not_found")
    error(client.delete(f"/api/contexts/{context}/source/delete/uploads/none.md"), 404, "path_not_found")
    error(client.get(f"/api/contexts/{context}/knowledge/list/pages"), 404, "path_not_found")
    no_file = client.post(f"/api/contexts/{context}/import/upload", data={"other": "x"})
    assert error(no_file, 400, "invalid_request")["field"] == "file"
    json_body = client.post(f"/api/contexts/{context}/import/upload", json={"file": "x"})
    error(json_body, 400, "invalid_request")
    two = client.post(
        f"/api/contexts/{context}/import/upload", files=[("file", ("a.md", b"a")), ("file", ("b.md", b"b"))]
    )
    error(two, 400, "invalid_request")
    # A kind Sleuth cannot read is refused with what it reads, and nothing is stored (issue 39, item 12).
    weird = error(upload(client, context, "weird.xyz", b"\x00\x01"), 415, "unsupported_format")
    assert "cannot read .xyz files" in weird["message"] and "PDF" in weird["message"]
    error(upload(client, context, "README", b"no extension"), 415, "unsupported_format")
    assert client.get(f"/api/contexts/{context}/source/manifest").json()["total"] == 0

    # Curate needs sources and a known model.
    error(client.post(f"/api/contexts/{context}/curate"), 409, "no_sources")
    upload(client, context, "a.md", b"# A\n\nSome text.\n")
    error(
        client.post(f"/api/contexts/{context}/curate", json={"model": "no-such-model"}),
        400,
        "model_unavailable",
    )
    error(client.post(f"/api/contexts/{context}/curate", json={"forse": True}), 400, "invalid_request")
    error(client.post(f"/api/contexts/{context}/curate", json={"legs": ["tables"]}), 400, "invalid_request")
    error(
        client.post(f"/api/contexts/{context}/curate/delete-sources", json={"sources": []}),
        400,
        "invalid_request",
    )


def test_upload_limits(client: httpx.Client, context: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SLEUTH_MAX_FILE_BYTES", "100")
    error(upload(client, context, "big.md", b"x" * 101), 413, "file_too_large")
    assert upload(client, context, "small.md", b"x" * 100).status_code == 200

    monkeypatch.setenv("SLEUTH_MAX_CONTEXT_BYTES", "150")
    error(upload(client, context, "second.md", b"y" * 60), 413, "context_byte_limit")
    assert upload(client, context, "small.md", b"z" * 90).status_code == 200  # a replacement fits

    monkeypatch.setenv("SLEUTH_MAX_FILES_PER_CONTEXT", "1")
    error(upload(client, context, "third.md", b"t"), 409, "context_file_limit")
    assert client.get(f"/api/contexts/{context}/source/stats").json()["max_files_per_context"] == 1

    monkeypatch.setenv("SLEUTH_MAX_UPLOAD_BYTES", "1000")
    error(upload(client, context, "huge.zip", b"z" * 5000), 413, "file_too_large")

    # Inside an archive the limits skip members instead of failing the upload.
    monkeypatch.setenv("SLEUTH_MAX_FILES_PER_CONTEXT", "2")
    staged = upload(client, context, "pair.zip", make_zip({"one.md": b"1", "two.md": b"2"}))
    task = wait_task(client, staged.json()["task_id"])
    actions = sorted((r["member"], r["action"]) for r in task["output"]["files"])
    assert actions == [("one.md", "extracted"), ("two.md", "skipped")]
    assert "context_file_limit" in next(
        r["reason"] for r in task["output"]["files"] if r["member"] == "two.md"
    )
    # No staging leftovers are listed as sources.
    assert client.get(f"/api/contexts/{context}/source/manifest").json()["total"] == 2


def test_roles(make_server: ServerFactory) -> None:
    """Reads need any key; every change needs an admin key (403 forbidden for a query key)."""
    server = make_server(auth=True)
    keys = KeyStore.for_db(server.state.db)
    _, admin_secret = keys.create(f"admin-{uuid.uuid4().hex[:6]}", "admin")
    _, query_secret = keys.create(f"query-{uuid.uuid4().hex[:6]}", "query")
    admin = loopback.client(base_url=server.url, headers={"Authorization": f"Bearer {admin_secret}"})
    query = loopback.client(base_url=server.url, headers={"X-Pinecone-Api-Key": query_secret})
    slug = unique_slug()
    try:
        error(server.client.get("/api/contexts"), 401, "unauthenticated")
        created = admin.post("/api/contexts", json={"slug": slug, "name": "roles"})
        assert created.status_code == 200 and created.json()["created_by"].startswith("admin-")
        assert upload(admin, slug, "a.md", b"# A\n").status_code == 200
        for path in ("/api/contexts", f"/api/contexts/{slug}", f"/api/contexts/{slug}/source/list/uploads"):
            assert query.get(path).status_code == 200, path
        task_id = query.get("/api/tasks").json()["items"][0]["id"]
        changes = [
            query.post("/api/contexts", json={"slug": unique_slug(), "name": "x"}),
            query.put(f"/api/contexts/{slug}", json={"name": "y"}),
            query.delete(f"/api/contexts/{slug}"),
            upload(query, slug, "b.md", b"b"),
            query.delete(f"/api/contexts/{slug}/source/delete/uploads/a.md"),
            query.post(f"/api/contexts/{slug}/curate"),
            query.post(f"/api/contexts/{slug}/curate/delete-sources", json={"sources": ["uploads/a.md"]}),
            query.delete(f"/api/tasks/{task_id}"),
            query.post(f"/api/contexts/{slug}/pack"),
            query.post(f"/api/contexts/{slug}/restore", files={"file": ("p.zip", b"x")}),
        ]
        for response in changes:
            error(response, 403, "forbidden")
        assert admin.get(f"/api/contexts/{slug}/source/manifest").json()["total"] == 1
    finally:
        admin.delete(f"/api/contexts/{slug}")
        admin.close()
        query.close()


def test_manifest_templates(client: httpx.Client) -> None:
    catalog = client.get("/api/manifest/templates").json()
    ids = [t["id"] for t in catalog["templates"]]
    assert ids == [
        "general",
        "paged-documents",
        "glossary",
        "knowledge-base",
        "contracts",
        "financial-filings",
        "research-papers",
        "codebase",
    ]
    assert (
        catalog["default_id"] == "general" and [t["default"] for t in catalog["templates"]].count(True) == 1
    )
    for template in catalog["templates"]:
        manifest = parse_manifest(template["manifest"])
        kinds = {t.kind for t in manifest.curate.artifacts.artifact_types}
        assert template["needs_model"] == (not kinds <= DETERMINISTIC_KINDS), template["id"]
        assert 3 <= len(template["sample_questions"]) <= 5
        assert template["label"] and template["description"] and template["when_to_use"]
    glossary = next(t for t in catalog["templates"] if t["id"] == "glossary")
    slug = unique_slug()
    created = client.post("/api/contexts", json={"slug": slug, "name": "g", "manifest": glossary["manifest"]})
    assert created.status_code == 200 and created.json()["manifest"] == glossary["manifest"]
    client.delete(f"/api/contexts/{slug}")


def make_pack(members: dict[str, bytes], pack: dict[str, Any] | None = None) -> bytes:
    header = {"format": "sleuth-pack", "format_version": 1, "slug": "x"} if pack is None else pack
    return make_zip({"pack.json": json.dumps(header).encode(), **members})


def test_pack_and_restore(client: httpx.Client, context: str) -> None:
    upload(client, context, "note.md", NOTE)
    client.put(f"/api/contexts/{context}", json={"description": "packed", "guide": "Be brief."})
    wait_task(client, client.post(f"/api/contexts/{context}/curate").json()["task_id"])

    started = client.post(f"/api/contexts/{context}/pack", json={"include_traces": False})
    assert started.status_code == 200 and started.json()["state"] == "packing", started.text
    task = wait_task(client, started.json()["task_id"])
    assert task["state"] == "completed" and task["workflow"] == "pack", task
    output = task["output"]
    assert output["pack_filename"] == f"{context}.context.zip" and output["sources_files"] == 1
    assert output["knowledge_files"] >= 3 and output["traces_files"] == 0 and output["pack_size"] > 0
    download = client.get(f"/api/tasks/{task['id']}/files/read/{context}.context.zip")
    assert download.status_code == 200 and int(download.headers["x-nexus-file-size"]) == output["pack_size"]
    archive = zipfile.ZipFile(io.BytesIO(download.content))
    names = set(archive.namelist())
    assert {"pack.json", "manifest.json", "ledger.json", "tables.sqlite", "sources/uploads/note.md"} <= names
    assert "knowledge/chunks/uploads/note.md.jsonl" in names
    header = json.loads(archive.read("pack.json"))
    assert header["format_version"] == 1 and header["live_version"] == "v000001"
    assert header["guide"] == "Be brief."

    # Restore into a new, empty context: sources, manifest, description and a live version.
    target = unique_slug()
    client.post("/api/contexts", json={"slug": target, "name": "restored"})
    try:
        restore = client.post(
            f"/api/contexts/{target}/restore", files={"file": (f"{context}.context.zip", download.content)}
        )
        assert restore.status_code == 200 and restore.json()["state"] == "restoring", restore.text
        restored = wait_task(client, restore.json()["task_id"])
        assert restored["state"] == "completed" and restored["workflow"] == "restore", restored
        assert restored["output"]["sources_files"] == 1 and restored["output"]["live_version"] == "v000001"
        ctx = client.get(f"/api/contexts/{target}").json()
        assert ctx["queryable"] and ctx["description"] == "packed" and ctx["guide"] == "Be brief."
        assert client.get(f"/api/contexts/{target}/source/read/uploads/note.md").content == NOTE
        chunks = client.get(f"/api/contexts/{target}/knowledge/read/chunks/uploads/note.md.jsonl")
        assert b"HW-1107" in chunks.content

        # A context with sources cannot be restored into.
        again = client.post(
            f"/api/contexts/{target}/restore", files={"file": ("p.context.zip", download.content)}
        )
        error(again, 409, "context_not_empty")
    finally:
        client.delete(f"/api/contexts/{target}")

    # Invalid packs are refused before any task starts.
    empty = unique_slug()
    client.post("/api/contexts", json={"slug": empty, "name": "empty"})
    try:
        bad = {
            "not a zip": b"plain bytes",
            "no pack.json": make_zip({"sources/a.md": b"a"}),
            "unsafe member": make_pack({"sources/../../escape.md": b"x"}),
            "unknown member": make_pack({"etc/passwd": b"x"}),
            "format version": make_pack({}, {"format": "sleuth-pack", "format_version": 99}),
            "bad manifest": make_pack({"manifest.json": b'{"curate": {"bogus": 1}}'}),
        }
        for label, data in bad.items():
            response = client.post(f"/api/contexts/{empty}/restore", files={"file": ("p.context.zip", data)})
            assert error(response, 400, "invalid_pack"), label
        linked = make_zip(
            {"pack.json": b'{"format": "sleuth-pack", "format_version": 1}'}, links=("sources/l.md",)
        )
        error(
            client.post(f"/api/contexts/{empty}/restore", files={"file": ("p.zip", linked)}),
            400,
            "invalid_pack",
        )
        assert client.get("/api/tasks", params={"context": empty, "workflow": "restore"}).json()["total"] == 0
        assert client.get(f"/api/contexts/{empty}/source/manifest").json()["total"] == 0
    finally:
        client.delete(f"/api/contexts/{empty}")
    missing = unique_slug()
    error(client.post(f"/api/contexts/{missing}/pack"), 404, "context_not_found")
    error(
        client.post(f"/api/contexts/{missing}/restore", files={"file": ("p.zip", b"x")}),
        404,
        "context_not_found",
    )
    error(client.post(f"/api/contexts/{context}/pack", json={"include_trace": True}), 400, "invalid_request")


def test_curate_preview_says_what_each_type_is_built_by_and_which_sources_changed(
    client: httpx.Client, context: str
) -> None:
    manifest = {
        "curate": {
            "artifacts": {
                "artifact_types": [
                    {"name": "Document", "kind": "doc"},
                    {
                        "name": "Attendance",
                        "kind": "event",
                        "format": "sqlite",
                        "columns": [{"name": "Person", "type": "TEXT"}],
                    },
                    {"name": "Gist", "kind": "summary"},
                ]
            }
        }
    }
    assert client.put(f"/api/contexts/{context}", json={"manifest": manifest}).status_code == 200
    assert upload(client, context, "a.md", b"# A\n\nAlpha.\n").status_code == 200
    answer = client.post(f"/api/contexts/{context}/curate/profile", json={}).json()
    assert answer["model"] is None  # the test server has no curation model: nothing is spent
    plan = answer["preview"]
    assert {t["type"]: t["built_by"] for t in plan["types"]} == {
        "Document": "sleuth",
        "Attendance": "sleuth",  # rows from tables; rows in prose would need the model
        "Gist": "skipped",
    }
    assert plan["sources"] == {
        "total": 1,
        "new": ["uploads/a.md"],
        "changed": [],
        "removed": [],
        "unchanged": 0,
    }
    task = wait_task(client, client.post(f"/api/contexts/{context}/curate", json={}).json()["task_id"])
    assert task["state"] == "completed", task
    assert upload(client, context, "b.md", b"# B\n\nBeta.\n").status_code == 200
    client.delete(f"/api/contexts/{context}/source/delete/uploads/a.md")
    sources = client.post(f"/api/contexts/{context}/curate/profile", json={}).json()["preview"]["sources"]
    assert sources == {
        "total": 1,
        "new": ["uploads/b.md"],
        "changed": [],
        "removed": ["uploads/a.md"],
        "unchanged": 0,
    }
