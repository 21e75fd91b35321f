"""The retrieval primitives over one pinned version per scoped context (runtime.md §5).

`Knowledge` is what the REPL binds: each method marked `@primitive` is one primitive, declared there
once (its signature, bounds and docstring; see `sdk/primitives.py`). Searches are coroutines
(blocking index work runs in a thread, so `asyncio.gather` overlaps them); reads are plain calls
whose results may also be awaited. Every span returned gets a per-turn evidence label (`E1`, `E2`,
…) that stays the same when the span comes back again.
"""

from __future__ import annotations

import asyncio
import difflib
import json
import re
import time
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any, NoReturn

import numpy as np
import numpy.typing as npt

from sleuth.format.front_matter import read_front_matter
from sleuth.format.names import slugify
from sleuth.sdk.errors import AmbiguousError, LimitError, NotFoundError, QueryError
from sleuth.sdk.primitives import (
    ArtifactName,
    DocType,
    FactKey,
    Issuer,
    MaxHops,
    MaxTotal,
    Queries,
    Query,
    RankBy,
    SourcePaths,
    Sql,
    TopK,
    TypeName,
    Year,
    check,
    primitive,
    primitives,
)
from sleuth.sdk.sql import ReadOnlyDatabase
from sleuth.sdk.types import (
    Artifact,
    ArtifactRef,
    AwaitableDict,
    AwaitableList,
    Column,
    Edge,
    Graph,
    Hit,
    Roster,
    RosterEntry,
    Rows,
    SelfAwaitable,
    Span,
    Table,
    TypeSpec,
)
from sleuth.store.search import VersionReader, rrf

QueryEmbedder = Callable[[str, str], Awaitable[npt.NDArray[np.float32]]]
"""(model id, query text) → unit vector; inside the sandbox this is the `embed` host function."""

MAX_GRAPH_NODES = 200
_TABLE_ROW = re.compile(r"^\|(.+)\|\s*$")


class FinalAnswer(BaseException):
    """Raised by `final()`; a BaseException so `except Exception` in model code cannot swallow it."""

    def __init__(self, answer: str | None, evidence: list[str]) -> None:
        super().__init__(answer)
        self.answer = answer
        self.evidence = evidence


@dataclass(frozen=True)
class ScopedContext:
    slug: str
    version_dir: Path


class Evidence:
    """Per-turn evidence labels: the same (context, source, page, start, end) keeps its label."""

    def __init__(self) -> None:
        self._labels: dict[tuple[str, str, int, int, int], Span] = {}
        self.scores: dict[str, float] = {}  # label → best retrieval score seen (Citation.score)

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
            f"E{len(self._labels) + 1}",
            context,
            source_path,
            page,
            start,
            end,
            text,
            section_path,
            via,
            artifact_name,
        )
        self._labels[key] = span
        return span

    def get(self, label: str) -> Span | None:
        return next((s for s in self._labels.values() if s.ref == label), None)

    def all(self) -> list[Span]:
        return list(self._labels.values())


class _Context:
    """One scoped context: its reader, manifest, artifacts and tables."""

    def __init__(self, scoped: ScopedContext) -> None:
        self.slug = scoped.slug
        self.reader = VersionReader(scoped.version_dir)
        self.root = scoped.version_dir

    @cached_property
    def manifest(self) -> dict[str, Any]:
        manifest: dict[str, Any] = self.reader.meta["manifest"]
        return manifest

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
        return read_front_matter(text), text.split("\n---\n", 1)[1] if "\n---\n" in text else text


