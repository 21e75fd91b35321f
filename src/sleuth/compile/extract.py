"""The seam for model extraction (spec/context.md §5.4, later): kinds `summary`, `topic`, `entity` and
`event` are built by an `Extractor`. Until a model is configured the compiler uses
`NoModelExtractor`, which builds nothing and says so, per type, in the compile report."""

from __future__ import annotations

from typing import Protocol

from sleuth.compile.artifacts import Artifact
from sleuth.compile.manifest import ArtifactType
from sleuth.compile.pages import Page


class Extractor(Protocol):
    #: Recorded as each artifact's `model`.
    name: str

    def available(self) -> bool:
        """False when no model is configured: model kinds are then skipped, not failed."""
        ...

    def document(self, art_type: ArtifactType, source_path: str, pages: list[Page]) -> list[Artifact]:
        """Document scope: artifacts for one source (phase 4)."""
        ...

    def corpus(self, art_type: ArtifactType, pages_by_source: dict[str, list[Page]]) -> list[Artifact]:
        """Corpus scope: map every source, group subjects, reduce each group (phases 4-5)."""
        ...


class NoModelExtractor:
    name = "none"

    def available(self) -> bool:
        return False

    def document(self, art_type: ArtifactType, source_path: str, pages: list[Page]) -> list[Artifact]:
        return []

    def corpus(self, art_type: ArtifactType, pages_by_source: dict[str, list[Page]]) -> list[Artifact]:
        return []
