"""API keys over real HTTP (spec/api.md §3): the three headers and their order, 401 and 403, roles, the login
exchange, revocation, and no-auth mode."""

from __future__ import annotations

import time

import httpx
import pytest
from fastapi import APIRouter

from sleuth.api import app as app_module
from sleuth.api.auth import AdminKey, AnyKey
from sleuth.store.records.keys import KeyStore
from tests.api.support import LiveServer, ServerFactory

probe = APIRouter()


@probe.post("/test-only/admin")
def admin_only(who: AdminKey) -> dict[str, str]:
    return {"name": who.name, "role": who.role}


@probe.get("/test-only/any")
def any_key(who: AnyKey) -> dict[str, str]:
    return {"name": who.name, "role": who.role}


@pytest.fixture
def secured(make_server: ServerFactory, monkeypatch: pytest.MonkeyPatch) -> LiveServer:
    """A server with keys required, plus two test-only routes (one admin, one any key)."""
    monkeypatch.setattr(app_module, "ROUTERS", (*app_module.ROUTERS, probe))
    return make_server(auth=True, project_id="prj_acme", project_name="Acme")


def keys(server: LiveServer) -> KeyStore:
    return KeyStore.for_db(server.state.db)


def assert_401(response: httpx.Response) -> None:
    assert response.status_code == 401, response.text
    assert response.json()["code"] == "unauthenticated" and response.json()["message"]
    assert response.headers["WWW-Authenticate"] == "Bearer"
    assert response.headers["X-Pinecone-Api-Version"] == "2026-07"


def test_each_header_form_authenticates(secured: LiveServer) -> None:
    _, secret = keys(secured).create("agent", "query")
    for headers in (
        {"Authorization": f"Bearer {secret}"},
        {"Authorization": f"bearer  {secret}"},
        {"X-Pinecone-Api-Key": secret},
        {"Api-Key": secret},
    ):
        response = secured.client.get("/api/auth", headers=headers)
        assert response.status_code == 200, (headers, response.text)
        assert response.json() == {
            "user": "agent",
            "project_id": "prj_acme",
            "project_name": "Acme",
            "workspace_name": None,
            "org_id": None,
        }
    legacy = secured.client.get("/api/v0/project", headers={"Api-Key": secret})
    assert legacy.json() == {"id": "prj_acme", "name": "Acme", "workspaces_required": False}


def test_missing_or_invalid_credentials_are_401(secured: LiveServer) -> None:
    _, secret = keys(secured).create("agent", "query")
    assert_401(secured.client.get("/api/auth"))
    assert_401(secured.client.get("/api/project"))
    assert_401(secured.client.get("/api/auth", headers={"Authorization": "Bearer slk_" + "x" * 40}))
    assert_401(secured.client.get("/api/auth", headers={"Authorization": f"Basic {secret}"}))
    assert_401(secured.client.get("/api/auth", headers={"Authorization": "Bearer"}))
    assert_401(secured.client.get("/api/auth", headers={"X-Pinecone-Api-Key": ""}))
    assert_401(secured.client.get("/api/auth", headers={"Api-Key": secret[:-1]}))


def test_the_first_header_present_decides(secured: LiveServer) -> None:
    _, secret = keys(secured).create("agent", "query")
    bad = "slk_" + "0" * 40
    assert_401(
        secured.client.get(
            "/api/auth", headers={"Authorization": f"Bearer {bad}", "X-Pinecone-Api-Key": secret}
        )
    )
    assert_401(
        secured.client.get("/api/auth", headers={"Authorization": f"Token {secret}", "Api-Key": secret})
    )
    assert_401(secured.client.get("/api/auth", headers={"X-Pinecone-Api-Key": bad, "Api-Key": secret}))
    ok = secured.client.get("/api/auth", headers={"Authorization": f"Bearer {secret}", "Api-Key": bad})
    assert ok.status_code == 200


def test_roles(secured: LiveServer) -> None:
    _, query_key = keys(secured).create("agent", "query")
    _, admin_key = keys(secured).create("ops", "admin")
    refused = secured.client.post("/api/test-only/admin", headers={"Api-Key": query_key})
    assert refused.status_code == 403 and refused.json()["code"] == "forbidden"
    allowed = secured.client.post("/api/test-only/admin", headers={"Api-Key": admin_key})
    assert allowed.status_code == 200 and allowed.json() == {"name": "ops", "role": "admin"}
    either = secured.client.get("/api/test-only/any", headers={"Api-Key": query_key})
    assert either.json() == {"name": "agent", "role": "query"}
    assert_401(secured.client.post("/api/test-only/admin"))  # 401 comes before 403
    # Exploring with a model spends the operator's tokens, as a curate does; by the rules, any key may.
    explore = "/api/contexts/acme/explore"
    asked = secured.client.post(explore, json={"model": "any/model"}, headers={"Api-Key": query_key})
    assert asked.status_code == 403 and "spends tokens" in asked.json()["message"]
    assert secured.client.post(explore, headers={"Api-Key": query_key}).status_code == 200


