"""Search over one compiled version: dense, keyword (BM25) and hybrid (reciprocal-rank fusion).

This is the read side of the indexes that the compiler writes; the retrieval SDK builds its
primitives on it. Everything is opened read-only, as the sandbox will mount it. What the version
holds besides its indexes (chunks, pages, documents) is read by `store.version_content`, which
`VersionReader` extends; how ranked lists are fused is `store.fusion`.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Literal

import numpy as np
import numpy.typing as npt

from sleuth.format import titles
from sleuth.format.spans import PageSpan
from sleuth.format.text import folded
from sleuth.models.embedder import Embedder, get_embedder
from sleuth.settings import DEFAULTS
from sleuth.store.version import rescore as second_stage
from sleuth.store.version.content import CACHED_SOURCES, VersionContent
from sleuth.store.version.dense import DenseIndex
from sleuth.store.version.fusion import RRF_K, distinct, keep_exact, merge, rrf
from sleuth.store.version.keyword import (
    KeywordIndex,
    exact_phrases,
    index_phrase,
    is_identifier,
    open_index,
    word_prefix,
)
from sleuth.store.version.phrases import (
    COMPLETION_CHUNKS,
    COMPLETIONS,
    CONTAINING_LIMIT,
    MUST_CONTAIN_DEPTH,
    is_prefix,
    last_word,
    whole_part,
    whole_words,
)
from sleuth.store.version.ranker import PageRanker, Signals, demotion
from sleuth.store.version.ranker import shipped as shipped_ranker
from sleuth.store.version.recent import Recent
from sleuth.store.version.rescore import PageKey, TitleIndex, idf_from, rescore, title_pages

Mode = Literal["semantic", "keyword", "hybrid"]


@dataclass(frozen=True, kw_only=True)
class SearchHit(PageSpan):
    """A chunk hit with everything a citation needs."""

    id: str
    #: On the search's scale: semantic, cosine similarity of the query and the chunk's best window
    #: (-1..1); keyword, BM25 (0 and up, comparable within one query); hybrid, fused rank score (0..1).
    score: float
    text: str
    section_path: list[str]
    #: A hybrid hit ranked by the learned page ranker: the features of its page that moved it most
    #: (`PageRanker.reasons`, weight × standardised value); empty otherwise.
    why: dict[str, float] = field(default_factory=dict)


#: Weight of the dense list against the BM25 list in hybrid search. Measured on FinanceBench
#: (benchmarks/retrieval.py): equal weights lost to dense alone (R@10 in filing 0.667 against 0.698);
#: 3:1 gave 0.729. Queries that name identifiers get equal weights: BM25 is the better ranker there.
DENSE_WEIGHT = 3.0
_TOKEN = re.compile(r"[A-Za-z0-9]+(?:[-_./][A-Za-z0-9]+)+")
#: How many chunks that hold the query word for word (`keyword.exact_phrases`) a hybrid search keeps
#: in its `top_k` however the other signals rank them: at most a third of the results.
EXACT_KEPT = 3


def hybrid_weights(query: str) -> tuple[float, float]:
    """(dense, keyword) weights for one query."""
    if any(is_identifier(t) for t in _TOKEN.findall(query)):
        return 1.0, 1.0
    return DENSE_WEIGHT, 1.0


#: Whether searches look for the documents a question names at all (off: the ranking before it).
RESOLVE_DOCUMENTS = True
#: Whether the second stage (`store.rescore`: title zone and coverage of each page) runs.
RESCORE_PAGES = True
#: Whether hybrid search fuses and keeps the chunks that hold the query word for word (`exact`).
KEEP_EXACT = True
#: Searches over at most this many pages also rescore the pages whose title zone matches the question.
TITLE_SCAN_PAGES = 3000
_ASKS_FOR_BOILERPLATE = re.compile(
    r"\b(?:certif\w*|disclaim\w*|forward[- ]looking|legal notice|notices?|table of contents|contents page"
    r"|copyright|footer|header|signature\w*|exhibit\w*|trademark\w*|boilerplate|safe harbou?r)\b",
    re.IGNORECASE,
)


def asks_for_boilerplate(query: str) -> bool:
    """A question about certifications, disclaimers, notices or contents wants what is otherwise noise."""
    return bool(_ASKS_FOR_BOILERPLATE.search(query))


def hybrid_ceiling(weights: Sequence[float], learned: bool = False) -> float:
    """The score of a chunk ranked first by every signal (with the `learned` ranker, on a page it is
    sure of): hybrid scores are divided by it (0..1)."""
    if RESCORE_PAGES and learned:
        return second_stage.LEARNED_CEILING
    if RESCORE_PAGES:
        best = second_stage.FIRST_STAGE_WEIGHT + second_stage.TITLE_WEIGHT + second_stage.COVERAGE_WEIGHT
        return best / (RRF_K + 1)
    return sum(weights) / (RRF_K + 1)


def _depth(top_k: int) -> int:
    """How many candidates each first-stage list brings for `top_k` results."""
    return max(top_k * 5, 50)


_POOL: ThreadPoolExecutor | None = None


def _pool() -> ThreadPoolExecutor:
    """Threads for the BM25 half of searches (`start_keyword`): tantivy releases the GIL, so it runs
    beside the dense half (NumPy and usearch release it too). Nothing run here waits on this pool."""
    global _POOL
    if _POOL is None:
        _POOL = ThreadPoolExecutor(max_workers=2, thread_name_prefix="sleuth-search")
    return _POOL


@dataclass(frozen=True)
class Candidates:
    """One half's lists of one search (`dense_candidates`; `KeywordCandidates` adds its own): over
    the scope, and over the documents the query names."""

    query: str
    depth: int
    sources: tuple[str, ...]
    named: list[str]  # the documents the query names (`resolve_documents`), searched on their own
    in_scope: list[tuple[str, float]]
    in_named: list[tuple[str, float]]

    def matches(self, query: str, depth: int, sources: Sequence[str] | None) -> bool:
        return (self.query, self.depth, self.sources) == (query, depth, tuple(sources or ()))


@dataclass(frozen=True)
class KeywordCandidates(Candidates):
    """The BM25 lists of one search, and the chunks that hold the query word for word."""

    exact: list[tuple[str, float]]  # (`keyword.exact_phrases`)


def _signals(
    dense: Candidates | None,
    keyword: Candidates | None,
    named: Sequence[str],
    boilerplate: Mapping[str, float],
) -> Signals:
    """Each half's own scores of its candidates, best first, over the scope and the named documents;
    the named documents; each chunk's boilerplate share."""
    halves = [
        dict(merge(half.in_scope, half.in_named)) if half is not None else {} for half in (dense, keyword)
    ]
    return Signals(halves[0], halves[1], frozenset(named), boilerplate)


