"""Evidence spans as the host sees them (spec/runtime.md §8.1): resolved from what the sandbox pointed at.

The sandbox only points (context, source, page, start, end); the host derives everything it keeps
from the pinned version's own records, so a forged span can neither name a file outside the version
nor put words on a page that the page does not hold.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

from sleuth.format.reading import Kept, cut_text
from sleuth.format.spans import PageSpan
from sleuth.sandbox.messages import SpanReport
from sleuth.store.version.search import VersionReader


@dataclass
class Sighting:
    """Whether the model has seen a span yet, and in which order: the one thing about a span that
    changes during a turn. Windowed copies of a span (`dataclasses.replace`) share it."""

    seen: bool = False  # its label or its first 60 chars appeared in an observation
    order: int | None = None  # order of first sighting


@dataclass(frozen=True, kw_only=True)
class EvidenceSpan(PageSpan):
    """A verbatim slice `text == page_text[start:end]` of one page, with its per-turn label."""

    ref: str  # "E7"
    context: str
    text: str
    section_path: list[str] = field(default_factory=list)
    via: str = "chunk"  # chunk | artifact | table  (Citation.kind)
    artifact_name: str | None = None
    score: float | None = None
    artifact_sources: list[str] = field(default_factory=list)  # Citation.sources for artifact spans
    cell: str | None = None  # a table cell as its row, period and figure (Citation.cell)
    #: Page offsets, inside the span, of what the text a model read of it skips (running headers,
    #: footers, page numbers, a hyphenated line break: `format.reading`): a quote or a printed
    #: prefix taken from that text is found here by skipping exactly these (`agent.citations`).
    removed: tuple[tuple[int, int], ...] = ()
    sighting: Sighting = field(default_factory=Sighting, compare=False)

    @property
    def seen(self) -> bool:
        return self.sighting.seen

    def read_form(self) -> Kept | None:
        """`text` as the model read it, less its `removed` ranges (a windowed copy keeps those inside
        it), with each character's offset in `text`; None when nothing of it was removed."""
        inside = [
            (max(a, self.start), min(b, self.end)) for a, b in self.removed if a < self.end and b > self.start
        ]
        if not inside:
            return None
        kept = cut_text(self.text, self.start, inside)
        return Kept(kept.text, [at - self.start for at in kept.offsets])

    @property
    def seen_order(self) -> int | None:
        return self.sighting.order

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        sighting = data.pop("sighting")
        return {**data, "seen": sighting["seen"], "seen_order": sighting["order"]}


class SpanResolver:
    """Resolves the spans a sandbox reports against the pinned versions of the turn's scope.

    A report is kept only when its context is in scope, its source is a source of that version (a
    key lookup, never a path join), its page exists, its offsets fall inside the page, and the text it
    claims (if any) is the page's own text there. The kept span's text is the host's slice of the page;
    its section path comes from the chunk with exactly that span, and an artifact name must be one
    of the version's artifacts.
    """

    def __init__(self, readers: Mapping[str, VersionReader]) -> None:
        self.readers = readers

    def resolve(self, report: SpanReport) -> EvidenceSpan | None:
        """The span the host keeps for `report`, or None when it does not resolve."""
        reader = self.readers.get(report.context)
        if reader is None:
            return None
        page = reader.page_text(report.source_path, report.page)
        if page is None or not report.start < report.end <= len(page):
            return None
        text = page[report.start : report.end]
        if report.text and report.text != text:
            return None
        if report.artifact_name is not None and report.artifact_name not in reader.artifact_names:
            return None
        chunk = reader.chunk_at(report.source_path, report.page, report.start, report.end)
        removed = reader.reading(report.source_path, report.page).removals(report.start, report.end)
        return EvidenceSpan(
            ref=report.ref,
            context=report.context,
            source_path=report.source_path,
            page=report.page,
            start=report.start,
            end=report.end,
            text=text,
            section_path=list(chunk.heading_path) if chunk is not None else [],
            via=report.via,
            artifact_name=report.artifact_name,
            score=report.score if report.score is not None and math.isfinite(report.score) else None,
            cell=(
                reader.cell_caption(report.source_path, report.page, report.start, report.end)
                if report.via == "table"
                else None
            ),
            removed=tuple(removed),
        )