class Knowledge:
    """The SDK bound into one turn's REPL, over 1-10 scoped contexts."""

    def __init__(self, contexts: Sequence[ScopedContext], embed: QueryEmbedder | None = None) -> None:
        if not 1 <= len(contexts) <= 10:
            raise LimitError("a turn reads 1 to 10 contexts")
        self._contexts = {c.slug: _Context(c) for c in contexts}
        self._embed = embed
        self.evidence = Evidence()
        self._databases: dict[str, ReadOnlyDatabase] = {}

    # ---------------------------------------------------------------------------- helpers
    def _scope(self, context: str | None) -> list[_Context]:
        if context is None:
            return list(self._contexts.values())
        if context not in self._contexts:
            close = difflib.get_close_matches(context, list(self._contexts), n=5, cutoff=0.3)
            raise NotFoundError(
                f"context {context!r} is not in this turn's scope; in scope: "
                f"{', '.join(self._contexts)}" + (f" (closest: {', '.join(close)})" if close else "")
            )
        return [self._contexts[context]]

    async def _vector(self, ctx: _Context, query: str) -> npt.NDArray[np.float32] | None:
        if not ctx.reader.meta["embedder"].get("enabled", True):
            return None
        model = ctx.reader.meta["embedder"]["id"]
        if self._embed is not None:
            return await self._embed(model, query)
        return await asyncio.to_thread(ctx.reader.embed_query, query)

    def _chunk_hit(
        self, ctx: _Context, chunk_id: str, score: float, via: str = "chunk", artifact: str | None = None
    ) -> Hit:
        c = ctx.reader.chunks[chunk_id]
        span = self.evidence.register(
            ctx.slug, c.source_path, c.page, c.start, c.end, c.text, c.section_path, via, artifact
        )
        self.evidence.note_score(span, score)
        return Hit.from_span(chunk_id, score, "chunk", span)

    def _artifact_hit(self, ctx: _Context, artifact_id: str, score: float) -> Hit:
        meta = ctx.artifacts[artifact_id]
        front, body = ctx.read_file(artifact_id)
        return Hit(
            id=artifact_id,
            score=score,
            kind="artifact",
            name=meta["name"],
            context=ctx.slug,
            fields=dict(front.get("fields") or {}),
            type=meta["type"],
            artifact_kind=meta["kind"],
            scope=meta["scope"],
            sources=list(front.get("sources") or []),
            snippet=body[:300],
        )

    def _fuse(self, per_context: list[list[Hit]], top_k: int) -> list[Hit]:
        """Reciprocal-rank fusion of hit lists (one per context, or one per query)."""
        if len(per_context) == 1:
            return per_context[0][:top_k]
        by_key = {(h.context, h.id): h for hits in per_context for h in hits}
        fused = rrf([[f"{h.context}\x1f{h.id}" for h in hits] for hits in per_context])
        out: list[Hit] = []
        for key, score in fused[:top_k]:
            slug, hit_id = key.split("\x1f", 1)
            hit = by_key[(slug, hit_id)]
            out.append(Hit(**{**hit.__dict__, "score": score}))
        return out

    def _find_artifact(self, name: str, context: str | None) -> tuple[_Context, str]:
        matches: list[tuple[_Context, str]] = []
        for match in (
            lambda a: a["name"] == name,
            lambda a: a["name"].casefold() == name.casefold(),
            lambda a: slugify(a["name"]) == slugify(name),
        ):
            matches = [
                (ctx, aid) for ctx in self._scope(context) for aid, a in ctx.artifacts.items() if match(a)
            ]
            if matches:
                break
        if len(matches) == 1:
            return matches[0]
        if matches:
            where = "; ".join(f"{ctx.artifacts[aid]['type']} in context={ctx.slug!r}" for ctx, aid in matches)
            raise AmbiguousError(
                f"{name!r} names {len(matches)} artifacts ({where}); pass context= or use the exact name"
            )
        names = [a["name"] for ctx in self._scope(context) for a in ctx.artifacts.values()]
        close = difflib.get_close_matches(name, names, n=5, cutoff=0.4)
        hint = f"; closest: {', '.join(repr(c) for c in close)}" if close else ""
        raise NotFoundError(f"no artifact named {name!r}{hint}")

    def _ref(self, ctx: _Context, artifact_id: str) -> ArtifactRef:
        a = ctx.artifacts[artifact_id]
        return ArtifactRef(a["name"], a["type"], a["kind"], a["scope"], ctx.slug, a["sources_count"])

    def _db(self, ctx: _Context) -> ReadOnlyDatabase:
        if ctx.slug not in self._databases:
            others = {
                slug.replace("-", "_"): c.root / "tables.sqlite"
                for slug, c in self._contexts.items()
                if slug != ctx.slug
            }
            self._databases[ctx.slug] = ReadOnlyDatabase(ctx.root / "tables.sqlite", attach=others)
        return self._databases[ctx.slug]

    def close(self) -> None:
        for db in self._databases.values():
            db.close()

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

    def _register_span(self, ctx: _Context, p: Mapping[str, Any], via: str, artifact: str | None) -> Span:
        source, page, start, end = p["source"], int(p["page"]), int(p["start"]), int(p["end"])
        text = ctx.reader.page_text(source, page) or ""
        return self.evidence.register(ctx.slug, source, page, start, end, text[start:end], [], via, artifact)

    def _rosters(self, ctx: _Context) -> list[Roster]:
        rosters: list[Roster] = []
        directory = ctx.root / "knowledge" / "rosters"
        for path in sorted(directory.glob("*.md")) if directory.is_dir() else []:
            text = path.read_text("utf-8")
            front = read_front_matter(text)
            body = text.split("\n---\n", 1)[1] if "\n---\n" in text else text
            entries = []
            for line in body.splitlines()[2:]:
                match = _TABLE_ROW.match(line)
                if match and not line.startswith("|---"):
                    cells = [c.strip().replace("\\|", "|") for c in re.split(r"(?<!\\)\|", match.group(1))]
                    if cells and cells[0] not in ("Name", "Path"):
                        entries.append(
                            RosterEntry(
                                cells[0],
                                cells[1] if len(cells) > 1 else "",
                                [s.strip() for s in cells[-1].split(",")] if len(cells) > 2 else [],
                            )
                        )
            roster_type = front.get("type")
            rosters.append(
                Roster(
                    str(front.get("name", path.stem)),
                    None if roster_type == "_sources" else roster_type,
                    int(front.get("count", len(entries))),
                    AwaitableList(entries),
                    body,
                    ctx.slug,
                )
            )
        return rosters

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
                    table = next((tb.name for tb in self.list_tables(ctx.slug) if tb.type == t["name"]), None)
                    count = next(
                        (tb.row_count for tb in self.list_tables(ctx.slug) if tb.type == t["name"]), 0
                    )
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

    # ---------------------------------------------------------------------------- searches
    @primitive("search")
    async def search_knowledge(
        self,
        query: Query,
        top_k: TopK = 10,
        kind: str | None = None,
        type: str | None = None,
        context: str | None = None,
    ) -> list[Hit]:
        """Hybrid search over artifacts; kind in summary|topic|entity|event|doc|page|glossary."""
        per_context = []
        for ctx in self._scope(context):
            vector = await self._vector(ctx, query)
            ranked = await asyncio.to_thread(ctx.reader.search_artifacts, query, top_k, kind, type, vector)
            per_context.append([self._artifact_hit(ctx, aid, score) for aid, score in ranked])
        return AwaitableList(self._fuse(per_context, top_k))

    async def _search_chunks(
        self,
        query: str,
        top_k: int,
        mode: str,
        context: str | None,
        sources: Sequence[str] | None = None,
        where: Mapping[str, Any] | None = None,
    ) -> list[Hit]:
        per_context = []
        for ctx in self._scope(context):
            keep = None if sources is None else [s for s in sources if s in ctx.sources]
            if where:
                matching = ctx.reader.sources_where(**where)
                keep = matching if keep is None else [s for s in keep if s in matching]
            if keep is not None and not keep:
                continue
            vector, keyword = None, None
            if mode == "hybrid":  # BM25 runs while the query is embedded (on the host, in a turn)
                vector, keyword = await asyncio.gather(
                    self._vector(ctx, query),
                    asyncio.to_thread(ctx.reader.keyword_candidates, query, top_k, keep),
                )
            elif mode == "semantic":
                vector = await self._vector(ctx, query)
            hits = await asyncio.to_thread(ctx.reader.search, query, top_k, mode, keep, vector, keyword)  # type: ignore[arg-type]
            per_context.append([self._chunk_hit(ctx, h.id, h.score) for h in hits])
        return self._fuse(per_context, top_k) if per_context else []

    @primitive("search")
    async def search_source(
        self,
        query: Query,
        top_k: TopK = 10,
        context: str | None = None,
        *,
        sources: Sequence[str] | None = None,
        issuer: Issuer = None,
        doc_type: DocType = None,
        year: Year = None,
    ) -> list[Hit]:
        """Hybrid search over source chunks: what the documents say. The document a question names
        ranks first by itself; `sources` (paths), `issuer` (a substring), `doc_type` ("annual report",
        "policy", …) and `year` restrict the search to the documents that match (see `_sources`)."""
        where = _where(issuer, doc_type, year)
        return AwaitableList(await self._search_chunks(query, top_k, "hybrid", context, sources, where))

    @primitive("search")
    async def search_source_by_keyword(
        self,
        query: Query,
        top_k: TopK = 10,
        context: str | None = None,
        *,
        sources: Sequence[str] | None = None,
        issuer: Issuer = None,
        doc_type: DocType = None,
        year: Year = None,
    ) -> list[Hit]:
        """BM25 only, for exact identifiers, codes and phrases. May return []. Filters as in
        `search_source`."""
        for ctx in self._scope(context):
            if not ctx.reader.meta.get("keyword", True):
                raise QueryError(
                    f"context {ctx.slug!r} was compiled without a keyword index "
                    "(curate.chunks.keyword.enabled = false); use search_source"
                )
        where = _where(issuer, doc_type, year)
        return AwaitableList(await self._search_chunks(query, top_k, "keyword", context, sources, where))

    @primitive("search")
    async def search_in_sources(
        self,
        sources: SourcePaths,
        query: Queries,
        max_total: MaxTotal = 20,
        context: str | None = None,
    ) -> list[Hit]:
        """Hybrid search restricted to the chunks of the given source paths (e.g. Artifact.sources).
        Several queries are searched separately and fused."""
        paths = [sources] if isinstance(sources, str) else list(sources)
        queries = [query] if isinstance(query, str) else list(query)
        if not queries:
            raise LimitError("query must name at least one query string")
        for q in queries:
            check("query", q, Query)
        lists = [await self._search_chunks(q, max_total, "hybrid", context, paths) for q in queries]
        return AwaitableList(self._fuse(lists, max_total))

    @primitive("search")
    async def cite_from_artifact(
        self,
        name: ArtifactName,
        queries: RankBy = None,
        max_total: MaxTotal = 8,
        context: str | None = None,
    ) -> list[Hit]:
        """Verbatim, citable spans behind an artifact: its provenance quotes (ranked against `queries`
        when given), then matching chunks of its sources."""
        ctx, aid = self._find_artifact(name, context)
        meta = ctx.artifacts[aid]
        front, _body = ctx.read_file(aid)
        wanted = [queries] if isinstance(queries, str) else list(queries or [])
        terms = {t for q in wanted for t in re.findall(r"\w+", q.casefold()) if len(t) > 2}
        provenance = list(front.get("provenance") or [])
        if terms:
            provenance.sort(key=lambda p: -len(terms & set(re.findall(r"\w+", p["quote"].casefold()))))
        out: list[Hit] = []
        for p in provenance[:max_total]:
            span = self._register_span(ctx, p, "artifact", meta["name"])
            self.evidence.note_score(span, 1.0)
            out.append(Hit.from_span(aid, 1.0, "provenance", span))
        if wanted and len(out) < max_total:
            for q in wanted:
                check("query", q, Query)
            sources = list(front.get("sources") or [])
            for hit in await self._search_chunks(" ".join(wanted), max_total, "hybrid", ctx.slug, sources):
                if len(out) >= max_total:
                    break
                c = ctx.reader.chunks[hit.id]
                span = self.evidence.register(
                    ctx.slug,
                    c.source_path,
                    c.page,
                    c.start,
                    c.end,
                    c.text,
                    c.section_path,
                    "artifact",
                    meta["name"],
                )
                out.append(Hit(**{**hit.__dict__, "artifact": meta["name"], "span_": span}))
        return AwaitableList(out)

    # ---------------------------------------------------------------------------- structured
    @primitive("read")
    def query_db(
        self, sql: Sql, params: Sequence[Any] | Mapping[str, Any] | None = None, context: str | None = None
    ) -> Rows:
        """Read-only SQL (SQLite dialect) over the typed tables and system tables."""
        if not isinstance(sql, str) or not sql.strip():
            raise QueryError("sql must be a non-empty string")
        ctx = self._scope(context)[0]
        db = self._db(ctx)
        began = time.perf_counter()
        try:
            columns, rows, truncated = db.execute(sql, params)
        except QueryError as exc:
            schema = "; ".join(f"{t}({', '.join(c for c, _ in cols)})" for t, cols in db.schema().items())
            raise QueryError(
                f"{exc}. Tables: {schema[:1500]}. Tip: query_db holds table data only; to "
                "find what documents say, use search_source(...)"
            ) from None
        out = []
        for row in rows:
            record = dict(zip(columns, row, strict=True))
            if isinstance(record.get("_provenance"), str):
                spans = json.loads(record["_provenance"])
                record["_provenance"] = [self._register_span(ctx, p, "table", None).ref for p in spans]
            out.append(record)
        return Rows(out, columns, truncated, sql, (time.perf_counter() - began) * 1000)

    @primitive("read")
    def list_tables(self, context: str | None = None) -> list[Table]:
        """Tables with their columns, types and row counts."""
        out: AwaitableList[Table] = AwaitableList()
        for ctx in self._scope(context):
            db = self._db(ctx)
            declared = {
                name: (type_name, json.loads(cols), json.loads(key))
                for name, type_name, cols, key in db.execute(
                    "SELECT name, type, columns, natural_key FROM _tables"
                )[1]
            }
            for name, cols in db.schema().items():
                count = db.execute(f'SELECT count(*) FROM "{name}"')[1][0][0]
                type_name, described, key = declared.get(name, (None, [], []))
                notes = {c["name"].lower().replace(" ", "_"): c.get("description") or "" for c in described}
                out.append(
                    Table(
                        name,
                        type_name,
                        [Column(c, t, notes.get(c, "")) for c, t in cols],
                        count,
                        [k.lower().replace(" ", "_") for k in key],
                        ctx.slug,
                    )
                )
        return out

    @primitive("read")
    def walk_graph(
        self,
        name: ArtifactName,
        max_hops: MaxHops = 2,
        edge_types: Sequence[str] | None = None,
        context: str | None = None,
    ) -> Graph:
        """Subgraph around an artifact, following edges in both directions, up to max_hops."""
        ctx, start = self._find_artifact(name, context)
        db = self._db(ctx)
        seen, frontier, edges, truncated = {start}, [start], [], False
        for _hop in range(max_hops):
            following = []
            for node in frontier:
                rows = db.execute(
                    "SELECT from_id, from_name, type, to_id, to_name, attributes, source, page, "
                    'start, "end" FROM _edges WHERE from_id = ? OR to_id = ?',
                    [node, node],
                )[1]
                for from_id, from_name, etype, to_id, to_name, attributes, source, page, s, e in rows:
                    if edge_types is not None and etype not in edge_types:
                        continue
                    other = to_id if from_id == node else from_id
                    evidence = (
                        None
                        if source is None
                        else self._register_span(
                            ctx, {"source": source, "page": page, "start": s, "end": e}, "artifact", from_name
                        )
                    )
                    edge = Edge(
                        etype,
                        from_name,
                        to_name,
                        "out" if from_id == node else "in",
                        json.loads(attributes or "{}"),
                        evidence,
                    )
                    if edge not in edges:
                        edges.append(edge)
                    if other not in seen and other in ctx.artifacts:
                        if len(seen) >= MAX_GRAPH_NODES:
                            truncated = True
                            continue
                        seen.add(other)
                        following.append(other)
            frontier = following
        return Graph(
            self._ref(ctx, start),
            AwaitableList([self._ref(ctx, n) for n in seen]),
            AwaitableList(edges),
            truncated,
        )

    @primitive("read")
    def get_fact(self, key: FactKey, context: str | None = None) -> Any:
        """Cheap statistics: artifact_count, source_count, page_count, chunk_count, artifacts_by_type,
        rows_by_table, curated_at, live_version, sample_queries. With several contexts in scope and
        context=None the value is {slug: value}."""
        facts = (
            "artifact_count",
            "source_count",
            "page_count",
            "chunk_count",
            "artifacts_by_type",
            "rows_by_table",
            "curated_at",
            "live_version",
            "sample_queries",
        )
        if key not in facts:
            raise NotFoundError(f"no fact {key!r}; facts: {', '.join(facts)}")
        values = {ctx.slug: self._fact(ctx, key) for ctx in self._scope(context)}
        if len(values) == 1:
            return _awaitable(next(iter(values.values())))
        return AwaitableDict(values)

    def _fact(self, ctx: _Context, key: str) -> Any:
        meta = ctx.reader.meta
        counts = meta["counts"]
        facts: dict[str, Any] = {
            "artifact_count": counts["artifacts"],
            "source_count": counts["sources_compiled"],
            "page_count": counts["pages"],
            "chunk_count": counts["chunks"],
            "artifacts_by_type": dict(counts["artifacts_by_type"]),
            "rows_by_table": dict(counts["rows_by_table"]),
            "curated_at": meta["flipped_at"],
            "live_version": meta["version"],
            "sample_queries": list(meta.get("sample_queries", [])),
        }
        return facts[key]

    # ---------------------------------------------------------------------------- loop control
    def final(
        self, answer: str | None = None, evidence: Iterable[Hit | Span | str] | None = None
    ) -> NoReturn:
        """End the loop. `answer` is a draft for synthesis; `evidence` lists hits, spans or labels
        ("E7") to cite first. Raises a BaseException so `except Exception` cannot swallow it."""
        labels: list[str] = []
        for item in evidence or []:
            label = item if isinstance(item, str) else item.ref
            if label is None or self.evidence.get(label) is None:
                known = [s.ref for s in self.evidence.all()]
                hint = (
                    f"labels so far: {', '.join(known[:30])}{' …' if len(known) > 30 else ''}"
                    if known
                    else "no spans have been returned yet (query_db counts carry none)"
                )
                raise LimitError(
                    f"{item!r} is not an evidence label of this turn; {hint}. "
                    "Call final() with known labels, or with no evidence to answer from the printed results."
                )
            labels.append(label)
        raise FinalAnswer(answer, labels)


def _where(issuer: str | None, doc_type: str | None, year: int | None) -> dict[str, Any]:
    """The document filters a search names, checked (a wrong type is the model's error to read)."""
    # issuer and doc_type are strings by their declaration (`primitives.Issuer`, `DocType`)
    if year is not None and (not isinstance(year, int) or isinstance(year, bool)):
        raise QueryError("year must be an integer such as 2023")
    return {k: v for k, v in (("issuer", issuer), ("doc_type", doc_type), ("year", year)) if v is not None}


class _AwaitableInt(int, SelfAwaitable):
    pass


class _AwaitableStr(str, SelfAwaitable):
    pass


def _awaitable(value: Any) -> Any:
    if isinstance(value, bool) or value is None:
        return value
    if isinstance(value, int):
        return _AwaitableInt(value)
    if isinstance(value, str):
        return _AwaitableStr(value)
    if isinstance(value, dict):
        return AwaitableDict(value)
    if isinstance(value, list):
        return AwaitableList(value)
    return value


PRIMITIVES = tuple(item.name for item in primitives())
"""The SDK's public calls, in the order of runtime.md §5.2 (declared by `@primitive`)."""
