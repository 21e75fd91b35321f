"""The reading primitives (spec/runtime.md §5.2): the outline, one artifact, the rosters, a type's spec.
Plain calls whose results may also be awaited.
"""

from __future__ import annotations

import difflib
import json

from sleuth.sdk.base import KnowledgeBase
from sleuth.sdk.errors import NotFoundError
from sleuth.sdk.primitives import (
    ArtifactName,
    TypeName,
    primitive,
)
from sleuth.sdk.types import (
    Artifact,
    ArtifactRef,
    AwaitableList,
    Column,
    Edge,
    Roster,
    TypeSpec,
)


class Reads(KnowledgeBase):
    """The artifacts as compiled: what there is, one by name, the "all X" rosters, a type."""

    # ------------------------------------------------------------------------------ reads
    @primitive("read")
    def outline_knowledge(
        self, type: str | None = None, scope: str | None = None, context: str | None = None
    ) -> list[ArtifactRef]:
        """Every artifact (name, type, kind, scope), optionally filtered by type or scope
        ("document" | "corpus" | "index")."""
        out: AwaitableList[ArtifactRef] = AwaitableList()
        for ctx in self._scope(context):
            for aid, a in ctx.artifacts.items():
                if (type is None or a["type"].casefold() == type.casefold()) and scope in (None, a["scope"]):
                    out.append(self._ref(ctx, aid))
            if scope in (None, "index"):
                for roster in self._rosters(ctx):
                    if type is None or (roster.type or "").casefold() == type.casefold():
                        out.append(
                            ArtifactRef(
                                roster.name,
                                roster.type or "_sources",
                                "roster",
                                "index",
                                ctx.slug,
                                roster.count,
                            )
                        )
        return out

    @primitive("read")
    def read_artifact(self, name: ArtifactName, context: str | None = None) -> Artifact:
        """One artifact by name (exact, then case-insensitive, then slug); edges in both directions."""
        ctx, aid = self._find_artifact(name, context)
        meta = ctx.artifacts[aid]
        front, body = ctx.read_file(aid)
        provenance = [
            self._register_span(ctx, p, "artifact", meta["name"]) for p in front.get("provenance") or []
        ]
        edges = [
            Edge(
                e["type"],
                meta["name"],
                e["to"],
                "out",
                dict(e.get("attributes") or {}),
                self._register_span(ctx, e["evidence"], "artifact", meta["name"])
                if e.get("evidence")
                else None,
            )
            for e in front.get("edges") or []
        ]
        _cols, rows, _ = self._db(ctx).execute(
            'SELECT type, from_name, attributes, source, page, start, "end" FROM _edges WHERE to_id = ?',
            [aid],
        )
        for etype, from_name, attributes, source, page, start, end in rows:
            evidence = None
            if source is not None:
                evidence = self._register_span(
                    ctx,
                    {"source": source, "page": page, "start": start, "end": end},
                    "artifact",
                    meta["name"],
                )
            edges.append(Edge(etype, from_name, meta["name"], "in", json.loads(attributes or "{}"), evidence))
        return Artifact(
            aid,
            meta["name"],
            meta["type"],
            meta["kind"],
            meta["scope"],
            ctx.slug,
            body.strip("\n"),
            dict(front.get("fields") or {}),
            edges,
            list(front.get("sources") or []),
            provenance,
        )

    @primitive("read")
    def read_rosters(self, type: str | None = None, context: str | None = None) -> list[Roster]:
        """'All X' rosters: one per artifact type, plus 'All Sources'. First stop for list-every questions."""
        out: AwaitableList[Roster] = AwaitableList()
        for ctx in self._scope(context):
            for roster in self._rosters(ctx):
                if type is None or (roster.type or "").casefold() == type.casefold():
                    out.append(roster)
        if type is not None and not out:
            known = sorted({r.type for ctx in self._scope(context) for r in self._rosters(ctx) if r.type})
            raise NotFoundError(f"no roster for type {type!r}; types: {', '.join(known) or 'none'}")
        return out

    @primitive("read")
    def describe_type(self, name: TypeName, context: str | None = None) -> TypeSpec:
        """The manifest spec of an artifact type, its edge types, table and count."""
        for ctx in self._scope(context):
            for t in ctx.types():
                if t["name"].casefold() != name.casefold():
                    continue
                edges = [
                    e
                    for e in ctx.manifest["curate"]["artifacts"]["edge_types"]
                    if name.casefold() in (e["from"].casefold(), e["to"].casefold())
                ]
                count = sum(1 for a in ctx.artifacts.values() if a["type"] == t["name"])
                table = None
                if t["format"] == "sqlite":
                    typed = next((tb for tb in self._tables(ctx) if tb.type == t["name"]), None)
                    table = typed.name if typed is not None else None
                    count = typed.row_count if typed is not None else 0
                scope = t.get("scope") or ("document" if t["kind"] in ("doc", "page") else "corpus")
                return TypeSpec(
                    t["name"],
                    t["kind"],
                    scope,
                    t["format"],
                    t.get("description") or "",
                    list(t.get("coverage") or []),
                    list(t.get("sections") or []),
                    [
                        Column(c["name"], c["type"], c.get("description") or "")
                        for c in t.get("columns") or []
                    ],
                    list(t.get("natural_key") or []),
                    edges,
                    count,
                    table,
                    ctx.slug,
                )
        known = [t["name"] for ctx in self._scope(context) for t in ctx.types()]
        close = difflib.get_close_matches(name, known, n=5, cutoff=0.3)
        raise NotFoundError(
            f"no artifact type {name!r}; types: {', '.join(known) or 'none'}"
            + (f" (closest: {', '.join(close)})" if close else "")
        )
