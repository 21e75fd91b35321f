"""Integrity checks run before a version flips: every chunk is a slice of its page and every
provenance quote is verbatim (spec/context.md §5.1, phase 6). A failure is fatal: the run does not flip."""

from __future__ import annotations

from sleuth.compile import typed_tables
from sleuth.compile.artifacts import Artifact
from sleuth.compile.errors import CompileError
from sleuth.compile.pages import Page
from sleuth.format.chunks import Chunk


def check_chunks(chunks: list[Chunk], pages: list[Page]) -> None:
    by_page = {p.page: p.text for p in pages}
    for c in chunks:
        if by_page.get(c.page, "")[c.start : c.end] != c.text:
            raise CompileError(f"integrity check failed: chunk {c.id} is not a slice of its page")


def check_provenance(
    artifacts: list[Artifact], typed: list[typed_tables.TypedTable], pages_by_source: dict[str, list[Page]]
) -> None:
    texts = {(s, p.page): p.text for s, pages in pages_by_source.items() for p in pages}
    spans = [p for a in artifacts for p in a.provenance]
    spans += [p for t in typed for row in t.rows for p in row.provenance]
    spans += [e.evidence for a in artifacts for e in a.edges if e.evidence is not None]
    for span in spans:
        if texts.get((span.source_path, span.page), "")[span.start : span.end] != span.quote:
            raise CompileError(f"integrity check failed: a provenance quote in {span.where} is not verbatim")
