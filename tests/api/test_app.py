"""The application shell: health, version header rules, the error envelope, unknown routes."""

from __future__ import annotations

from .conftest import ServerFactory


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
