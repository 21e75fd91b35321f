"""A source that changes shape between syncs (issue 40, item 11): a file becomes a folder of the same
name, and a folder becomes a file. The sync follows, instead of failing on the write."""

from __future__ import annotations

from pathlib import Path

from sleuth.compile.connectors.base import Limits
from sleuth.compile.connectors.folder import FolderConnector
from sleuth.compile.connectors.sync import sync
from sleuth.store.contexts.home import ContextDir

LIMITS = Limits(max_items=100, max_file_bytes=1024 * 1024, max_total_bytes=10 * 1024 * 1024, timeout_s=60)


def test_a_file_that_becomes_a_folder_and_back(tmp_path: Path) -> None:
    source, ctx = tmp_path / "share", ContextDir(tmp_path / "ctx")
    source.mkdir()
    (source / "guide").write_text("# Guide\n\nOne page.\n")
    connector = FolderConnector(source)
    assert sync(ctx, "share", connector, LIMITS).added == ["guide"]

    (source / "guide").unlink()
    (source / "guide").mkdir()
    (source / "guide" / "intro.md").write_text("# Intro\n\nNow a chapter.\n")
    report = sync(ctx, "share", connector, LIMITS)
    assert report.added == ["guide/intro.md"] and report.deleted == ["guide"]
    assert (ctx.sources / "share" / "guide" / "intro.md").read_text().startswith("# Intro")

    (source / "guide" / "intro.md").unlink()
    (source / "guide").rmdir()
    (source / "guide").write_text("# Guide\n\nOne page again.\n")
    report = sync(ctx, "share", connector, LIMITS)
    assert report.added == ["guide"] and report.deleted == ["guide/intro.md"]
    assert (ctx.sources / "share" / "guide").read_text().endswith("again.\n")
