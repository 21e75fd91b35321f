"""Untrusted archives and upload names over real HTTP (spec/api.md §6.2, §12): an archive is bounded by what
it expands to (bytes, members, name length and depth), its import is all or nothing, its report is a
bounded summary, over-large text is skipped by curate, and deep or long upload names are
`400 unsafe_path`. Limits are lowered through `$SLEUTH_<NAME>` so the archives stay small."""

from __future__ import annotations

import io
import json
import tarfile
import zipfile

import httpx
import pytest

from tests.api.support import error, make_zip, upload, wait_task


def make_tar(members: dict[str, bytes]) -> bytes:
    """A PAX tar.gz: a name over 100 bytes travels in an extended header."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz", format=tarfile.PAX_FORMAT) as archive:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            archive.addfile(info, io.BytesIO(data))
    return buffer.getvalue()


def deflated_zip(members: dict[str, bytes]) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, data in members.items():
            archive.writestr(name, data)
    return buffer.getvalue()


def source_paths(client: httpx.Client, slug: str) -> list[str]:
    return sorted(f["path"] for f in client.get(f"/api/contexts/{slug}/source/manifest").json()["files"])


def test_long_member_names_are_refused_before_anything_is_stored(client: httpx.Client, context: str) -> None:
    # Every component is short, but the whole name is over 1,024 bytes: skipped, its name cut.
    long_name = "/".join(["d" * 200] * 10) + ".md"
    staged = upload(client, context, "names.tar.gz", make_tar({"ok.md": b"# ok\n", long_name: b"x"}))
    task = wait_task(client, staged.json()["task_id"])
    assert task["state"] == "completed", task["error"]
    rows = {r["action"]: r for r in task["output"]["files"]}
    assert rows["extracted"]["path"] == "uploads/names/ok.md"
    refused = rows["skipped"]
    assert "over 1024 bytes" in refused["reason"] and refused["path"] is None
    assert len(refused["member"]) < 300 and len(refused["reason"]) < 300
    assert task["output"]["counts"] == {"extracted": 1, "skipped": 1, "failed": 0}
    assert source_paths(client, context) == ["uploads/names/ok.md"]

    # A name far over the limits (a 100 KB PAX header) refuses the whole archive: the member read
    # before it is not written either, and the error stays short.
    huge_name = "/".join(["e" * 200] * 500)
    staged = upload(client, context, "huge.tar.gz", make_tar({"first.md": b"# first\n", huge_name: b"x"}))
    failed = wait_task(client, staged.json()["task_id"])
    assert failed["state"] == "failed" and "member header" in failed["error"], failed["error"]
    assert "nothing was imported" in failed["error"] and len(failed["error"]) < 500
    assert source_paths(client, context) == ["uploads/names/ok.md"]
    assert len(client.get("/api/tasks", params={"limit": 1000}).content) < 20_000


def test_deep_members_are_skipped_not_fatal(client: httpx.Client, context: str) -> None:
    deep = "ab/" * 1000 + "x.md"
    staged = upload(
        client,
        context,
        "deep.zip",
        make_zip({"first.md": b"1", deep: b"2", "last.md": b"3", "ab/" * 33 + "y.md": b"4"}),
    )
    task = wait_task(client, staged.json()["task_id"])
    assert task["state"] == "completed", task["error"]
    actions = [(r["action"], r["reason"] or "") for r in task["output"]["files"]]
    assert [a for a, _ in actions] == ["extracted", "skipped", "extracted", "skipped"]
    assert all("over" in reason or "deeper than" in reason for a, reason in actions if a == "skipped")
    assert source_paths(client, context) == ["uploads/deep/first.md", "uploads/deep/last.md"]


def test_archive_bombs_fail_whole_and_leave_nothing(
    client: httpx.Client, context: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SLEUTH_MAX_EXPANDED_BYTES", "100000")
    bomb = deflated_zip({"a.md": b"# a\n", "zeros.txt": b"\0" * 200_000, "z.md": b"# z\n"})
    assert len(bomb) < 2_000
    staged = upload(client, context, "bomb.zip", bomb)
    failed = wait_task(client, staged.json()["task_id"])
    assert failed["state"] == "failed" and "expands beyond 100000 bytes" in failed["error"], failed["error"]
    assert source_paths(client, context) == []  # a.md was read first, and is not written

    # The per-file limit is checked on the bytes read; an over-limit member is skipped, not fatal.
    monkeypatch.setenv("SLEUTH_MAX_EXPANDED_BYTES", "1000000")
    monkeypatch.setenv("SLEUTH_MAX_FILE_BYTES", "1000")
    staged = upload(client, context, "mixed.zip", make_zip({"a.md": b"# a\n", "big.txt": b"\0" * 5000}))
    task = wait_task(client, staged.json()["task_id"])
    assert [(r["member"], r["action"]) for r in task["output"]["files"]] == [
        ("a.md", "extracted"),
        ("big.txt", "skipped"),
    ]
    assert "file_too_large" in task["output"]["files"][1]["reason"]

    monkeypatch.setenv("SLEUTH_MAX_ARCHIVE_MEMBERS", "3")
    many = make_zip({f"m{i}.md": b"m" for i in range(5)})
    failed = wait_task(client, upload(client, context, "many.zip", many).json()["task_id"])
    assert failed["state"] == "failed" and "members" in failed["error"], failed["error"]
    assert source_paths(client, context) == ["uploads/mixed/a.md"]


def test_import_report_is_capped_and_tasks_list_is_bounded(client: httpx.Client, context: str) -> None:
    links = tuple(f"link-{i:04d}-" + "n" * 200 for i in range(1005))
    staged = upload(client, context, "links.zip", make_zip({"real.md": b"# real\n"}, links=links))
    task = wait_task(client, staged.json()["task_id"])
    output = task["output"]
    assert output["counts"] == {"extracted": 1, "skipped": 1005, "failed": 0}
    assert output["truncated"] is True and len(output["files"]) <= 1000
    assert len(json.dumps(task)) <= 300 * 1024  # the stored output is capped
    listed = client.get("/api/tasks", params={"limit": 1000})
    item = next(t for t in listed.json()["items"] if t["id"] == task["id"])
    assert item["output"]["truncated"] is True and len(json.dumps(item["output"])) <= 16 * 1024
    assert item["output"]["counts"] == output["counts"]


def test_curate_skips_text_over_the_limit(
    client: httpx.Client, context: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SLEUTH_MAX_TEXT_BYTES", "1000")
    upload(client, context, "small.md", b"# Small\n\nA short note about laptops.\n")
    upload(client, context, "zeros.txt", b"\0" * 5000)
    started = client.post(f"/api/contexts/{context}/curate", json={})
    assert started.status_code == 200, started.text
    task = wait_task(client, started.json()["task_id"], timeout=120)
    assert task["state"] == "completed", task["error"]
    output = task["output"]
    assert output["delta"]["processed"] == 1
    skipped = output["failures"]["uploads/zeros.txt"]
    assert skipped["status"] == "skipped" and skipped["reason"].startswith("too large")


def test_deep_or_long_upload_names_are_unsafe_path(client: httpx.Client, context: str) -> None:
    for name in ("ab/" * 1000 + "x.md", "/".join(["c" * 200] * 6) + ".md", "d/" * 40 + "x.md"):
        body = error(upload(client, context, name, b"x"), 400, "unsafe_path")
        assert len(body["message"]) < 300
    assert source_paths(client, context) == []
