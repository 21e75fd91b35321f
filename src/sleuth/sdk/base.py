"""What every primitive shares: the turn's scoped contexts, their readers and databases, the query
embedder, the evidence labels, and the helpers that turn index rows into hits.
"""

from __future__ import annotations

import asyncio
import difflib
import json
import re
from collections.abc import Awaitable, Callable, Hashable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from sleuth.format.front_matter import read_front_matter
from sleuth.format.names import slugify
from sleuth.format.spans import Provenance
from sleuth.sdk.errors import AmbiguousError, LimitError, NotFoundError
from sleuth.sdk.matches import find_match
from sleuth.sdk.scoped import Evidence, ScopedContext, ScopedReader
from sleuth.sdk.sql import ReadOnlyDatabase, SqlDatabase
from sleuth.sdk.types import (
    ArtifactRef,
    AwaitableList,
    Column,
    Hit,
    Roster,
    RosterEntry,
    Span,
    Table,
)
from sleuth.store.version.fusion import distinct, rrf

QueryEmbedder = Callable[[str, str], Awaitable[npt.NDArray[np.float32]]]
"""(model id, query text) → unit vector; inside the sandbox this is the `embed` host function."""

DatabaseOpener = Callable[[Path, Mapping[str, Path]], SqlDatabase]
"""(tables.sqlite, the other contexts' to attach by name) → a connection. In a sandbox, this process's
own (`ReadOnlyDatabase`); in a server answering a client, a killable statement process
(`sql_process.IsolatedDatabase`)."""


_TABLE_ROW = re.compile(r"^\|(.+)\|\s*$")


