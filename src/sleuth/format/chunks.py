"""A chunk as a version stores it (`knowledge/chunks/<source>.jsonl`): an exact slice of one page."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Chunk:
    id: str
    source_path: str
    page: int
    start: int
    end: int
    section_path: list[str]
    text: str
    tokens: int
    sha256: str = field(repr=False)

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "source_path": self.source_path,
            "page": self.page,
            "start": self.start,
            "end": self.end,
            "section_path": self.section_path,
            "text": self.text,
            "tokens": self.tokens,
            "sha256": self.sha256,
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Chunk:
        return cls(
            id=data["id"],
            source_path=data["source_path"],
            page=int(data["page"]),
            start=int(data["start"]),
            end=int(data["end"]),
            section_path=list(data["section_path"]),
            text=data["text"],
            tokens=int(data["tokens"]),
            sha256=data["sha256"],
        )
