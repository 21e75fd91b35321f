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
    #: The chunk's place in the document's outline where it differs from `section_path` (which heads
    #: its embedding, as the index was tuned): see `compile.pages.Page.outline` (issue 25, item 5).
    outline_path: list[str] | None = None

    @property
    def heading_path(self) -> list[str]:
        """The full heading path a reader is shown and SQL and `read_section` scope by."""
        return self.outline_path if self.outline_path is not None else self.section_path

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)  # every field, in order: the line of `chunks/<source>.jsonl`
        for optional in ("table_header", "outline_path"):
            if data[optional] is None:
                del data[optional]  # as chunks were written before these existed
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
            outline_path=list(data["outline_path"]) if data.get("outline_path") is not None else None,
        )
