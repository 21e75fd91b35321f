"""Each connector kind is declared once (issue 41, item 6: its fields were written in four places): the
same declaration checks a configuration, describes the kind to the console and names the CLI's flags."""

from __future__ import annotations

from pathlib import Path

from typer.testing import CliRunner

from sleuth.cli import app
from sleuth.compile.connectors.configs import KIND_SPECS
from tests.api.support import ServerFactory, unique_slug


def test_the_kinds_are_described_from_their_declaration_and_a_typo_is_refused(
    make_server: ServerFactory, tmp_path: Path
) -> None:
    client = make_server(connector_folders=str(tmp_path)).client
    kinds = {k["kind"]: k for k in client.get("/api/connectors").json()["kinds"]}
    assert set(kinds) == set(KIND_SPECS) == {"folder", "git", "s3", "web"}
    assert kinds["web"]["types"] == {
        "include": "list", "urls": "list", "sitemap": "text", "prefix": "text", "max_pages": "number",
        "delay_s": "number",
    }  # fmt: skip
    assert set(kinds["s3"]["secret"]) == {"access_key_id", "secret_access_key", "session_token"}
    slug = unique_slug()
    client.post("/api/contexts", json={"slug": slug, "name": "Kinds"}).raise_for_status()
    try:
        typo = client.post(
            f"/api/contexts/{slug}/connectors",
            json={"name": "share", "kind": "folder", "config": {"path": str(tmp_path), "inclde": ["*.md"]}},
        )
        assert typo.status_code == 400 and typo.json()["field"] == "config", typo.text
        assert "inclde: a folder connector has no such field" in typo.json()["message"]
        slow = client.post(
            f"/api/contexts/{slug}/connectors",
            json={
                "name": "site",
                "kind": "web",
                "config": {"urls": ["https://example.org/"], "delay_s": 600},
            },
        )
        assert slow.status_code == 400 and "delay_s" in slow.json()["message"], slow.text
    finally:
        client.delete(f"/api/contexts/{slug}")


def test_the_cli_refuses_a_flag_the_kind_does_not_have(tmp_path: Path) -> None:
    """Said before the home is opened: a flag a kind has no field for is a usage error (exit 2)."""
    result = CliRunner().invoke(
        app,
        ["connectors", "add", "acme", "share", "--kind", "folder", "--path", str(tmp_path), "--bucket", "b"],
    )
    assert result.exit_code == 2 and "--bucket is not an option of a folder connector" in result.output
