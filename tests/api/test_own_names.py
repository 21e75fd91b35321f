"""Without keys, the default server answers to its own names only (issue 40, item 7): a DNS-rebinding
page reaches 127.0.0.1 under a name it controls, and that name is in its requests' `Host`."""

from __future__ import annotations

from fastapi.testclient import TestClient

from sleuth.api.app import create_app
from sleuth.api.server import host_name, own_names_only
from sleuth.server.build import open_server
from sleuth.store.contexts.home import Home


def test_a_foreign_host_name_is_refused_without_keys(home: Home) -> None:
    state = open_server(home)
    try:
        app = create_app(state)
        own_names_only(app, "127.0.0.1")
        client = TestClient(app)
        for host in ("127.0.0.1:8088", "localhost:8088", "[::1]:8088", "LOCALHOST", "app.localhost:8088"):
            assert client.get("/api/contexts", headers={"host": host}).status_code == 200, host
        for host in ("rebind.attacker.example", "rebind.attacker.example:8088", "127.0.0.1.nip.io", ""):
            refused = client.post(
                "/api/contexts", json={"slug": "pwned", "name": "x"}, headers={"host": host}
            )
            assert refused.status_code == 400 and refused.json()["code"] == "invalid_host", host
        assert home.contexts() == []  # nothing was created
    finally:
        state.close()


def test_host_names() -> None:
    assert host_name("[::1]:8088") == "::1" and host_name("localhost:80") == "localhost"
    assert host_name("Example.COM") == "example.com" and host_name("::1") == "::1"
