"""The searching primitives (spec/runtime.md §5.2): hybrid, semantic and keyword search over chunks and
artifacts. Each is a coroutine: blocking index work runs in a thread, so `asyncio.gather` overlaps
searches.
"""

from __future__ import annotations

import asyncio
import itertools
import re
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

from sleuth.format.text import folded
from sleuth.sdk.base import KnowledgeBase
from sleuth.sdk.errors import LimitError, QueryError
from sleuth.sdk.notices import notice
from sleuth.sdk.primitives import (
    ArtifactName,
    DocType,
    Issuer,
    Latest,
    MaxTotal,
    MustContain,
    PerQuery,
    PerSource,
    Phrase,
    Queries,
    Query,
    RankBy,
    SourcePaths,
    TopK,
    Year,
    check,
    primitive,
    shown,
)
from sleuth.sdk.scoped import ScopedReader
from sleuth.sdk.types import (
    AwaitableList,
    Hit,
)
from sleuth.store.version.documents import latest_of
from sleuth.store.version.keyword import index_phrase, quoted
from sleuth.store.version.phrases import COMPLETIONS, is_prefix, whole_words
from sleuth.store.version.search import SearchHit, VersionReader

#: The most searches one `search_in_sources` call with `per_source` runs (sources x queries): each is
#: a hybrid search of its own, run one after the other so that evidence labels stay in order.
MAX_SEARCHES_APART = 40
MAX_MUST_CONTAIN = 20  # texts one search's chunks must all hold
#: Artifacts a filtered `search_knowledge` ranks before its filters keep `top_k` of them.
ARTIFACT_FILTER_DEPTH = 100


