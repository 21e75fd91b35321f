"""What one turn reads: its scoped contexts (`ScopedContext`, each read through a `ScopedReader`) and
the evidence labels it hands out (`Evidence`).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any

from sleuth.format.front_matter import split_front_matter
from sleuth.sdk.types import (
    Span,
)
from sleuth.store.version.search import VersionReader


@dataclass(frozen=True)
class ScopedContext:
    slug: str
    version_dir: Path


_TICKET: ContextVar[int | None] = ContextVar("sleuth_evidence_ticket", default=None)


class Evidence:
    """Per-turn evidence labels: the same (context, source, page, start, end) keeps its label.

    Labels follow the order in which the code *issued* its searches, not the order in which they
    finished: searches awaited together (`asyncio.gather`) run their index work at once, but each
    registers its spans only after every search issued before it is done (`issued` + `in_turn`), so a
    replay hands out the same `E7` for the same span, byte for byte."""

    def __init__(self) -> None:
        self._labels: dict[tuple[str, str, int, int, int], Span] = {}
        self.scores: dict[str, float] = {}  # label → best retrieval score seen (Citation.score)
        self._issued = 0
        self._open: dict[int, asyncio.Event] = {}  # tickets of searches still running → their "done"

    @asynccontextmanager
    async def issued(self) -> AsyncIterator[None]:
        """One search, from its start to its end: it takes the next ticket (a search called from
        within another shares its caller's)."""
        if _TICKET.get() is not None:
            yield
            return
        self._issued += 1
        ticket = self._issued
        self._open[ticket] = asyncio.Event()
        token = _TICKET.set(ticket)
        try:
            yield
        finally:
            _TICKET.reset(token)
            self._open.pop(ticket).set()

    async def in_turn(self) -> None:
        """Wait until every search issued before this one is done, so its spans are labelled after
        theirs. Waits only on earlier tickets, which never wait on later ones: no cycle."""
        ticket = _TICKET.get()
        if ticket is None:
            return
        for earlier in sorted(t for t in self._open if t < ticket):
            event = self._open.get(earlier)
            if event is not None:
                await event.wait()

    def note_score(self, span: Span, score: float) -> None:
        if score > self.scores.get(span.ref, float("-inf")):
            self.scores[span.ref] = score

    def register(
        self,
        context: str,
        source_path: str,
        page: int,
        start: int,
        end: int,
        text: str,
        section_path: list[str],
        via: str,
        artifact_name: str | None = None,
    ) -> Span:
        key = (context, source_path, page, start, end)
        known = self._labels.get(key)
        if known is not None:
            return known
        span = Span(
            ref=f"E{len(self._labels) + 1}",
            context=context,
            source_path=source_path,
            page=page,
            start=start,
            end=end,
            text=text,
            section_path=section_path,
            via=via,
            artifact_name=artifact_name,
        )
        self._labels[key] = span
        return span

    def get(self, label: str) -> Span | None:
        return next((s for s in self._labels.values() if s.ref == label), None)

    def all(self) -> list[Span]:
        return list(self._labels.values())


class ScopedReader:
    """One scoped context: its reader, manifest, artifacts and tables."""

    def __init__(self, scoped: ScopedContext) -> None:
        self.slug = scoped.slug
        self.reader = VersionReader(scoped.version_dir)
        self.root = scoped.version_dir

    @cached_property
    def manifest(self) -> dict[str, Any]:
        return self.reader.info.manifest

    @cached_property
    def artifacts(self) -> dict[str, dict[str, Any]]:
        return {a["id"]: a for a in self.reader.outline}

    @property
    def sources(self) -> dict[str, dict[str, Any]]:
        """`knowledge/sources.json`, read once by the reader (its searches resolve documents by it)."""
        return self.reader.documents

    def types(self) -> list[dict[str, Any]]:
        types: list[dict[str, Any]] = self.manifest["curate"]["artifacts"]["artifact_types"]
        return types

    def read_file(self, artifact_id: str) -> tuple[dict[str, Any], str]:
        text = (self.root / "knowledge" / self.artifacts[artifact_id]["file"]).read_text("utf-8")
        return split_front_matter(text)
