"""A folder that changes under the connector (issue 40, item 4): a directory swapped for a link between
listing and reading leads nowhere, links are never followed at any level, and Sleuth's home is never
read, even from a folder above it."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from sleuth.compile.connectors.base import ConnectorError
from sleuth.compile.connectors.folder import FolderConnector
from sleuth.compile.connectors.kinds import build
from sleuth.settings import current


def test_a_directory_swapped_for_a_link_mid_sync_leads_nowhere(tmp_path: Path) -> None:
    share, secret = tmp_path / "share", tmp_path / "secret"
    (share / "docs").mkdir(parents=True)
    (share / "docs" / "a.md").write_text("# A\n\nPublic.\n")
    secret.mkdir()
    (secret / "a.md").write_text("the server's secret key")
    connector = FolderConnector(share)
    [item] = list(connector.items())
    assert connector.fetch(item, 1000) == b"# A\n\nPublic.\n"
    (share / "docs").rename(share / "docs.old")
    (share / "docs").symlink_to(secret, target_is_directory=True)  # swapped between listing and reading
    with pytest.raises(ConnectorError, match="no longer a plain file"):
        connector.fetch(item, 1000)
    assert [i.id for i in connector.items()] == ["docs.old/a.md"]  # the link is not walked either


def test_links_to_files_fifos_and_the_home_are_never_read(tmp_path: Path) -> None:
    share = tmp_path / "share"
    home = share / "sleuth-home"
    (home / "contexts").mkdir(parents=True)
    (home / "secret.key").write_text("key")
    (share / "notes.md").write_text("notes")
    (share / "passwd.md").symlink_to("/etc/passwd")
    os.mkfifo(share / "pipe.md")
    connector = FolderConnector(share, home=home)
    assert [i.id for i in connector.items()] == ["notes.md"]
    settings = current().model_copy(update={"connector_folders": str(tmp_path)})
    with pytest.raises(ConnectorError, match="inside Sleuth's home"):
        build("folder", {"path": str(home / "contexts")}, {}, settings, tmp_path / "cache", home=home)
