"""One sync of one connector into a context's sources (issue 27, item 2).

The items land in `sources/<connector>/…`; `connectors/<connector>.state.json` keeps what the last sync
listed (id → version, origin). A sync fetches only the items that are new or whose version changed,
deletes the files of items no longer listed, and leaves the rest untouched, so the curate after it
re-parses and re-embeds only what changed (the ledger compares content). Every file is written aside
and renamed into place, so a crash mid-sync leaves each file whole, and the state is saved after the
files, so the next sync redoes whatever this one did not finish.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from sleuth.compile.connectors.base import Budget, Budgeted, Connector, ConnectorError, Limits
from sleuth.compile.sources import UnsafePath, safe_source_path, shown
from sleuth.store.contexts.home import ContextDir, now_iso
from sleuth.store.files import prune_empty_dirs, write_json_atomic


@dataclass
class SyncReport:
    connector: str
    added: list[str] = field(default_factory=list)
    changed: list[str] = field(default_factory=list)
    deleted: list[str] = field(default_factory=list)
    unchanged: int = 0
    skipped: list[tuple[str, str]] = field(default_factory=list)  # (item, why)
    fetched_bytes: int = 0
    commit: str | None = None  # a git connector's commit
    finished_at: str = ""

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        data["skipped"] = [{"item": i, "reason": r} for i, r in self.skipped]
        return data

    @property
    def summary(self) -> str:
        return (
            f"{len(self.added)} added, {len(self.changed)} changed, {len(self.deleted)} deleted, "
            f"{self.unchanged} unchanged" + (f", {len(self.skipped)} skipped" if self.skipped else "")
        )


def state_file(ctx: ContextDir, name: str) -> Path:
    return ctx.root / "connectors" / f"{name}.state.json"


def _load_state(ctx: ContextDir, name: str) -> dict[str, dict[str, str]]:
    try:
        data: dict[str, dict[str, str]] = json.loads(state_file(ctx, name).read_text(encoding="utf-8"))[
            "items"
        ]
    except (FileNotFoundError, KeyError, ValueError):
        return {}
    return data


def _write(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.partial")
    tmp.write_bytes(data)
    os.replace(tmp, path)


def _make_room(folder: Path, key: str, before: dict[str, Any], after: dict[str, Any]) -> None:
    """Where an item now needs a folder, a file listed last time (`guide` → `guide/intro.md`), or where
    it needs a file, a folder of items listed last time (the reverse): those items are gone, so they
    are removed before the write instead of failing it (the rest are removed after the listing)."""
    parts = key.split("/")
    for depth in range(1, len(parts)):
        above = "/".join(parts[:depth])
        if above in before and above not in after and (folder / above).is_file():
            (folder / above).unlink()
            return
    target = folder / key
    if target.is_dir() and not target.is_symlink():
        for gone in [k for k in before if k.startswith(key + "/") and k not in after]:
            (folder / gone).unlink(missing_ok=True)
            prune_empty_dirs((folder / gone).parent, folder)


def sync(
    ctx: ContextDir,
    name: str,
    connector: Connector,
    limits: Limits,
    stop: Callable[[], None] | None = None,
) -> SyncReport:
    """Bring `sources/<name>/` to what `connector` lists now; `ConnectorError` when it cannot. `stop`
    raises when the sync should end now (its task was cancelled): checked between items and, by a
    connector that downloads or waits, between chunks and during waits."""
    budget = Budget.of(limits, stop)
    if isinstance(connector, Budgeted):
        connector.budget = budget
    folder = ctx.sources / name
    before = _load_state(ctx, name)
    after: dict[str, dict[str, str]] = {}
    report = SyncReport(name)
    for count, item in enumerate(connector.items(), 1):
        if count > limits.max_items:
            raise ConnectorError(f"{name}: over {limits.max_items} items (SLEUTH_CONNECTOR_MAX_ITEMS)")
        budget.check()
        try:
            rel = safe_source_path(item.id)
        except UnsafePath as exc:
            report.skipped.append((shown(item.id), str(exc)))
            continue
        key = rel.as_posix()
        if key in after:  # `a//b.md` and `a/b.md` are one path: the first listed keeps it
            report.skipped.append((shown(item.id), f"lands on {key!r} as another item does"))
            continue
        target = folder.joinpath(*rel.parts)
        known = before.get(key)
        if known is not None and known.get("version") == item.version and target.is_file():
            after[key] = known
            report.unchanged += 1
            continue
        room = min(limits.max_file_bytes, limits.max_total_bytes - report.fetched_bytes)
        if item.size is not None and item.size > limits.max_file_bytes:
            report.skipped.append(
                (key, f"{item.size} bytes, over the {limits.max_file_bytes}-byte file limit")
            )
            continue
        if room <= 0 or (item.size is not None and item.size > room):
            raise ConnectorError(
                f"{name}: over {limits.max_total_bytes} bytes fetched (SLEUTH_CONNECTOR_MAX_BYTES)"
            )
        data = connector.fetch(item, room)
        report.fetched_bytes += len(data)
        _make_room(folder, key, before, after)
        _write(target, data)
        (report.changed if known is not None else report.added).append(key)
        after[key] = {"version": item.version, "origin": item.origin}
    for key in sorted(set(before) - set(after)):
        gone = folder / key
        if gone.is_file():
            gone.unlink()
            prune_empty_dirs(gone.parent, ctx.sources)
        report.deleted.append(key)
    report.commit = getattr(connector, "commit", None) or None
    report.finished_at = now_iso()
    write_json_atomic(
        state_file(ctx, name), {"items": after, "commit": report.commit, "synced_at": report.finished_at}
    )
    return report
