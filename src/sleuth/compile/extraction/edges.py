"""Typed edges found in prose (spec/context.md §5.4, "Edges"): claimed by the map step of a corpus type
at one of their ends, resolved once every artifact exists. Both ends must be artifacts (an end that
names a document-scoped type, or says "this document", is that type's artifact for the source the edge
was found in), and the quote must be found on the page; else the edge is screened."""

from __future__ import annotations

from collections.abc import Callable

from sleuth.compile.artifacts import Artifact, EdgeRef
from sleuth.compile.extraction.grouping import subject_key
from sleuth.compile.extraction.outcomes import TypeStats
from sleuth.compile.extraction.quotes import QuoteLocator
from sleuth.compile.extraction.schemas import EdgeClaim
from sleuth.compile.manifest import DETERMINISTIC_KINDS, ArtifactType, EdgeType, Manifest
from sleuth.compile.pages import Page

THIS_DOCUMENT = {"this document", "this agreement", "the document", "this contract", "this"}


def edges_of(art_type: ArtifactType, manifest: Manifest) -> list[EdgeType]:
    """Edge types this corpus type's map step looks for: those with this type at one end."""
    if art_type.resolved_scope != "corpus" or art_type.kind == "summary":
        return []
    name = art_type.name.casefold()
    return [
        e
        for e in manifest.curate.artifacts.edge_types
        if name in (e.from_.casefold(), e.to.casefold()) and not deterministic_edge(e, manifest)
    ]


def deterministic_edge(edge: EdgeType, manifest: Manifest) -> bool:
    ends = [manifest.type_named(edge.from_), manifest.type_named(edge.to)]
    return all(t is not None and t.kind in DETERMINISTIC_KINDS for t in ends)


def resolve_claims(
    manifest: Manifest,
    claims: list[tuple[str, EdgeClaim]],
    artifacts: list[Artifact],
    pages_by_source: dict[str, list[Page]],
    stats_of: Callable[[str], TypeStats],
) -> int:
    """Attach each claimed edge (`(source, claim)`) whose two ends resolve; returns how many were made.
    Outcomes are counted under `edge:<name>`."""
    edge_types = {e.name.casefold(): e for e in manifest.curate.artifacts.edge_types}
    by_key: dict[tuple[str, str], Artifact] = {}
    by_source: dict[tuple[str, str], Artifact] = {}
    for art in artifacts:
        if art.scope == "document":
            by_source.setdefault((art.type.casefold(), art.sources[0]), art)
        names = (
            [art.name, *art.fields.get("aliases", [])]
            if isinstance(art.fields.get("aliases"), list)
            else [art.name]
        )
        keys = {subject_key(n) for n in names} | ({art.group_key} if art.group_key else set())
        for key in keys:
            by_key.setdefault((art.type.casefold(), key), art)
    locators: dict[str, QuoteLocator] = {}
    made = 0
    for source, claim in claims:
        edge = edge_types.get(claim.type.casefold())
        stats = stats_of(f"edge:{edge.name}" if edge else "edge:unknown")
        if edge is None:
            stats.screen("undeclared edge type")
            continue
        ends: list[Artifact | None] = []
        for name, type_name in ((claim.from_, edge.from_), (claim.to, edge.to)):
            art_type = manifest.type_named(type_name)
            if art_type is None:
                ends.append(None)
            elif art_type.resolved_scope == "document" or name.strip().casefold() in THIS_DOCUMENT:
                ends.append(by_source.get((art_type.name.casefold(), source)))
            else:
                ends.append(by_key.get((art_type.name.casefold(), subject_key(name))))
        start, target = ends
        if start is None or target is None or start is target:
            stats.screen("an end is not an artifact")
            continue
        locator = locators.setdefault(source, QuoteLocator(source, pages_by_source.get(source, [])))
        evidence = locator.locate(claim.quote)
        if evidence is None:
            stats.count("quotes_rejected", 1)
            stats.screen("no verifiable quote")
            continue
        stats.count("quotes_verified", 1)
        if any(e.type == edge.name and e.to_id == target.id for e in start.edges):
            continue
        allowed = set(edge.attributes)
        attributes = {k: v for k, v in claim.attributes.items() if k in allowed}
        start.edges.append(EdgeRef(edge.name, target.name, target.type, target.id, evidence, attributes))
        stats.count("built", 1)
        made += 1
    return made
