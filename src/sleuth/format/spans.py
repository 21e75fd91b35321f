"""Where a piece of evidence is: one page span, the location that chunks, search hits, the SDK's spans,
the host's evidence and artifact provenance all share (spec/context.md §3, runtime.md §8.1).

Offsets are character offsets into the stored page text (`pages/<source>.jsonl`), end exclusive, so
`page_text[start:end]` is the span's text. Every record that says where something is inherits
`PageSpan`, so the four fields, their meaning and the way they are shown are declared once.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any


@dataclass(frozen=True, kw_only=True)
class PageSpan:
    """Characters `[start:end)` of page `page` of the source `source_path`."""

    source_path: str
    page: int
    start: int
    end: int

    @property
    def where(self) -> str:
        """`path p.N [start:end]`: how reprs, logs and the CLI show a location."""
        return f"{self.source_path} p.{self.page} [{self.start}:{self.end}]"

    @property
    def key(self) -> tuple[str, int, int, int]:
        """The location alone, for sorting and for telling two records of one place apart from others."""
        return (self.source_path, self.page, self.start, self.end)


@dataclass(frozen=True, kw_only=True)
class Provenance(PageSpan):
    """An artifact's evidence: a span and its verbatim `quote` (the page's own text there).

    On disk (artifact front matter, the `_provenance` column of typed tables) the source is written
    as `source`, as spec/context.md §5.4 writes it; `to_json` and `from_json` keep that form.
    """

    quote: str

    @classmethod
    def of(cls, source_path: str, page: int, page_text: str, start: int, end: int) -> Provenance:
        """The provenance of `page_text[start:end]`: the quote is always the page's own slice."""
        return cls(source_path=source_path, page=page, start=start, end=end, quote=page_text[start:end])

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        return {"source": data.pop("source_path"), **data}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Provenance:
        return cls(
            source_path=str(data["source"]),
            page=int(data["page"]),
            start=int(data["start"]),
            end=int(data["end"]),
            quote=str(data.get("quote", "")),
        )