def test_login_exchange(secured: LiveServer) -> None:
    _, secret = keys(secured).create("agent", "query")
    login = secured.client.post("/api/auth/login", json={"api_key": secret})
    assert login.status_code == 200, login.text
    body = login.json()
    assert body["token"].startswith("slt_") and len(body["token"]) == 44
    assert {k: body[k] for k in ("principal", "project_id", "project_name")} == {
        "principal": "agent",
        "project_id": "prj_acme",
        "project_name": "Acme",
    }
    token = body["token"]
    assert (
        secured.client.get("/api/auth", headers={"Authorization": f"Bearer {token}"}).json()["user"]
        == "agent"
    )
    # Tokens travel as bearer tokens only, and cannot be exchanged for more tokens.
    assert_401(secured.client.get("/api/auth", headers={"X-Pinecone-Api-Key": token}))
    assert_401(secured.client.post("/api/auth/login", json={"api_key": token}))
    # Without a body, the key presented in the headers is exchanged.
    from_header = secured.client.post("/api/auth/login", headers={"X-Pinecone-Api-Key": secret})
    assert from_header.status_code == 200 and from_header.json()["token"] != token
    assert_401(secured.client.post("/api/auth/login", json={"api_key": "slk_wrong"}))
    assert_401(secured.client.post("/api/auth/login"))
    typo = secured.client.post("/api/auth/login", json={"apikey": secret})
    assert typo.status_code == 400 and typo.json()["code"] == "invalid_request"


def test_logout_ends_that_token_only(secured: LiveServer) -> None:
    """Issue 26, item 8 (the console's Sign out): the token presented stops working at once; the key
    and the key's other tokens still work."""
    _, secret = keys(secured).create("agent", "query")
    first, second = (
        secured.client.post("/api/auth/login", json={"api_key": secret}).json()["token"] for _ in range(2)
    )
    bearer = {"Authorization": f"Bearer {first}"}
    assert secured.client.post("/api/auth/logout", headers=bearer).status_code == 204
    assert_401(secured.client.get("/api/auth", headers=bearer))
    assert_401(secured.client.post("/api/auth/logout", headers=bearer))
    assert secured.client.get("/api/auth", headers={"Authorization": f"Bearer {second}"}).status_code == 200
    assert secured.client.get("/api/auth", headers={"Api-Key": secret}).status_code == 200
    # Presenting the key itself ends nothing: a key is revoked with `sleuth keys revoke`.
    assert secured.client.post("/api/auth/logout", headers={"Api-Key": secret}).status_code == 204
    assert secured.client.get("/api/auth", headers={"Api-Key": secret}).status_code == 200


def test_revoked_keys_and_their_tokens_are_rejected(secured: LiveServer) -> None:
    store = keys(secured)
    key, secret = store.create("agent", "query")
    token = secured.client.post("/api/auth/login", json={"api_key": secret}).json()["token"]
    _, other = store.create("other", "query")
    store.revoke(key.id)
    assert_401(secured.client.get("/api/auth", headers={"Api-Key": secret}))
    assert_401(secured.client.get("/api/auth", headers={"Authorization": f"Bearer {token}"}))
    assert_401(secured.client.post("/api/auth/login", json={"api_key": secret}))
    assert secured.client.get("/api/auth", headers={"Api-Key": other}).status_code == 200


def test_expired_token_is_rejected(secured: LiveServer) -> None:
    store = keys(secured)
    _, secret = store.create("agent", "query")
    expired = store.login(secret, ttl_s=-1)
    assert expired is not None and expired.expires_at < time.time()
    assert_401(secured.client.get("/api/auth", headers={"Authorization": f"Bearer {expired.token}"}))
    live = store.login(secret)
    assert live is not None and live.expires_at > time.time() + 29 * 24 * 3600


def test_no_auth_mode_ignores_credentials(
    make_server: ServerFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(app_module, "ROUTERS", (*app_module.ROUTERS, probe))
    server = make_server()
    for headers in ({}, {"Authorization": "Bearer nonsense"}, {"Api-Key": "slk_nope"}):
        response = server.client.get("/api/auth", headers=headers)
        assert response.status_code == 200 and response.json()["user"] == "local"
        assert server.client.post("/api/test-only/admin", headers=headers).json() == {
            "name": "local",
            "role": "admin",
        }
    login = server.client.post("/api/auth/login", json={"api_key": "anything"})
    assert login.status_code == 200
    assert login.json()["token"].startswith("slt_") and login.json()["principal"] == "local"
    assert server.client.post("/api/auth/login").status_code == 200
    assert server.client.get("/api/project").json() == {
        "id": "local",
        "name": "local",
        "workspaces_required": False,
    }
