"""The seam for model extraction (spec/context.md §5.4): kinds `summary`, `topic`, `entity` and `event`,
rows found in prose and typed edges are built by an `Extractor`. With no model configured the compiler
uses `NoModelExtractor`, which builds nothing and says so, per type, in the compile report; with one,
`compile.extraction.ModelExtractor`."""

from __future__ import annotations

from typing import Any, Protocol

from sleuth.compile.artifacts import Artifact
from sleuth.compile.manifest import ArtifactType
from sleuth.compile.pages import Page
from sleuth.compile.report import Progress
from sleuth.compile.typed_tables import ProseRows


class Extractor(Protocol):
    #: Recorded as each artifact's `model`.
    name: str
    #: The model as its replies depend on it (id, provider, model, endpoint): it keys the extraction
    #: cache and the ledger's extractor leg, so another model redoes the model kinds.
    fingerprint: str

    def available(self) -> bool:
        """False when no model is configured: model kinds are then skipped, not failed."""
        ...

    @property
    def budget_exhausted(self) -> bool:
        """The token budget ran out: the types not yet built are skipped."""
        ...

    @property
    def complete(self) -> bool:
        """Every call this run needed was made and answered (no budget stop, no provider failure)."""
        ...

    def watch(self, progress: Progress) -> None:
        """Report each call (phase `extract`) and the tokens spent to `progress`; a cancel raised by
        its checks stops the extraction at the next call."""
        ...

    def document_scope(
        self, art_type: ArtifactType, pages_by_source: dict[str, list[Page]]
    ) -> list[Artifact]:
        """Document scope: one artifact per source (phase 4)."""
        ...

    def corpus_scope(
        self, art_type: ArtifactType, pages_by_source: dict[str, list[Page]], mtimes: dict[str, float]
    ) -> list[Artifact]:
        """Corpus scope: map every source, group subjects, reduce each group (phases 4-5)."""
        ...

    def prose_rows(self, art_type: ArtifactType, pages_by_source: dict[str, list[Page]]) -> ProseRows:
        """Rows of a `format: sqlite` type stated in running text."""
        ...

    def resolve_edges(self, artifacts: list[Artifact], pages_by_source: dict[str, list[Page]]) -> int:
        """Typed edges found by the corpus maps, attached once both ends exist; how many were made."""
        ...

    def sample_queries(self, artifacts: list[Artifact]) -> list[str]:
        """Sample queries written from the artifacts (§5.5); empty: use the heuristic ones."""
        ...

    def report(self) -> dict[str, Any]:
        """Usage and outcomes per type, for the report, the version, the ledger and task stats."""
        ...


class NoModelExtractor:
    name = "none"
    fingerprint = "none"
    budget_exhausted = False
    complete = True

    def available(self) -> bool:
        return False

    def watch(self, progress: Progress) -> None:
        pass

    def document_scope(
        self, art_type: ArtifactType, pages_by_source: dict[str, list[Page]]
    ) -> list[Artifact]:
        return []

    def corpus_scope(
        self, art_type: ArtifactType, pages_by_source: dict[str, list[Page]], mtimes: dict[str, float]
    ) -> list[Artifact]:
        return []

    def prose_rows(self, art_type: ArtifactType, pages_by_source: dict[str, list[Page]]) -> ProseRows:
        return ProseRows()

    def resolve_edges(self, artifacts: list[Artifact], pages_by_source: dict[str, list[Page]]) -> int:
        return 0

    def sample_queries(self, artifacts: list[Artifact]) -> list[str]:
        return []

    def report(self) -> dict[str, Any]:
        return {}
