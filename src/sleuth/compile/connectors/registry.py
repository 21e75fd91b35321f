"""A context's connectors (issue 27): `connectors.json` in the context, beside its manifest.

Each entry is a kind, its configuration, an optional schedule (`every`, seconds), its credentials
sealed by `store.secrets.SecretBox` (never returned: `public` says only whether there are some), and
what its last sync did or why it failed. The file travels with the context (packs, forks, shared
storage); the credentials stay unusable without the key.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import asdict, dataclass, field
from pathlib import PurePosixPath
from typing import Any

from sleuth.compile.connectors.base import ConnectorConfigError
from sleuth.compile.connectors.sync import state_file
from sleuth.compile.sources import UnsafePath, safe_join, safe_source_path
from sleuth.store.contexts.home import ContextDir, now_iso
from sleuth.store.files import prune_empty_dirs, write_json_atomic

NAME_RULE = re.compile(r"^[a-z0-9][a-z0-9-]{0,62}$")
MIN_EVERY_S = 60.0
MAX_EVERY_S = 366 * 86400.0  # a year: beyond it a schedule is a mistake (and `inf` is not a period)
MAX_CONNECTORS = 32


@dataclass
class ConnectorEntry:
    name: str
    kind: str
    config: dict[str, Any]
    every_s: float | None = None
    secret: str = ""  # sealed credentials
    created_at: str = field(default_factory=now_iso)
    last_sync: dict[str, Any] | None = None  # the last SyncReport's JSON
    last_error: str | None = None
    last_attempt_at: str | None = None

    def public(self) -> dict[str, Any]:
        data = asdict(self)
        data.pop("secret")
        data["has_secret"] = bool(self.secret)
        return data


def check_name(name: str) -> str:
    if not NAME_RULE.match(name):
        raise ConnectorConfigError(
            f"name {name!r}: lowercase letters, digits and hyphens, up to 63 "
            "(it is the folder its items land in)"
        )
    if name == "uploads":
        raise ConnectorConfigError("name 'uploads' is the uploads' folder: choose another")
    return name


def parse_every(value: str | float | int | None) -> float | None:
    """`"1h"`, `"30m"`, `"1d"`, or seconds; at least a minute."""
    if value is None or value == "":
        return None
    if isinstance(value, int | float):
        seconds = float(value)
    else:
        match = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([smhd]?)\s*", value)
        if not match:
            raise ConnectorConfigError(f"every {value!r}: a duration such as 30m, 1h or 1d")
        seconds = float(match.group(1)) * {"": 1, "s": 1, "m": 60, "h": 3600, "d": 86400}[match.group(2)]
    if not math.isfinite(seconds) or seconds < MIN_EVERY_S or seconds > MAX_EVERY_S:
        # NaN compares false with everything: it was stored, and due at every tick
        raise ConnectorConfigError(
            f"every: at least {MIN_EVERY_S:.0f} seconds, at most {MAX_EVERY_S / 86400:.0f} days"
        )
    return seconds


def _file(ctx: ContextDir) -> Any:
    return ctx.root / "connectors.json"


def load(ctx: ContextDir) -> dict[str, ConnectorEntry]:
    try:
        data = json.loads(_file(ctx).read_text(encoding="utf-8"))
    except FileNotFoundError:
        return {}
    entries = {name: ConnectorEntry(**entry) for name, entry in data.items()}
    for entry in entries.values():  # stored before `every` was checked: NaN was due at every tick
        if entry.every_s is not None and not (MIN_EVERY_S <= entry.every_s <= MAX_EVERY_S):
            entry.every_s = None
    return entries


def save(ctx: ContextDir, entries: dict[str, ConnectorEntry]) -> None:
    write_json_atomic(_file(ctx), {name: asdict(entry) for name, entry in sorted(entries.items())})


def record(
    ctx: ContextDir, name: str, attempt: str, report: dict[str, Any] | None, error: str | None
) -> None:
    """What a sync of `name` that began at `attempt` did (`report`) or why it failed (`error`); nothing
    when the connector was removed while it synced."""
    with ctx.editing():
        entries = load(ctx)
        entry = entries.get(name)
        if entry is None:
            return
        entry.last_attempt_at, entry.last_error = attempt, error
        if report is not None:
            entry.last_sync = report
        save(ctx, entries)


def remove(ctx: ContextDir, name: str) -> bool:
    """Forget connector `name`, the files it brought and what it last listed; False if there is none.
    The caller holds `ctx.editing()`.

    Only the files its last sync listed (its state) are deleted, each by its own path, never the whole
    `sources/<name>/`: a file someone else put there (an upload made before uploads were kept out of a
    connector's folder, a file copied in by hand) is not the connector's to delete."""
    entries = load(ctx)
    if entries.pop(name, None) is None:
        return False
    save(ctx, entries)
    folder = ctx.sources / name
    for rel in _brought(ctx, name):
        try:
            target = safe_join(folder, rel.as_posix())  # never through a link out of the folder
        except UnsafePath:
            continue
        for path in (target, target.with_name(f".{target.name}.partial")):  # a sync cut short left one
            if path.is_file() or path.is_symlink():
                path.unlink(missing_ok=True)
        prune_empty_dirs(target.parent, ctx.sources)
    state_file(ctx, name).unlink(missing_ok=True)
    return True


def _brought(ctx: ContextDir, name: str) -> list[PurePosixPath]:
    """The paths (below the connector's folder) of the items its state lists; a path that is not a
    plain relative path (a state file edited by hand) is not followed."""
    try:
        listed = json.loads(state_file(ctx, name).read_text(encoding="utf-8")).get("items") or {}
    except (OSError, ValueError, AttributeError):
        return []
    paths = []
    for key in listed if isinstance(listed, dict) else ():
        try:
            paths.append(safe_source_path(str(key)))
        except UnsafePath:
            continue
    return paths
