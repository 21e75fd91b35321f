"""Raw reads of stored files are safe to open in a browser (issue 22, item 8: an uploaded HTML page ran
its script on the console's origin and read `/api/contexts`). Every raw read is sandboxed by its CSP
and never type-sniffed; markup and script come back as plain text, unknown formats as attachments, and
only inert types keep their own."""

from __future__ import annotations

import httpx

from tests.api.support import make_zip, upload, wait_task

PAGE = b"<html><body><script>fetch('/api/contexts').then(r => r.text()).then(alert)</script></body></html>"
SVG = (
    b'<svg xmlns="http://www.w3.org/2000/svg" onload="fetch(\'/api/contexts\')">'
    b"<script>alert(1)</script></svg>"
)
ACTIVE = {
    "x.html": PAGE,
    "x.htm": PAGE,
    "x.xhtml": PAGE,
    "x.svg": SVG,
    "x.xml": b"<?xml version='1.0'?><a/>",
    "x.js": b"fetch('/api/contexts')",
    "x.css": b"body { background: url(/api/contexts) }",
}
INERT = {
    "notes.md": ("text/markdown", b"# Notes\n"),
    "plain.txt": ("text/plain", b"plain"),
    "table.csv": ("text/csv", b"a,b\n1,2\n"),
    "data.json": ("application/json", b"{}"),
    "scan.png": ("image/png", b"\x89PNG\r\n\x1a\n"),
    "scan.jpg": ("image/jpeg", b"\xff\xd8\xff"),
    "paper.pdf": ("application/pdf", b"%PDF-1.4\n"),
}
OTHER = {"sheet.xlsx": b"PK\x03\x04", "blob.bin": b"\x00\x01", "noext": b"<script>alert(1)</script>"}


def _sandboxed(response: httpx.Response) -> None:
    assert response.status_code == 200, response.text
    assert response.headers["content-security-policy"] == "sandbox; default-src 'none'"
    assert response.headers["x-content-type-options"] == "nosniff"


def test_source_reads_of_active_content_are_sandboxed_text(client: httpx.Client, context: str) -> None:
    # In an archive, as a folder, a git or web connector would bring them: a plain upload of a kind Sleuth
    # cannot read is refused (415), an archive's members are stored as they are.
    members = {**ACTIVE, **{n: d for n, (_t, d) in INERT.items()}, **OTHER}
    imported = upload(client, context, "raw.zip", make_zip(members))
    assert imported.status_code == 200, imported.text
    assert wait_task(client, imported.json()["task_id"])["state"] == "completed"
    for name, data in ACTIVE.items():
        read = client.get(f"/api/contexts/{context}/source/read/uploads/raw/{name}")
        _sandboxed(read)
        assert read.headers["content-type"] == "text/plain; charset=utf-8", name
        assert read.content == data  # the bytes are unchanged: only how a browser takes them
    for name, (kind, data) in INERT.items():
        read = client.get(f"/api/contexts/{context}/source/read/uploads/raw/{name}")
        _sandboxed(read)
        assert read.headers["content-type"].split(";")[0] == kind, name
        assert "content-disposition" not in read.headers and read.content == data
    for name, data in OTHER.items():
        read = client.get(f"/api/contexts/{context}/source/read/uploads/raw/{name}")
        _sandboxed(read)
        assert read.headers["content-disposition"] == f'attachment; filename="{name}"', name
        assert not read.headers["content-type"].startswith("text/") and read.content == data


def test_knowledge_and_task_file_reads_are_sandboxed_too(client: httpx.Client, context: str) -> None:
    outline = client.get("/api/contexts/acme/knowledge/read/outline.json")
    _sandboxed(outline)
    assert outline.headers["content-type"] == "application/json"
    assert upload(client, context, "page.html", PAGE).status_code == 200
    started = client.post(f"/api/contexts/{context}/pack", json={})
    assert started.status_code == 200, started.text
    task = wait_task(client, started.json()["task_id"])
    assert task["state"] == "completed", task
    name = task["output"]["pack_filename"]
    pack = client.get(f"/api/tasks/{task['id']}/files/read/{name}")
    _sandboxed(pack)
    assert pack.headers["content-disposition"] == f'attachment; filename="{name}"'
    assert pack.content.startswith(b"PK")
