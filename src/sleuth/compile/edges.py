"""Mention edges between deterministic types, built without a model (spec/context.md §4.1): A → B for
every artifact B of the `to` type whose name occurs verbatim (case-insensitive, on word boundaries)
in the source text of A; the first occurrence is the evidence span."""

from __future__ import annotations

import re

from sleuth.compile.artifacts import Artifact, EdgeRef
from sleuth.compile.manifest import EdgeType
from sleuth.compile.pages import Page
from sleuth.format.spans import Provenance


def _texts_of(artifact: Artifact, pages_by_source: dict[str, list[Page]]) -> list[tuple[str, Page]]:
    if artifact.kind == "page":
        number = artifact.fields["page"]
        return [(s, p) for s in artifact.sources for p in pages_by_source.get(s, []) if p.page == number]
    return [(s, p) for s in artifact.sources for p in pages_by_source.get(s, [])]


def _distinctive(name: str) -> bool:
    """A name worth matching: a single lowercase word (a title taken from a file name such as
    `catalog`) would match ordinary prose everywhere."""
    name = name.strip()
    return len(name) >= 3 and (" " in name or any(ch.isupper() or ch.isdigit() for ch in name))


def build_mention_edges(
    edge_type: EdgeType,
    sources: list[Artifact],
    targets: list[Artifact],
    pages_by_source: dict[str, list[Page]],
) -> int:
    """Attach edges of `edge_type` to the `sources` artifacts; returns how many were made."""
    by_name: dict[str, list[Artifact]] = {}
    for target in targets:
        if _distinctive(target.name):
            by_name.setdefault(target.name.casefold(), []).append(target)
    if not by_name:
        return 0
    names = sorted(by_name, key=len, reverse=True)
    pattern = re.compile(r"(?<!\w)(?:" + "|".join(re.escape(n) for n in names) + r")(?!\w)", re.IGNORECASE)
    made = 0
    for artifact in sources:
        first: dict[str, Provenance] = {}
        for source, page in _texts_of(artifact, pages_by_source):
            for match in pattern.finditer(page.text):
                key = match.group(0).casefold()
                if key not in first:
                    first[key] = Provenance.of(source, page.page, page.text, match.start(), match.end())
        for key in sorted(first):
            for target in by_name.get(key, []):
                if target.id == artifact.id:
                    continue
                artifact.edges.append(
                    EdgeRef(edge_type.name, target.name, target.type, target.id, first[key])
                )
                made += 1
    return made