class Searches(KnowledgeBase):
    """Hybrid search over artifacts and chunks, keyword search, search within sources, citable spans."""

    # ---------------------------------------------------------------------------- searches
    @primitive("search", score_space="hybrid_rrf")
    async def search_knowledge(
        self,
        query: Query,
        top_k: TopK = 10,
        kind: str | None = None,
        type: str | None = None,
        context: str | None = None,
        *,
        latest: Latest = False,
        must_contain: MustContain = None,
    ) -> list[Hit]:
        """Hybrid search over artifacts; kind in summary|topic|entity|event|doc|page|glossary.
        `latest=True` keeps the artifacts drawn from the newest document of each issuer and type;
        `must_contain` those whose text holds it word for word (any case)."""
        patterns = [whole_words(text) for text in _must(must_contain)]
        newest_only = _latest(latest)
        depth = max(top_k, ARTIFACT_FILTER_DEPTH) if newest_only or patterns else top_k
        per_context = []
        for ctx in self._scope(context):
            vector = await self._vector(ctx, query)
            ranked = await asyncio.to_thread(ctx.reader.search_artifacts, query, depth, kind, type, vector)
            await self.evidence.in_turn()
            newest = set(ctx.reader.sources_where(latest=True)) if newest_only else set()
            hits: list[Hit] = []
            for aid, score in ranked:  # each artifact's file read once, until top_k pass the filters
                front, body = ctx.read_file(aid)
                sources = front.get("sources") or []
                if newest_only and sources and not newest.intersection(sources):
                    continue
                if patterns and not all(p.search(folded(body)) for p in patterns):
                    continue
                hits.append(self._artifact_hit(ctx, aid, score, (front, body)))
                if len(hits) == top_k:
                    break
            per_context.append(hits)
        return AwaitableList(self._fuse(per_context, top_k))

    async def _search_chunks(
        self,
        query: str,
        top_k: int,
        mode: str,
        context: str | None,
        sources: Sequence[str] | None = None,
        where: Mapping[str, Any] | None = None,
        must_contain: Sequence[str] = (),
    ) -> list[Hit]:
        per_context = []
        for ctx in self._scope(context):
            keep = _kept(ctx, sources, where)
            if keep is not None and not keep:
                continue
            if must_contain and not ctx.reader.info.keyword:
                raise QueryError(
                    f"context {ctx.slug!r} was compiled without a keyword index, which must_contain "
                    "reads (curate.chunks.keyword.enabled = false)"
                )
            vector, keyword = None, None
            if mode == "hybrid" and not must_contain:  # BM25 runs while the query is embedded (on
                # the host, in a turn), then beside the dense search, which `search` runs in its thread
                keyword = ctx.reader.start_keyword(query, top_k, keep)
            if mode != "keyword":
                vector = await self._vector(ctx, query)
            hits = await asyncio.to_thread(
                _search_and_read,
                ctx.reader,
                query,
                top_k,
                mode,
                keep,
                vector,
                keyword,
                must_contain,
            )
            await self.evidence.in_turn()
            per_context.append(
                [
                    self._chunk_hit(ctx, h.id, h.score, query=query, phrases=must_contain, why=h.why)
                    for h in hits
                ]
            )
        return self._fuse(per_context, top_k) if per_context else []

    def _unmatched(
        self,
        texts: Sequence[str],
        context: str | None,
        sources: Sequence[str] | None = None,
        where: Mapping[str, Any] | None = None,
    ) -> None:
        """After a search that `must_contain` left empty: a notice, in the step's output, for each text
        that no chunk searched holds. It matches whole words, so a fragment ("inventor") matches
        nothing; the notice names the words that start with it ("inventory") and the `*` form."""
        for text in texts:
            found, words = False, Counter[str]()
            for ctx in self._scope(context):
                keep = _kept(ctx, sources, where)
                if (keep is None or keep) and ctx.reader.info.keyword:
                    found = found or bool(ctx.reader.containing([text], keep))
                    if not found and not is_prefix(text):
                        words.update(dict(ctx.reader.completions(text, keep)))
            if not found:
                notice(_unmatched_notice(text, words))

    @primitive("search", score_space="hybrid_rrf")
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
        latest: Latest = False,
        must_contain: MustContain = None,
    ) -> list[Hit]:
        """Hybrid search over source chunks: what the documents say. The document a question names
        ranks first by itself; `sources` (paths), `issuer` (a substring), `doc_type` ("annual report",
        "policy", …) and `year` restrict the search to the documents that match (see `_sources`),
        `latest=True` to the newest of each issuer and type (by period end); `must_contain` to the
        chunks that hold that text word for word, whole words in any case (or returns [], with a
        notice naming the words a fragment starts; "inventor*" matches any word it starts).
        Each hit's `chunk_text` reads without running headers, footers and page numbers, its lines
        joined; `h.snippet` is ~240 characters of it around the match and `h.match` the match's
        (start, end) in `chunk_text`, None when no query word is in it."""
        where = _where(issuer, doc_type, year, latest)
        must = _must(must_contain)
        hits = await self._search_chunks(query, top_k, "hybrid", context, sources, where, must)
        if must and not hits:
            self._unmatched(must, context, sources, where)
        return AwaitableList(hits)

    @primitive("search", score_space="bm25")
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
        latest: Latest = False,
        must_contain: MustContain = None,
    ) -> list[Hit]:
        """BM25 only, for exact identifiers, codes and phrases. May return []. A phrase in double
        quotes ('"operating margin"') must appear word for word, as `must_contain` does: only the
        chunks that hold it come back. Filters as in `search_source`."""
        for ctx in self._scope(context):
            if not ctx.reader.info.keyword:
                raise QueryError(
                    f"context {ctx.slug!r} was compiled without a keyword index "
                    "(curate.chunks.keyword.enabled = false); use search_source"
                )
        where = _where(issuer, doc_type, year, latest)
        required = _must(must_contain)
        must = [*(q for q in quoted(query) if index_phrase(q)), *required]
        hits = await self._search_chunks(query, top_k, "keyword", context, sources, where, must)
        if required and not hits:
            self._unmatched(required, context, sources, where)
        return AwaitableList(hits)

    @primitive("search", score_space="hybrid_rrf")
    async def search_in_sources(
        self,
        sources: SourcePaths,
        query: Queries,
        max_total: MaxTotal = 20,
        context: str | None = None,
        *,
        per_query: PerQuery = None,
        per_source: PerSource = None,
        latest: Latest = False,
        must_contain: MustContain = None,
    ) -> list[Hit]:
        """Hybrid search restricted to the chunks of the given source paths (e.g. Artifact.sources).
        Several queries are searched separately and fused; `per_query` caps each query's share.
        With `per_source`, each source is searched on its own and gives at most that many hits, so
        one document cannot crowd out the others (e.g. the same question over several filings).
        `latest` and `must_contain` as in `search_source`."""
        paths = [sources] if isinstance(sources, str) else list(sources)
        queries = [query] if isinstance(query, str) else list(query)
        if not queries:
            raise LimitError("query must name at least one query string")
        for q in queries:
            check("query", q, Query)
        must = _must(must_contain)
        if _latest(latest):  # of the given sources, the newest of each issuer and type
            newest = {p for ctx in self._scope(context) for p in latest_of(paths, ctx.reader.documents)}
            paths = [path for path in paths if path in newest]
        each = min(max_total, per_query or max_total, per_source or max_total)
        groups = [[path] for path in dict.fromkeys(paths)] if per_source else [paths]
        if len(groups) * len(queries) > MAX_SEARCHES_APART:
            raise LimitError(
                f"per_source searches each source on its own: {len(groups)} sources x {len(queries)} "
                f"queries is above {MAX_SEARCHES_APART} searches; pass fewer, or drop per_source"
            )
        lists = []
        for q in queries:
            for group in groups:
                lists.append(await self._search_chunks(q, each, "hybrid", context, group, None, must))
        hits = self._fuse(lists, max_total)
        if must and not hits:
            self._unmatched(must, context, paths)
        return AwaitableList(hits)

    @primitive("search", score_space="hybrid_rrf")
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
        await self.evidence.in_turn()
        ranking = " ".join(wanted) if wanted else None
        for p in provenance[:max_total]:
            span = self._register_span(ctx, p, "artifact", meta["name"])
            self.evidence.note_score(span, 1.0)
            out.append(self._span_hit(ctx, aid, 1.0, "provenance", span, query=ranking))
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
                    c.heading_path,
                    "artifact",
                    meta["name"],
                )
                out.append(Hit(**{**hit.__dict__, "artifact": meta["name"], "span_": span}))
        return AwaitableList(out)