#: Queries whose named documents a reader remembers (`_named`).
CACHED_QUERIES = 64


class VersionReader(VersionContent):
    """One version of one context, read-only, and its searches.

    `ann_min_vectors` and `embed_threads` are the settings of the process that searches: a filtered
    search over fewer chunks scans them exactly, and the query is embedded on that many threads. A
    reader left without them (one that reads pages, or the sandbox's, whose query vectors come from the
    host) runs on the declared defaults."""

    def __init__(
        self,
        version_dir: Path,
        embedder: Embedder | None = None,
        *,
        ann_min_vectors: int = DEFAULTS.ann_min_vectors,
        embed_threads: int | None = DEFAULTS.embed_threads,
    ) -> None:
        super().__init__(version_dir)
        self._embedder = embedder
        self._ann_min_vectors = ann_min_vectors
        self._embed_threads = embed_threads
        self._title_indexes: Recent[str, TitleIndex] = Recent(CACHED_SOURCES)
        self._named_by_query: Recent[str, tuple[str, ...]] = Recent(CACHED_QUERIES)
        #: The second stage's page ranker (`store.ranker`: the shipped model; None, the fixed fusion),
        #: and who is told each rescored page's features (`benchmarks/train_ranker.py`).
        self.page_ranker: PageRanker | None = shipped_ranker()
        self.page_seen: Callable[[PageKey, list[float]], None] | None = None

    @cached_property
    def embedder(self) -> Embedder:
        if self._embedder is not None:
            return self._embedder
        if self.info.embedder.id is None:
            raise LookupError(f"{self.root}: version.json names no embedder")
        return get_embedder(self.info.embedder.id, threads=self._embed_threads)

    @cached_property
    def _dense(self) -> DenseIndex | None:
        directory = self.root / "index" / "dense"
        if not (directory / "chunks.npy").exists():
            return None
        return DenseIndex(directory, "chunks", exact_below=self._ann_min_vectors)

    @cached_property
    def _keyword(self) -> KeywordIndex | None:
        return open_index(self.root / "index")

    def _allowed(self, sources: Sequence[str] | None) -> list[str] | None:
        if sources is None:
            return None
        return [cid for source in dict.fromkeys(sources) for cid in self._chunks_by_source.get(source, [])]

    def embed_query(self, query: str) -> npt.NDArray[np.float32]:
        return np.asarray(self.embedder.embed([query])[0], dtype=np.float32)

    def semantic(
        self,
        query: str,
        top_k: int = 10,
        sources: Sequence[str] | None = None,
        vector: npt.NDArray[np.float32] | None = None,
    ) -> list[tuple[str, float]]:
        """Exact inner product over the chunk matrix; `vector` is the query's embedding when the
        caller already has it (inside the sandbox it comes from the host)."""
        if self._dense is None:
            return []
        if vector is None:
            vector = self.embed_query(query)
        return [(h.id, h.score) for h in self._dense.search(vector, top_k, self._allowed(sources))]

    def keyword(
        self, query: str, top_k: int = 10, sources: Sequence[str] | None = None
    ) -> list[tuple[str, float]]:
        if self._keyword is None:
            return []
        return [(h.id, h.score) for h in self._keyword.search_chunks(query, top_k, sources)]

    def _named(self, query: str, sources: Sequence[str] | None) -> list[str]:
        """The documents an unscoped query names, resolved once per query: the BM25 and the dense
        halves of a hybrid search each ask, side by side."""
        if sources is not None or not RESOLVE_DOCUMENTS:
            return []
        named = self._named_by_query.get(query)
        if named is None:
            named = self._named_by_query.put(query, tuple(self.resolve_documents(query)))
        return list(named)

    def keyword_candidates(
        self, query: str, top_k: int = 10, sources: Sequence[str] | None = None, exact: bool = True
    ) -> KeywordCandidates:
        """The BM25 half of `search`, on its own so that it can run while the query is embedded and
        beside the dense half (`start_keyword`): the scope's list, the named documents' list and the
        exact-phrase list (hybrid search's: `exact`), one after the other (each is a fraction of a
        millisecond; handing them to other threads cost more than it saved)."""
        depth = _depth(top_k)
        named = self._named(query, sources)
        return KeywordCandidates(
            query,
            depth,
            tuple(sources or ()),
            named,
            self.keyword(query, depth, sources),
            self.keyword(query, depth, named) if named else [],
            self.exact(query, depth, sources) if exact else [],
        )

    def start_keyword(
        self, query: str, top_k: int = 10, sources: Sequence[str] | None = None, exact: bool = True
    ) -> Future[KeywordCandidates]:
        """`keyword_candidates` in the reader's search thread, started before the query's vector is
        known; `search` takes the future and runs the dense half in its own thread meanwhile."""
        return _pool().submit(self.keyword_candidates, query, top_k, sources, exact)

    def dense_candidates(
        self,
        query: str,
        vector: npt.NDArray[np.float32] | None,
        top_k: int = 10,
        sources: Sequence[str] | None = None,
    ) -> Candidates:
        """The dense half of `search`: the scope's list and the named documents' list."""
        depth = _depth(top_k)
        if vector is None and self._dense is not None:
            vector = self.embed_query(query)
        named = self._named(query, sources)
        return Candidates(
            query,
            depth,
            tuple(sources or ()),
            named,
            self.semantic(query, depth, sources, vector),
            self.semantic(query, depth, named, vector) if named else [],
        )

    def containing(self, texts: Sequence[str], sources: Sequence[str] | None = None) -> list[str]:
        """The chunks whose text holds every one of `texts` word for word (any case, any run of
        spaces between words), best BM25 first: the index finds the chunks with the phrase's terms
        (stemmed, so a superset), and each is checked against its own text. At most
        `CONTAINING_LIMIT` are looked at: a filter that many chunks pass does not narrow a search."""
        wanted = [whole_words(text) for text in texts if folded(text)]
        # A text ending in `*` is looked up by the words before its last, or by its last word's prefix.
        phrases = [p for p in (index_phrase(whole_part(text)) for text in texts) if p]
        prefixes = [p for p in (word_prefix(last_word(text)) for text in texts if is_prefix(text)) if p]
        if not wanted or not (phrases or prefixes):
            return []  # nothing to look for, or punctuation only: no term to look up
        if self._keyword is None:
            raise LookupError("this version has no keyword index (curate.chunks.keyword.enabled = false)")
        # The longest phrase is the most selective; every text is then checked on the chunk itself.
        if phrases:
            found = self._keyword.search_phrases([max(phrases, key=len)], CONTAINING_LIMIT, sources)
        else:
            found = self._keyword.search_prefix(max(prefixes, key=len), CONTAINING_LIMIT, sources)
        out = []
        for hit in found:
            chunk = self.chunks.get(hit.id)
            if chunk is not None:
                text = folded(chunk.text)
                if all(pattern.search(text) for pattern in wanted):
                    out.append(hit.id)
        return out

    def completions(self, fragment: str, sources: Sequence[str] | None = None) -> list[tuple[str, int]]:
        """The words (lower case) that start with `fragment`'s last word and run on, with how often
        they occur, most frequent first: what a `must_contain` that matched nothing may have meant
        ("inventor" → "inventory", "inventories"). Read from at most `COMPLETION_CHUNKS` chunks that
        the index says hold such a word."""
        last = last_word(fragment)
        prefix = word_prefix(last)
        if self._keyword is None or prefix is None:
            return []
        runs_on = re.compile(rf"(?<!\w){re.escape(last)}\w+", re.IGNORECASE)
        counts: dict[str, int] = {}
        for hit in self._keyword.search_prefix(prefix, COMPLETION_CHUNKS, sources):
            chunk = self.chunks.get(hit.id)
            for word in runs_on.findall(chunk.text) if chunk is not None else []:
                counts[word.lower()] = counts.get(word.lower(), 0) + 1
        return sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))[:COMPLETIONS]

    def exact(self, query: str, top_k: int, sources: Sequence[str] | None = None) -> list[tuple[str, float]]:
        """Chunks that hold a quoted phrase, an identifier or the whole (short) query word for word."""
        phrases = exact_phrases(query)
        if self._keyword is None or not phrases:
            return []
        return [(h.id, h.score) for h in self._keyword.search_phrases(phrases, top_k, sources)]

    def search(
        self,
        query: str,
        top_k: int = 10,
        mode: Mode = "hybrid",
        sources: Sequence[str] | None = None,
        vector: npt.NDArray[np.float32] | None = None,
        keyword: KeywordCandidates | Future[KeywordCandidates] | None = None,
        must_contain: Sequence[str] = (),
    ) -> list[SearchHit]:
        """The best `top_k` chunks for `query`. Every mode ranks a deeper candidate list first, then
        `rank_candidates` demotes boilerplate and `store.rescore` reorders the best pages by their
        title zone and coverage. A document the question names (`resolve_documents`) is searched on
        its own as well, and its hits join the fusion. In hybrid search the chunks that hold the
        query word for word (`exact`) join as a list of their own, as sure as the surer mode, and
        the best `EXACT_KEPT` of them stay in the results whatever the other signals say.
        `keyword` is `keyword_candidates` (or `start_keyword`'s future of them) computed ahead for
        the same query, top_k and sources; the dense half (`dense_candidates`) is worked out here
        before waiting for the future, so the two run side by side.

        Each mode scores on its own documented scale (`SearchHit.score`): semantic, the cosine
        similarity of the query and the chunk's best window; keyword, the BM25 score; hybrid, the
        fused rank score over 0..1 (1: first by every signal). Hits come in the final order, which
        the second stage sets, so a semantic or keyword score may exceed the one above it.

        With `must_contain`, only chunks that hold every one of those texts word for word come back
        (`containing`), or none: those the search ranks first, in its order, then the others by BM25
        (score 0)."""
        if must_contain:
            allowed = self.containing(must_contain, sources)
            if not allowed:
                return []
            holding = set(allowed)
            deep = self.search(query, max(top_k, MUST_CONTAIN_DEPTH), mode, sources, vector, keyword)
            matches = [hit for hit in deep if hit.id in holding]
            seen = {hit.id for hit in matches}
            matches += [self._hit(cid, 0.0) for cid in allowed if cid not in seen]
            return matches[:top_k]
        depth = _depth(top_k)
        dense = None
        if mode != "keyword":
            if vector is None and self._dense is not None:
                vector = self.embed_query(query)  # kept: a semantic search scores late joiners with it
            dense = self.dense_candidates(query, vector, top_k, sources)
        if isinstance(keyword, Future):
            keyword = keyword.result()
        if mode != "semantic" and (keyword is None or not keyword.matches(query, depth, sources)):
            keyword = self.keyword_candidates(query, top_k, sources, exact=mode == "hybrid")
        named = keyword.named if keyword is not None else dense.named if dense is not None else []
        exact: list[str] = []
        weights: list[float] = []
        if mode == "semantic":
            assert dense is not None
            ranked = merge(dense.in_scope, dense.in_named)
        elif mode == "keyword":
            assert keyword is not None
            ranked = merge(keyword.in_scope, keyword.in_named)
        else:
            assert keyword is not None and dense is not None
            lists = [[i for i, _ in dense.in_scope], [i for i, _ in keyword.in_scope]]
            weights = list(hybrid_weights(query))
            # The named documents' own best chunks join the candidates however far down they were,
            # and count twice in the fusion: a boost, not a filter (measured: no extra factor helps).
            if named:
                lists += [[i for i, _ in dense.in_named], [i for i, _ in keyword.in_named]]
                weights += weights[:2]
            exact = [i for i, _ in keyword.exact] if KEEP_EXACT else []
            if exact:
                lists.append(exact)
                weights.append(max(weights))
            ranked = rrf(lists, weights=weights)
        own = dict(ranked)
        reranked = self.rank_candidates(query, ranked)
        rows: dict[PageKey, list[float]] = {}
        if RESCORE_PAGES:
            scope = list(sources or named)
            also = self._title_pages(query, scope) if scope else []
            present = {cid for cid, _ in reranked}
            reranked += [(cid, 0.0) for key in also for cid in self._first_chunk(key) if cid not in present]
            reranked = rescore(
                query,
                reranked,
                self._page_of,
                self._page_words,
                self._idf,
                also,
                ranker=self.page_ranker,
                seen=self._seen(rows),
                signals=_signals(
                    dense, keyword, named, {} if asks_for_boilerplate(query) else self.boilerplate
                ),
                text_of=self._chunk_text,
            )
        if mode == "hybrid":
            sure = set(exact[:EXACT_KEPT])
            top = distinct(
                keep_exact(reranked, exact[:EXACT_KEPT], top_k), self._span_of, top_k, lambda r: r[0] in sure
            )
            best = hybrid_ceiling(weights, self.page_ranker is not None)
            return [self._hit(cid, min(1.0, score / best), self._why(cid, rows)) for cid, score in top]
        top = distinct(reranked, self._span_of, top_k)
        if mode == "semantic" and vector is not None and self._dense is not None:
            missing = [cid for cid, _ in top if cid not in own]  # joined by their page's title
            if missing:
                found = self._dense.scores(vector, self._dense.positions(missing))
                own.update(zip(missing, (float(x) for x in found), strict=True))
        return [self._hit(cid, own.get(cid, 0.0)) for cid, _ in top]

    def _seen(self, rows: dict[PageKey, list[float]]) -> Callable[[PageKey, list[float]], None] | None:
        """What `rescore` tells each rescored page's features: `rows` (a hit's reasons, when a learned
        ranker ranks) and `page_seen` (training data); None when neither wants them, so the fixed
        fusion computes none."""
        hook, keep = self.page_seen, self.page_ranker is not None
        if hook is None and not keep:
            return None

        def seen(key: PageKey, row: list[float]) -> None:
            if keep:
                rows[key] = row
            if hook is not None:
                hook(key, row)

        return seen

    def _why(self, cid: str, rows: dict[PageKey, list[float]]) -> dict[str, float]:
        row = rows.get(self._page_of(cid))
        return {} if row is None or self.page_ranker is None else self.page_ranker.reasons(row)

    def _chunk_text(self, cid: str) -> str:
        return self.chunks[cid].text

    def _title_pages(self, query: str, scope: Sequence[str]) -> list[PageKey]:
        """`rescore.title_pages` over the searched documents' pages (not the whole corpus: that
        would cost a scan of every page per query)."""
        sources = list(dict.fromkeys(scope))
        if sum(len(self._pages_of_source.get(source, [])) for source in sources) > TITLE_SCAN_PAGES:
            return []
        return title_pages(query, [self._title_index(source) for source in sources], self._idf)

    def _title_index(self, source: str) -> TitleIndex:
        known = self._title_indexes.get(source)
        if known is not None:
            return known
        pages = self._pages_of_source.get(source, [])
        stored = titles.read(self.root / "index", source) if pages else None  # a key of the version only
        if stored is not None:
            return self._title_indexes.put(source, TitleIndex([(source, p) for p in stored[0]], stored[1]))
        return self._title_indexes.put(source, TitleIndex.build(pages, self._page_words))

    @cached_property
    def _idf(self) -> Callable[[str], float]:
        """idf of a word over this version's chunks, each word looked up in the index once."""
        count = self._keyword.document_frequency if self._keyword is not None else (lambda _w: 0)
        return functools.cache(idf_from(count, len(self.chunks)))

    def rank_candidates(
        self,
        query: str,
        ranked: Sequence[tuple[str, float]],
    ) -> list[tuple[str, float]]:
        """Second-stage ranking of scored candidates (higher is better), best first.

        - A chunk that is mostly boilerplate (running headers, tables of contents, text shared by
          many documents) is scaled down by its share, unless the question asks for that kind of text.
        """
        demote = {} if asks_for_boilerplate(query) else self.boilerplate
        scores: dict[str, float] = {}
        for cid, score in ranked:
            share = demote.get(cid, 0.0)
            factor = demotion(share)
            scores[cid] = score * factor if score >= 0 else score / factor  # factor ≥ 1 − PENALTY
        return sorted(scores.items(), key=lambda kv: (-kv[1], kv[0]))

    @cached_property
    def _dense_artifacts(self) -> DenseIndex | None:
        directory = self.root / "index" / "dense"
        return DenseIndex(directory, "artifacts") if (directory / "artifacts.npy").exists() else None

    def search_artifacts(
        self,
        query: str,
        top_k: int = 10,
        kind: str | None = None,
        type: str | None = None,
        vector: npt.NDArray[np.float32] | None = None,
    ) -> list[tuple[str, float]]:
        """Hybrid (dense + BM25, RRF) search over artifact bodies, optionally by kind or type; scores
        over 0..1 as a chunk's hybrid score."""
        allowed = [
            a["id"]
            for a in self.outline
            if (kind is None or a["kind"] == kind)
            and (type is None or a["type"].casefold() == type.casefold())
        ]
        if not allowed:
            return []
        depth = max(top_k * 5, 50)
        lists: list[list[str]] = []
        if self._dense_artifacts is not None:
            if vector is None:
                vector = self.embed_query(query)
            lists.append([h.id for h in self._dense_artifacts.search(vector, depth, allowed)])
        if self._keyword is not None:
            lists.append([h.id for h in self._keyword.search_artifacts(query, depth, kind, type)])
        ranked = [r for r in lists if r]
        best = len(ranked) / (RRF_K + 1)  # first in every list: hybrid scores over 0..1, as for chunks
        return [(aid, min(1.0, score / best)) for aid, score in rrf(ranked)[:top_k]]

    def _hit(self, cid: str, score: float, why: dict[str, float] | None = None) -> SearchHit:
        c = self.chunks[cid]
        return SearchHit(
            id=cid,
            score=score,
            why=why or {},
            source_path=c.source_path,
            page=c.page,
            start=c.start,
            end=c.end,
            text=c.text,
            section_path=c.heading_path,
        )
