"""A chunk as a version stores it (`knowledge/chunks/<source>.jsonl`): an exact slice of one page."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from sleuth.format.spans import PageSpan


@dataclass(frozen=True, kw_only=True)
class Chunk(PageSpan):
    id: str
    section_path: list[str]
    text: str
    tokens: int
    sha256: str = field(repr=False)

    def to_json(self) -> dict[str, Any]:
        return asdict(self)  # every field, in order: the line of `chunks/<source>.jsonl`

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