def _where(
    issuer: str | None, doc_type: str | None, year: int | None, latest: bool = False
) -> dict[str, Any]:
    """The document filters a search names, checked (a wrong type is the model's error to read)."""
    # issuer and doc_type are strings by their declaration (`primitives.Issuer`, `DocType`)
    if year is not None and (not isinstance(year, int) or isinstance(year, bool)):
        raise QueryError("year must be an integer such as 2023")
    named = (("issuer", issuer), ("doc_type", doc_type), ("year", year), ("latest", _latest(latest) or None))
    return {k: v for k, v in named if v is not None}


def _search_and_read(reader: VersionReader, *args: Any) -> list[SearchHit]:
    """`reader.search(*args)`, and the pages of its hits read (`VersionReader.reading`) in the same
    thread, so that the hits, made on the event loop, find them read."""
    hits = reader.search(*args)
    for hit in hits:
        reader.reading(hit.source_path, hit.page)
    return hits


def _kept(
    ctx: ScopedReader, sources: Sequence[str] | None, where: Mapping[str, Any] | None
) -> list[str] | None:
    """The sources of `ctx` a search keeps (None: all of them; [] none)."""
    keep = None if sources is None else [s for s in sources if s in ctx.sources]
    if where:
        matching = ctx.reader.sources_where(**where)
        keep = matching if keep is None else [s for s in keep if s in matching]
    return keep


def _unmatched_notice(text: str, words: Counter[str]) -> str:
    """What a step reads when `must_contain=text` held in no chunk searched."""
    said = f"[notice: must_contain={shown(text)} is in no chunk searched (it matches whole words, any case)"
    if not words:
        return said + "]"
    named = ", ".join(f"{word} ({count})" for word, count in words.most_common(COMPLETIONS))
    prefix = shown(text.rstrip() + "*")
    return f"{said}; words that start with it: {named}. Pass one, or {prefix} for any word it starts]"


def _latest(latest: bool) -> bool:
    """The `latest` filter, checked."""
    if not isinstance(latest, bool):
        raise QueryError("latest must be True or False")
    return latest


def _must(must_contain: str | Sequence[str] | None) -> list[str]:
    """The texts a search's chunks must hold: a string or a list of them, at most `MAX_MUST_CONTAIN`,
    each 1-500 characters."""
    if must_contain is None:
        return []
    if isinstance(must_contain, str):
        texts = [must_contain]
    elif isinstance(must_contain, list | tuple):
        texts = list(itertools.islice(must_contain, MAX_MUST_CONTAIN + 1))
    else:
        raise LimitError("must_contain must be a string or a list of strings")
    if len(texts) > MAX_MUST_CONTAIN:
        raise LimitError(f"must_contain takes at most {MAX_MUST_CONTAIN} texts")
    for text in texts:
        check("must_contain", text, Phrase)
    return texts
