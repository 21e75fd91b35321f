"""The primitives over a context's SQLite database: SQL, tables, the artifact graph and facts
(spec/runtime.md §5.2).
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping, Sequence
from typing import Any

from sleuth.sdk.base import KnowledgeBase
from sleuth.sdk.errors import NotFoundError, QueryError
from sleuth.sdk.primitives import (
    ArtifactName,
    FactKey,
    MaxHops,
    Sql,
    primitive,
)
from sleuth.sdk.scoped import ScopedReader
from sleuth.sdk.types import (
    AwaitableDict,
    AwaitableList,
    Edge,
    Graph,
    Rows,
    SelfAwaitable,
    Table,
)

MAX_GRAPH_NODES = 200  # walk_graph stops adding nodes here (the graph says truncated)


class Tables(KnowledgeBase):
    """Read-only SQL, the tables, the graph of typed edges and cheap statistics."""

    # ---------------------------------------------------------------------------- structured
    @primitive("read", "structured")
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
            elif _is_span(record) and record["end"] <= len(
                ctx.reader.page_text(record["source"], record["page"]) or ""
            ):
                # a row that says where it is (`_cells`, `_edges`, `_glossary`): its span is citable
                record["_evidence"] = self._register_span(ctx, record, "table", None).ref
            out.append(record)
        return Rows(out, columns, truncated, sql, (time.perf_counter() - began) * 1000)

    @primitive("read", "structured")
    def list_tables(self, context: str | None = None) -> list[Table]:
        """Tables with their columns, types and row counts."""
        out: AwaitableList[Table] = AwaitableList()
        for ctx in self._scope(context):
            out.extend(self._tables(ctx))
        return out

    @primitive("read", "graph")
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

    @primitive("read", "facts")
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

    def _fact(self, ctx: ScopedReader, key: str) -> Any:
        info = ctx.reader.info
        counts = info.counts
        facts: dict[str, Any] = {
            "artifact_count": counts["artifacts"],
            "source_count": counts["sources_compiled"],
            "page_count": counts["pages"],
            "chunk_count": counts["chunks"],
            "artifacts_by_type": dict(counts["artifacts_by_type"]),
            "rows_by_table": dict(counts["rows_by_table"]),
            "curated_at": info.flipped_at,
            "live_version": info.version,
            "sample_queries": list(info.sample_queries),
        }
        return facts[key]


class _AwaitableInt(int, SelfAwaitable):
    pass


class _AwaitableStr(str, SelfAwaitable):
    pass


def _is_span(record: Mapping[str, Any]) -> bool:
    return (
        isinstance(record.get("source"), str)
        and all(isinstance(record.get(k), int) for k in ("page", "start", "end"))
        and 0 <= record["start"] <= record["end"]
    )


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
