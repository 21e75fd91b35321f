"""Evidence spans as the host sees them: what the sandbox reported for each label (runtime.md §8.1)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass
class EvidenceSpan:
    """A verbatim slice `text == page_text[start:end]` of one page, with its per-turn label."""

    ref: str  # "E7"
    context: str
    source_path: str
    page: int
    start: int
    end: int
    text: str
    section_path: list[str] = field(default_factory=list)
    via: str = "chunk"  # chunk | artifact | table  (Citation.kind)
    artifact_name: str | None = None
    score: float | None = None
    artifact_sources: list[str] = field(default_factory=list)  # Citation.sources for artifact spans
    seen: bool = False  # its label or its first 60 chars appeared in an observation
    seen_order: int | None = None  # order of first sighting
    cited: bool = False

    @classmethod
    def from_sandbox(cls, data: dict[str, Any]) -> EvidenceSpan:
        return cls(
            ref=str(data["ref"]),
            context=str(data["context"]),
            source_path=str(data["source_path"]),
            page=int(data["page"]),
            start=int(data["start"]),
            end=int(data["end"]),
            text=str(data["text"]),
            section_path=list(data.get("section_path") or []),
            via=str(data.get("via") or "chunk"),
            artifact_name=data.get("artifact_name"),
            score=data.get("score"),
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "ref": self.ref,
            "context": self.context,
            "source_path": self.source_path,
            "page": self.page,
            "start": self.start,
            "end": self.end,
            "text": self.text,
            "section_path": self.section_path,
            "via": self.via,
            "artifact_name": self.artifact_name,
            "score": self.score,
            "artifact_sources": self.artifact_sources,
            "seen": self.seen,
            "seen_order": self.seen_order,
            "cited": self.cited,
        }