class KnowledgeBase:
    """The state of one turn's SDK; the primitives (`Reads`, `Searches`, `Tables`) build on it."""

    def __init__(
        self,
        contexts: Sequence[ScopedContext],
        embed: QueryEmbedder | None = None,
        databases: DatabaseOpener = ReadOnlyDatabase,
    ) -> None:
        if not 1 <= len(contexts) <= 10:
            raise LimitError("a turn reads 1 to 10 contexts")
        self._contexts = {c.slug: ScopedReader(c) for c in contexts}
        self._embed = embed
        self.evidence = Evidence()
        self._open_database = databases
        self._databases: dict[str, SqlDatabase] = {}

    # ---------------------------------------------------------------------------- helpers
    def _scope(self, context: str | None) -> list[ScopedReader]:
        if context is None:
            return list(self._contexts.values())
        if context not in self._contexts:
            close = difflib.get_close_matches(context, list(self._contexts), n=5, cutoff=0.3)
            raise NotFoundError(
                f"context {context!r} is not in this turn's scope; in scope: "
                f"{', '.join(self._contexts)}" + (f" (closest: {', '.join(close)})" if close else "")
            )
        return [self._contexts[context]]

    async def _vector(self, ctx: ScopedReader, query: str) -> npt.NDArray[np.float32] | None:
        embedder = ctx.reader.info.embedder
        if not embedder.enabled:
            return None
        if embedder.id is None:
            raise LookupError(f"context {ctx.slug!r}: its version names no embedder")
        if self._embed is not None:
            return await self._embed(embedder.id, query)
        return await asyncio.to_thread(ctx.reader.embed_query, query)

    def _chunk_hit(
        self,
        ctx: ScopedReader,
        chunk_id: str,
        score: float,
        via: str = "chunk",
        artifact: str | None = None,
        *,
        query: str | None = None,
        phrases: Sequence[str] = (),
        why: dict[str, float] | None = None,
    ) -> Hit:
        """A chunk's hit, its text as a reader reads it; a search's (`query`, and the `phrases` it
        required word for word) also says where it matched (`sdk.matches`), and `why` it ranked there."""
        c = ctx.reader.chunks[chunk_id]
        span = self.evidence.register(
            ctx.slug, c.source_path, c.page, c.start, c.end, c.text, c.heading_path, via, artifact
        )
        self.evidence.note_score(span, score)
        return self._span_hit(ctx, chunk_id, score, "chunk", span, c.table_header, query, phrases, why)

    def _span_hit(
        self,
        ctx: ScopedReader,
        hit_id: str,
        score: float,
        kind: str,
        span: Span,
        table_header: str | None = None,
        query: str | None = None,
        phrases: Sequence[str] = (),
        why: dict[str, float] | None = None,
    ) -> Hit:
        """A hit of a span: the text a model reads is the reader's form of it (`read_span`; a span
        that is only page furniture reads as it is: a hit never shows nothing); the match is found
        in that text, so its offsets are offsets into `Hit.chunk_text`."""
        read = ctx.reader.read_span(span.source_path, span.page, span.start, span.end, span.text)
        text = read or span.text
        found = find_match(text, query, phrases) if query is not None or phrases else None
        return Hit.from_span(hit_id, score, kind, span, table_header, text=text, found=found, why=why)

    def _artifact_hit(
        self,
        ctx: ScopedReader,
        artifact_id: str,
        score: float,
        read: tuple[dict[str, Any], str] | None = None,
    ) -> Hit:
        """An artifact's hit; `read` is its file (`ScopedReader.read_file`) when the caller has it."""
        meta = ctx.artifacts[artifact_id]
        front, body = read if read is not None else ctx.read_file(artifact_id)
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
        """Reciprocal-rank fusion of hit lists (one per context, or one per query), without the chunks
        that repeat one above them (`store.search.distinct`). The order is the fusion's; each hit
        keeps its own score, on its mode's scale (`store.search.VersionReader.search`),
        so a score means the same whether one context was searched or several."""
        if len(per_context) == 1:
            return per_context[0][:top_k]
        by_key = {(h.context, h.id): h for hits in per_context for h in hits}
        fused = rrf([[f"{h.context}\x1f{h.id}" for h in hits] for hits in per_context])
        out: list[Hit] = []
        for key, _score in fused:
            slug, hit_id = key.split("\x1f", 1)
            out.append(by_key[(slug, hit_id)])
        return distinct(out, _place, top_k)  # several queries' lists may bring overlapping chunks

    def _find_artifact(self, name: str, context: str | None) -> tuple[ScopedReader, str]:
        matches: list[tuple[ScopedReader, str]] = []
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

    def _ref(self, ctx: ScopedReader, artifact_id: str) -> ArtifactRef:
        a = ctx.artifacts[artifact_id]
        return ArtifactRef(a["name"], a["type"], a["kind"], a["scope"], ctx.slug, a["sources_count"])

    def _db(self, ctx: ScopedReader) -> SqlDatabase:
        if ctx.slug not in self._databases:
            others = {
                slug.replace("-", "_"): c.root / "tables.sqlite"
                for slug, c in self._contexts.items()
                if slug != ctx.slug
            }
            self._databases[ctx.slug] = self._open_database(ctx.root / "tables.sqlite", others)
        return self._databases[ctx.slug]

    def _tables(self, ctx: ScopedReader) -> list[Table]:
        """The tables of one context's database, with their columns, types and row counts."""
        db = self._db(ctx)
        declared = {
            name: (type_name, json.loads(cols), json.loads(key))
            for name, type_name, cols, key in db.execute(
                "SELECT name, type, columns, natural_key FROM _tables"
            )[1]
        }
        out = []
        for name, cols in db.schema().items():
            # `_cells` is a view: its rows are the rows of `_cells_values`, counted without the joins
            counted = "_cells_values" if name == "_cells" else name
            count = db.execute(f'SELECT count(*) FROM "{counted}"')[1][0][0]
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

    def close(self) -> None:
        for db in self._databases.values():
            db.close()

    def _register_span(self, ctx: ScopedReader, p: Mapping[str, Any], via: str, artifact: str | None) -> Span:
        at = Provenance.from_json(p)
        text = ctx.reader.page_text(at.source_path, at.page) or ""
        return self.evidence.register(
            ctx.slug, at.source_path, at.page, at.start, at.end, text[at.start : at.end], [], via, artifact
        )

    def _rosters(self, ctx: ScopedReader) -> list[Roster]:
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


def _place(hit: Hit) -> tuple[Hashable, int, int]:
    """Where a hit's text is: its page and span (an artifact hit is a place of its own)."""
    if hit.source_path is None or hit.page is None or hit.start is None or hit.end is None:
        return (hit.context, hit.id), 0, 0
    return (hit.context, hit.source_path, hit.page), hit.start, hit.end
