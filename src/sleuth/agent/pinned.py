"""The pinned versions of a turn's scope, read on the host: what evidence spans and citations are
resolved against, and where the boilerplate share of a chunk and a page's text come from. Read
lazily, once per turn."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from sleuth.agent.orientation import ContextBrief
from sleuth.agent.spans import EvidenceSpan
from sleuth.sdk.errors import SleuthError
from sleuth.sdk.knowledge import Knowledge, ScopedContext
from sleuth.store.version.search import VersionReader

__all__ = ["PinnedVersions"]


class PinnedVersions:
    def __init__(self, briefs: Sequence[ContextBrief]) -> None:
        self._dirs = {b.slug: b.version_dir for b in briefs}
        self._readers: dict[str, VersionReader] | None = None

    def readers(self) -> dict[str, VersionReader]:
        if self._readers is None:
            self._readers = {slug: VersionReader(d) for slug, d in self._dirs.items()}
        return self._readers

    def boilerplate_share(self, span: EvidenceSpan) -> float:
        """The boilerplate share of the chunk a span is (0 for spans that are no whole chunk)."""
        reader = self.readers().get(span.context)
        if reader is None:
            return 0.0
        chunk = reader.chunk_at(span.source_path, span.page, span.start, span.end)
        return reader.boilerplate.get(chunk.id, 0.0) if chunk is not None else 0.0

    def page_text(self, context: str, source: str, page: int) -> str | None:
        reader = self.readers().get(context)
        return reader.page_text(source, page) if reader is not None else None

    def attach_artifact_sources(self, spans: list[EvidenceSpan]) -> None:
        """Each span quoted from an artifact learns that artifact's sources (citations show them)."""
        names = {(s.context, s.artifact_name) for s in spans if s.artifact_name}
        if not names:
            return
        knowledge = Knowledge([ScopedContext(slug, d) for slug, d in self._dirs.items()])
        try:
            sources: dict[tuple[str, str], list[str]] = {}
            for context, name in names:
                try:
                    sources[(context, str(name))] = list(
                        knowledge.read_artifact(str(name), context=context).sources
                    )
                except SleuthError:
                    sources[(context, str(name))] = []
            for i, span in enumerate(spans):
                if span.artifact_name:
                    found = sources.get((span.context, span.artifact_name), [])
                    spans[i] = dataclasses.replace(span, artifact_sources=found)
        finally:
            knowledge.close()
