"""Boilerplate scores as a version stores them (`index/boilerplate.json`): chunk id → the share of
its text that is running header, contents page or text shared across documents."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path

FILE = "boilerplate.json"


def write(index_dir: Path, scores: Mapping[str, float]) -> None:
    index_dir.mkdir(parents=True, exist_ok=True)
    data = {"version": 1, "chunks": dict(sorted(scores.items()))}
    (index_dir / FILE).write_text(json.dumps(data, separators=(",", ":")), encoding="utf-8")


def read(index_dir: Path) -> dict[str, float]:
    """The scores of a version; empty for a version compiled before they existed."""
    try:
        data = json.loads((index_dir / FILE).read_text("utf-8"))
    except FileNotFoundError:
        return {}
    return {str(k): float(v) for k, v in data.get("chunks", {}).items()}
