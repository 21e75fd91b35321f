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
    #: For a chunk of a table's rows that does not hold the table's header: the caption, column
    #: headers and unit (`Consolidated Statement of Cash Flows: Years ended December 31 2018 | …
    #: (millions)`), shown with the chunk so its figures keep their periods. Not part of the span.
    table_header: str | None = None

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)  # every field, in order: the line of `chunks/<source>.jsonl`
        if data["table_header"] is None:
            del data["table_header"]  # as chunks were written before tables had headers
        return data

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
            table_header=data.get("table_header"),
        )
