"""The application shell: health, version header rules, the error envelope, unknown routes."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

from tests.api.support import ServerFactory


def test_health_openapi_and_version_header(make_server: ServerFactory) -> None:
    server = make_server()
    assert server.client.get("/healthz").text == "ok"
    schema = server.client.get("/api/openapi.json")
    assert schema.status_code == 200 and schema.json()["openapi"].startswith("3.")
    assert schema.headers["X-Pinecone-Api-Version"] == "2026-07"
    unstable = server.client.get("/healthz", headers={"X-Pinecone-Api-Version": "unstable"})
    assert unstable.headers["X-Pinecone-Api-Version"] == "unstable"


def test_unknown_version_and_route_use_the_envelope(make_server: ServerFactory) -> None:
    server = make_server()
    bad = server.client.get("/api/openapi.json", headers={"X-Pinecone-Api-Version": "2024-01"})
    assert bad.status_code == 400 and bad.json()["code"] == "unsupported_api_version"
    assert "X-Pinecone-Api-Version" not in bad.headers
    assert "2026-07" in bad.json()["message"]
    missing = server.client.get("/api/no/such/route")
    assert missing.status_code == 404 and missing.json() == {"message": "Not Found", "code": "not_found"}


def test_oversized_json_body_is_413(make_server: ServerFactory) -> None:
    server = make_server()
    response = server.client.post(
        "/api/query", content=b"{" + b" " * (1 << 20) + b"}", headers={"content-type": "application/json"}
    )
    assert response.status_code == 413 and response.json()["code"] == "payload_too_large"


def test_body_limit_is_counted_while_streaming_whatever_the_content_type(make_server: ServerFactory) -> None:
    """No Content-Length (a chunked body) or a multipart content type on a JSON route: still 413 once
    1 MiB has arrived, never read to the end and parsed. The upload route keeps its own limit."""
    server = make_server()

    def chunks(total: int = 3 << 20) -> Iterator[bytes]:
        yield b'{"ask": "'
        for _ in range(total >> 16):
            yield b"a" * (1 << 16)

    for content_type in ("application/json", "multipart/form-data; boundary=x", "text/plain"):
        response = server.client.post("/api/query", content=chunks(), headers={"content-type": content_type})
        assert response.status_code == 413, (content_type, response.text)
        assert response.json()["code"] == "payload_too_large"
        assert response.headers["X-Pinecone-Api-Version"] == "2026-07"
    declared = server.client.post(
        "/api/query", content=b"-" * (2 << 20), headers={"content-type": "multipart/form-data; boundary=x"}
    )
    assert declared.status_code == 413 and declared.json()["code"] == "payload_too_large"

    # A body under the limit is read as before; a multipart upload over 1 MiB is the upload's to judge.
    small = server.client.post(
        "/api/query", content=chunks(1 << 16), headers={"content-type": "application/json"}
    )
    assert small.status_code == 400 and small.json()["code"] == "invalid_request"
    slug = f"t-{uuid.uuid4().hex[:12]}"
    server.client.post("/api/contexts", json={"slug": slug, "name": "uploads"})
    try:
        big = server.client.post(
            f"/api/contexts/{slug}/import/upload", files={"file": ("big.txt", b"b" * (2 << 20))}
        )
        assert big.status_code == 200 and big.json()["files"][0]["size"] == 2 << 20, big.text
    finally:
        server.client.delete(f"/api/contexts/{slug}")
