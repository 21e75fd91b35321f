"""The artifact leg of a compile (spec/context.md §4, §5.1 phases 4-6): cards, glossaries, typed tables,
edges, artifact files, rosters and the outline, all rebuilt from the stored pages of the version."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from sleuth.compile import artifacts as cards
from sleuth.compile import edges as mention_edges
from sleuth.compile import glossary as glossary_builder
from sleuth.compile import rosters, typed_tables
from sleuth.compile.artifacts import Artifact
from sleuth.compile.documents import source_row
from sleuth.compile.extract import Extractor
from sleuth.compile.manifest import DETERMINISTIC_KINDS, Manifest
from sleuth.compile.pages import Page
from sleuth.compile.version_files import SourceState
from sleuth.store.files import write_json_atomic


class ArtifactLeg:
    def __init__(self, manifest: Manifest, extractor: Extractor, warnings: list[str]) -> None:
        self.manifest = manifest
        self.extractor = extractor
        self.warnings = warnings

    def build(
        self,
        pages_by_source: dict[str, list[Page]],
        states: dict[str, SourceState],
    ) -> tuple[
        list[Artifact],
        list[tuple[str, glossary_builder.Entry]],
        list[typed_tables.TypedTable],
        dict[str, str],
    ]:
        out: list[Artifact] = []
        glossary_entries: list[tuple[str, glossary_builder.Entry]] = []
        typed: list[typed_tables.TypedTable] = []
        skipped: dict[str, str] = {}
        mtimes = {rel: s.mtime for rel, s in states.items()}
        for art_type in self.manifest.curate.artifacts.artifact_types:
            if art_type.format == "sqlite":
                prose = None
                if self.extractor.available():  # past the budget, cached rows still come back free
                    prose = self.extractor.prose_rows(art_type, pages_by_source)
                typed.append(typed_tables.build_table(art_type, pages_by_source, mtimes, prose))
                if prose is None:
                    self.warnings.append(
                        f"type {art_type.name!r}: rows were read from tables in the corpus only; "
                        "rows stated in prose need a model"
                    )
                continue
            if art_type.kind == "doc":
                for rel in sorted(pages_by_source):
                    out.append(
                        cards.build_doc(
                            art_type,
                            rel,
                            states[rel].format,
                            states[rel].title,
                            pages_by_source[rel],
                            identity={
                                "issuer": states[rel].issuer,
                                "doc_type": states[rel].doc_type,
                                "period": states[rel].period,
                                "year": states[rel].year,
                                "period_start": states[rel].period_start,
                                "period_end": states[rel].period_end,
                                "fiscal_quarter": states[rel].fiscal_quarter,
                                "fiscal_differs": states[rel].fiscal_differs,
                                "fiscal_year": states[rel].fiscal_year,
                                "fiscal_year_end": states[rel].fiscal_year_end,
                                "fiscal_basis": states[rel].fiscal_basis,
                                "calendar_year": states[rel].calendar_year,
                                "calendar_quarter": states[rel].calendar_quarter,
                                "calendar_period": states[rel].calendar_period,
                                "fiscal_year_named": states[rel].fiscal_year_named,
                            },
                        )
                    )
            elif art_type.kind == "page":
                for rel in sorted(pages_by_source):
                    out.extend(cards.build_pages(art_type, rel, states[rel].title, pages_by_source[rel]))
            elif art_type.kind == "glossary":
                artifact, entries = glossary_builder.build_glossary(art_type, pages_by_source)
                if artifact is not None:
                    out.append(artifact)
                glossary_entries.extend((art_type.name, e) for e in entries)
                if not entries:
                    self.warnings.append(
                        f"type {art_type.name!r}: no entries found under the sections {art_type.sections}"
                    )
            elif not self.extractor.available():
                skipped[art_type.name] = f"kind {art_type.kind!r} needs a model; none is configured"
                self.warnings.append(
                    f"type {art_type.name!r} skipped: kind {art_type.kind!r} "
                    "needs a model and none is configured"
                )
            elif art_type.resolved_scope == "document":
                out.extend(self.extractor.document_scope(art_type, pages_by_source))
            else:
                out.extend(self.extractor.corpus_scope(art_type, pages_by_source, mtimes))
        if self.extractor.budget_exhausted:
            self.warnings.append(
                "the token budget was spent: what needed another paid call was not extracted "
                "(counted per type as screened); the next curate completes it from the cache"
            )
        return out, glossary_entries, typed, skipped

    def build_edges(self, artifacts: list[Artifact], pages_by_source: dict[str, list[Page]]) -> None:
        for edge_type in self.manifest.curate.artifacts.edge_types:
            from_type = self.manifest.type_named(edge_type.from_)
            to_type = self.manifest.type_named(edge_type.to)
            if from_type is None or to_type is None:
                continue
            if from_type.kind in DETERMINISTIC_KINDS and to_type.kind in DETERMINISTIC_KINDS:
                mention_edges.build_mention_edges(
                    edge_type,
                    [a for a in artifacts if a.type == from_type.name],
                    [a for a in artifacts if a.type == to_type.name],
                    pages_by_source,
                )
            elif not self.extractor.available():
                self.warnings.append(
                    f"edge type {edge_type.name!r} skipped: it joins a model kind and no model is configured"
                )
            elif not any(
                t.resolved_scope == "corpus" and t.kind not in DETERMINISTIC_KINDS and t.kind != "summary"
                for t in (from_type, to_type)
            ):
                self.warnings.append(
                    f"edge type {edge_type.name!r} skipped: edges are found by the map step of a corpus "
                    "topic, entity or event type, and neither end is one"
                )
        if self.extractor.available():
            self.extractor.resolve_edges(artifacts, pages_by_source)

    def write_files(
        self,
        knowledge: Path,
        artifacts: list[Artifact],
        version: str,
        parent_outline: dict[str, dict[str, Any]],
    ) -> dict[str, str]:
        files: dict[str, str] = {}
        outline: list[dict[str, Any]] = []
        for art in artifacts:
            type_slug = next(
                t.slug for t in self.manifest.curate.artifacts.artifact_types if t.name == art.type
            )
            rel = f"artifacts/{type_slug}/{art.slug}.md"
            before = parent_outline.get(art.id, {})
            created = before.get("created_version", version)
            updated = (
                before.get("updated_version", version)
                if before.get("content_sha256") == art.content_sha()
                else version
            )
            path = knowledge / rel
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(art.to_markdown(created, updated), encoding="utf-8")
            files[art.id] = rel
            outline.append(
                {
                    "id": art.id,
                    "name": art.name,
                    "type": art.type,
                    "kind": art.kind,
                    "scope": art.scope,
                    "format": art.format,
                    "file": rel,
                    "sources_count": len(art.sources),
                    "created_version": created,
                    "updated_version": updated,
                    "content_sha256": art.content_sha(),
                }
            )
        write_json_atomic(knowledge / "outline.json", {"artifacts": outline})
        return files

    def write_rosters(
        self,
        knowledge: Path,
        states: dict[str, SourceState],
        artifacts: list[Artifact],
        typed: list[typed_tables.TypedTable],
        skipped: dict[str, str],
    ) -> dict[str, str]:
        roster_dir = knowledge / "rosters"
        roster_dir.mkdir(parents=True, exist_ok=True)
        written: dict[str, str] = {}
        srcs = [source_row(s) for s in sorted(states.values(), key=lambda s: s.path)]
        (roster_dir / "_sources.md").write_text(rosters.sources_roster(srcs), encoding="utf-8")
        written["_sources"] = "rosters/_sources.md"
        if not self.manifest.curate.artifacts.is_enabled:
            return written
        tables_by_type = {t.type.name: t for t in typed}
        for art_type in self.manifest.curate.artifacts.artifact_types:
            if art_type.name in tables_by_type:
                text = rosters.table_roster(tables_by_type[art_type.name])
            else:
                note = skipped.get(art_type.name)
                text = rosters.type_roster(
                    art_type,
                    [a for a in artifacts if a.type == art_type.name],
                    note=f"Not built: {note}." if note else None,
                )
            (roster_dir / f"{art_type.slug}.md").write_text(text, encoding="utf-8")
            written[art_type.name] = f"rosters/{art_type.slug}.md"
        return written
