"""`sleuth connectors` for a new user (issue 39, item B): a failing connector does not stop the others,
each one's outcome is said, progress goes to stderr, `--json` for scripts, a folder that is not there
is refused when it is added, and the help names every kind."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from typer.testing import CliRunner

from sleuth.cli import app
from sleuth.compile.connectors import registry
from sleuth.store.contexts.home import Home


def _folder(root: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text, encoding="utf-8")
    return root


def test_one_failing_connector_leaves_the_others_to_sync(home: Home, tmp_path: Path) -> None:
    ctx, _ = home.find_or_create("kb")
    gone = _folder(tmp_path / "gone", {"old.md": "# Old\n\nGone soon.\n"})
    share = _folder(tmp_path / "share", {"leave.md": "# Leave\n\nLeave is 20 weeks.\n", "pay.md": "# Pay\n"})
    runner = CliRunner()
    for name, folder in (("a-gone", gone), ("b-share", share)):
        added = runner.invoke(
            app, ["connectors", "add", "kb", name, "--kind", "folder", "--path", str(folder)]
        )
        assert added.exit_code == 0, added.output
    shutil.rmtree(gone)  # unmounted after it was added: its sync fails

    synced = runner.invoke(app, ["connectors", "sync", "kb", "--no-curate"])
    assert synced.exit_code == 1, synced.output
    # every connector is synced and its outcome said; the one after the failure is not left stale
    assert "a-gone: failed" in synced.stdout and "is not a folder" in synced.stdout
    assert "b-share: 2 added, 0 changed, 0 deleted, 0 unchanged" in synced.stdout
    assert (ctx.sources / "b-share" / "leave.md").is_file()
    # progress, a line per connector as it starts and as it ends, on stderr
    assert "[1/2] a-gone (folder): syncing" in synced.stderr and "[1/2] a-gone: failed" in synced.stderr
    assert "[2/2] b-share (folder): syncing" in synced.stderr and "[2/2] b-share: synced" in synced.stderr
    assert "1 of 2 connectors failed to sync (a-gone); the other 1 synced" in synced.stderr
    entries = registry.load(ctx)
    assert entries["a-gone"].last_error and entries["b-share"].last_error is None
    assert entries["b-share"].last_sync is not None and entries["b-share"].last_attempt_at

    (share / "pay.md").write_text("# Pay\n\nSalaries are paid on the 25th.\n", encoding="utf-8")
    as_json = runner.invoke(app, ["connectors", "sync", "kb", "--no-curate", "--json"])
    assert as_json.exit_code == 1, as_json.output
    data = json.loads(as_json.stdout)
    assert data["context"] == "kb" and data["curated"] is None
    [failed, ok] = data["connectors"]
    assert (failed["name"], failed["ok"], failed["report"]) == ("a-gone", False, None)
    assert "is not a folder" in failed["error"]
    assert (ok["name"], ok["ok"], ok["error"]) == ("b-share", True, None)
    assert ok["report"]["changed"] == ["pay.md"] and ok["report"]["unchanged"] == 1

    listed = runner.invoke(app, ["connectors", "list", "kb", "--json"])
    assert listed.exit_code == 0, listed.output
    rows = {row["name"]: row for row in json.loads(listed.stdout)}
    assert rows["a-gone"]["kind"] == "folder" and "is not a folder" in rows["a-gone"]["last_error"]
    assert rows["b-share"]["last_sync"]["changed"] == ["pay.md"] and "secret" not in rows["b-share"]

    (tmp_path / "gone").mkdir()  # mounted again: every connector syncs, exit 0
    again = runner.invoke(app, ["connectors", "sync", "kb", "--no-curate"])
    assert again.exit_code == 0, again.output
    assert "a-gone: 0 added, 0 changed, 0 deleted, 0 unchanged" in again.stdout


def test_a_folder_that_is_not_there_is_refused_when_added(home: Home, tmp_path: Path) -> None:
    ctx, _ = home.find_or_create("kb")
    runner = CliRunner()
    missing = runner.invoke(
        app, ["connectors", "add", "kb", "share", "--kind", "folder", "--path", str(tmp_path / "nonexistent")]
    )
    assert missing.exit_code == 2, missing.output
    assert f"there is no folder {tmp_path / 'nonexistent'}" in missing.stderr
    (tmp_path / "file.txt").write_text("not a folder")
    a_file = runner.invoke(
        app, ["connectors", "add", "kb", "share", "--kind", "folder", "--path", str(tmp_path / "file.txt")]
    )
    assert a_file.exit_code == 2 and "is not a folder" in a_file.stderr
    assert registry.load(ctx) == {}  # nothing was added


def test_the_help_names_every_kind() -> None:
    shown = CliRunner().invoke(app, ["connectors", "--help"])
    assert shown.exit_code == 0
    text = " ".join(shown.output.split())
    assert all(f"{kind} (" in text for kind in ("git", "folder", "s3", "web")), text
    listing = CliRunner().invoke(app, ["--help"])
    assert "Sources that stay in sync: git, folder, s3, web." in listing.output
    add = CliRunner().invoke(app, ["connectors", "add", "--help"])
    assert "folder, git, s3, web" in " ".join(add.output.split())
