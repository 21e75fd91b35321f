"""A compiled version's `version.json`, read in one place into typed fields.

The compiler writes it last (`compile.build`), so a version directory that holds it is whole. Search,
the SDK, the orientation and the compile pipeline read it through `read_version_info`. The reader is
lenient: a field that is missing, or not of its type, reads as its default. Its callers decide what a
missing field means to them.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

VERSION_FILE = "version.json"


@dataclass(frozen=True)
class VersionEmbedder:
    """The embedder that made the version's vectors; `enabled` False: it was compiled without them."""

    id: str | None = None
    dim: int | None = None
    enabled: bool = True


@dataclass(frozen=True)
class VersionInfo:
    """What `version.json` says of its version."""

    version: str | None = None
    parent: str | None = None
    created_at: str | None = None
    flipped_at: str | None = None  # ISO 8601, when the version went live
    manifest: dict[str, Any] = field(default_factory=dict)  # the manifest it was compiled with
    manifest_hash: str | None = None
    embedder: VersionEmbedder = field(default_factory=VersionEmbedder)
    keyword: bool = True  # whether it has a keyword index (`curate.chunks.keyword.enabled`)
    counts: dict[str, Any] = field(default_factory=dict)  # sources, pages, chunks, artifacts, …
    sample_queries: list[str] = field(default_factory=list)

    @property
    def flipped_epoch(self) -> float | None:
        """`flipped_at` as a Unix time; None when it is missing or not a date."""
        if not self.flipped_at:
            return None
        try:
            return datetime.fromisoformat(self.flipped_at.replace("Z", "+00:00")).timestamp()
        except ValueError:
            return None


def version_file(version_dir: Path) -> Path:
    return version_dir / VERSION_FILE


def has_version_info(version_dir: Path) -> bool:
    """Whether the version directory holds its `version.json` (a version that was collected has none)."""
    return version_file(version_dir).is_file()


def read_version_info(version_dir: Path) -> VersionInfo:
    """The version's `version.json`. `OSError` when it cannot be read, `ValueError` when it is not a
    JSON object."""
    data = json.loads(version_file(version_dir).read_text("utf-8"))
    if not isinstance(data, dict):
        raise ValueError(f"{version_file(version_dir)}: not a JSON object")
    return parse_version_info(data)


def parse_version_info(data: dict[str, Any]) -> VersionInfo:
    embedder = data.get("embedder")
    embedder = embedder if isinstance(embedder, dict) else {}
    queries = data.get("sample_queries")
    return VersionInfo(
        version=_text(data.get("version")),
        parent=_text(data.get("parent")),
        created_at=_text(data.get("created_at")),
        flipped_at=_text(data.get("flipped_at")),
        manifest=_mapping(data.get("manifest")),
        manifest_hash=_text(data.get("manifest_hash")),
        embedder=VersionEmbedder(
            id=_text(embedder.get("id")),
            dim=embedder.get("dim") if isinstance(embedder.get("dim"), int) else None,
            enabled=bool(embedder.get("enabled", True)),
        ),
        keyword=bool(data.get("keyword", True)),
        counts=_mapping(data.get("counts")),
        sample_queries=[str(q) for q in queries] if isinstance(queries, list) else [],
    )


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def _mapping(value: Any) -> dict[str, Any]:
    return dict(value) if isinstance(value, dict) else {}
