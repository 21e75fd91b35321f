"""The files of one version's `knowledge/` tree (spec/context.md §7.1-7.2) and how versions share them."""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sleuth.compile.pages import Page
from sleuth.format.chunks import Chunk
from sleuth.store.files import link_file
from sleuth.store.version.info import read_version_info


@dataclass
class SourceState:
    """Per-source metadata kept in `knowledge/sources.json` of each version."""

    path: str
    title: str
    format: str
    pages: int
    chars: int
    sha256: str
    size: int
    mtime: float
    curated_at: str
    images_skipped: int = 0
    # What the document is (compile.identity): None where nothing in it says.
    issuer: str | None = None
    doc_type: str | None = None
    period: str | None = None
    year: int | None = None
    aliases: str = ""  # short names of the issuer the document gives, space-separated ("JNJ J&J")
    period_start: str | None = None  # ISO dates of the period it covers, where it states its end
    period_end: str | None = None
    fiscal_quarter: int | None = None  # from the fiscal year end (`format.identity.DocumentIdentity`)
    fiscal_differs: bool | None = None  # its fiscal year does not end in December
    fiscal_year: int | None = None
    fiscal_year_end: int | None = None  # the month the issuer's fiscal year ends in
    fiscal_basis: str | None = None  # how that month is known
    calendar_year: int | None = None
    calendar_quarter: int | None = None
    calendar_period: str | None = None  # "Q3 2022": the calendar label beside `period`
    fiscal_year_named: int | None = None  # the fiscal year as the document names it, where it differs


def pages_rel(rel: str) -> str:
    return f"pages/{rel}.jsonl"


def chunks_rel(rel: str) -> str:
    return f"chunks/{rel}.jsonl"


def carry(parent: Path, version: Path, rel: str, with_chunks: bool) -> None:
    """Share an unchanged source's page file (and chunk file, unless chunking changed) with the
    parent version; a missing chunk file is rebuilt from the pages."""
    link_file(parent / "knowledge" / pages_rel(rel), version / "knowledge" / pages_rel(rel))
    if with_chunks:
        link_file(parent / "knowledge" / chunks_rel(rel), version / "knowledge" / chunks_rel(rel))


def write_jsonl(path: Path, rows: Iterable[dict[str, Any]]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", encoding="utf-8") as fh:
        for row in rows:
            fh.write(json.dumps(row, ensure_ascii=False))
            fh.write("\n")


def read_jsonl(path: Path) -> Iterator[dict[str, Any]]:
    with path.open(encoding="utf-8") as fh:
        for line in fh:
            if line.strip():
                yield json.loads(line)


def load_pages(knowledge: Path, rel: str) -> list[Page]:
    return [Page.from_json(d) for d in read_jsonl(knowledge / pages_rel(rel))]


def load_chunks(knowledge: Path, rel: str) -> Iterator[Chunk]:
    return (Chunk.from_json(d) for d in read_jsonl(knowledge / chunks_rel(rel)))


class StoredPages(Mapping[str, list[Page]]):
    """Each source's pages, read from the version's files whenever asked for: a compile holds one
    document's pages at a time, never the corpus's (issue 24, bounded memory)."""

    def __init__(self, knowledge: Path, sources: Iterable[str]) -> None:
        self._knowledge = knowledge
        self._sources = sorted(sources)
        self._known = frozenset(self._sources)

    def __getitem__(self, rel: str) -> list[Page]:
        if rel not in self._known:
            raise KeyError(rel)
        return load_pages(self._knowledge, rel)

    def __iter__(self) -> Iterator[str]:
        return iter(self._sources)

    def __len__(self) -> int:
        return len(self._sources)


def read_sources(version_dir: Path) -> dict[str, dict[str, Any]]:
    try:
        data: dict[str, dict[str, Any]] = json.loads(
            (version_dir / "knowledge" / "sources.json").read_text(encoding="utf-8")
        )
    except FileNotFoundError:
        return {}
    return data


def read_outline(version_dir: Path | None) -> dict[str, dict[str, Any]]:
    if version_dir is None:
        return {}
    try:
        data = json.loads((version_dir / "knowledge" / "outline.json").read_text(encoding="utf-8"))
    except FileNotFoundError:
        return {}
    return {a["id"]: a for a in data.get("artifacts", [])}


def version_counts(version_dir: Path) -> dict[str, Any]:
    """The `counts` a version records in `version.json` (sources compiled, pages, chunks, artifacts,
    …); empty when the file is missing or unreadable."""
    try:
        return read_version_info(version_dir).counts
    except (OSError, ValueError):
        return {}


def flipped_epoch(version_dir: Path) -> float | None:
    """When the version went live (`version.json`'s `flipped_at`), as a Unix time; None when unknown."""
    try:
        return read_version_info(version_dir).flipped_epoch
    except (FileNotFoundError, ValueError):
        return None
