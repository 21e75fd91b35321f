"""The curation ledger (`ledger.json`, spec/context.md §6): what each source contributed, so a compile
only redoes what changed. Field names follow the contract's `CurationState`."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

from sleuth.store.files import write_json_atomic


class SourceEntry(BaseModel):
    hash: str
    curated_at: str
    size: int
    mtime: float


class Failure(BaseModel):
    version: str
    status: str  # "failed" | "skipped"
    reason: str


class Tombstone(BaseModel):
    removed_version: str
    removed_at: str


class Ledger(BaseModel):
    manifest: dict[str, SourceEntry] = Field(default_factory=dict)
    chunk_ids: dict[str, list[str]] = Field(default_factory=dict)
    edges: dict[str, list[str]] = Field(default_factory=dict)
    corpus_groups: list[dict[str, Any]] = Field(default_factory=list)
    source_pointers: dict[str, list[dict[str, Any]]] = Field(default_factory=dict)
    source_glossary: dict[str, list[dict[str, Any]]] = Field(default_factory=dict)
    source_removed: dict[str, Tombstone] = Field(default_factory=dict)
    artifact_reclaim: list[str] = Field(default_factory=list)
    chunk_reclaim: list[str] = Field(default_factory=list)
    live_version: str | None = None
    versions_stamped: list[str] = Field(default_factory=list)
    redispatch_count: int = 0
    leg_hashes: dict[str, Any] = Field(default_factory=dict)
    embedding_model: dict[str, Any] = Field(default_factory=dict)
    mentions: dict[str, dict[str, list[str]]] = Field(default_factory=dict)
    failures: dict[str, Failure] = Field(default_factory=dict)
    #: Sleuth: the last run's model extraction, per type: calls, tokens, built, screened, errored.
    extraction: dict[str, Any] = Field(default_factory=dict)

    @classmethod
    def load(cls, path: Path) -> Ledger:
        try:
            return cls.model_validate(json.loads(path.read_text(encoding="utf-8")))
        except FileNotFoundError:
            return cls()

    def save(self, path: Path) -> None:
        write_json_atomic(path, self.model_dump(mode="json"))
