"""Retrieval quality on FinanceBench: is the evidence page in the top-5 / top-10 pages?

    .venv/bin/python benchmarks/retrieval.py [--home DIR]

Needs the context that benchmarks/compile.py leaves in --home. For each question, Sleuth's
semantic, keyword and hybrid search over chunks are turned into a page ranking (first occurrence
of each page), next to two baselines computed in the same run:
  - plain BM25 over whole pages (bm25s, English stop words),
  - plain dense over whole pages (the same MiniLM embedder, one vector per page).
Two scopes: the whole corpus (74 filings), and within the question's own filing (what an agent
does once it has picked the document: `search_in_sources`). Pages are 1-based in Sleuth;
FinanceBench's `evidence_page_num` is 0-based.

The shipped page ranker was trained on these questions, so the default row is in-sample: the figures
that count for it are `benchmarks/train_ranker.py`'s, cross-validated by company.
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
DATA = REPO.parent / "shared" / "data" / "financebench"
DEFAULT_HOME = REPO / "benchmarks" / "results" / "home"
Page = tuple[str, int]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    parser.add_argument("--home", type=Path, default=DEFAULT_HOME)
    parser.add_argument("--questions", type=Path, default=DATA / "questions.jsonl")
    parser.add_argument("--context", default="financebench")
    parser.add_argument(
        "--only",
        help="run only the methods whose name holds this text (the page baselines, which embed every "
        "page, are then skipped unless it names them)",
    )
    parser.add_argument(
        "--ranks", type=Path, help="write each question's gold-page rank per method here (JSON lines)"
    )
    args = parser.parse_args()

    import bm25s

    from sleuth.models.embedder import EmbeddingCache, embed_cached
    from sleuth.store.contexts.home import Home
    from sleuth.store.version.search import VersionReader

    home = Home(args.home)
    ctx = home.find(args.context)
    reader = VersionReader.live(ctx)
    sources = json.loads((reader.root / "knowledge" / "sources.json").read_text("utf-8"))
    by_doc = {Path(p).stem: p for p in sources}

    questions = []
    for line in args.questions.read_text("utf-8").splitlines():
        q = json.loads(line)
        gold = set()
        for e in q["evidence"]:
            doc = e.get("evidence_doc_name") or e.get("doc_name") or q["doc_name"]  # both spellings occur
            if doc in by_doc:
                gold.add((by_doc[doc], int(e["evidence_page_num"]) + 1))
        if gold:
            questions.append((q["question"], by_doc[q["doc_name"]], gold))

    # Whole pages, as the baselines see them.
    pages: list[Page] = []
    texts: list[str] = []
    for path in sorted(sources):
        with (reader.root / "knowledge" / "pages" / f"{path}.jsonl").open(encoding="utf-8") as fh:
            for row in fh:
                page = json.loads(row)
                pages.append((path, page["page"]))
                texts.append(page["text"])
    page_source = np.array([p[0] for p in pages])

    baselines = args.only is None or "baseline" in args.only
    began = time.perf_counter()
    retriever = bm25s.BM25()
    if baselines:
        retriever.index(bm25s.tokenize(texts, stopwords="en", show_progress=False), show_progress=False)
    bm25_build = time.perf_counter() - began

    began = time.perf_counter()
    page_vectors = np.zeros((len(texts), reader.embedder.dim), dtype=np.float32)
    if baselines:
        cache = EmbeddingCache.for_embedder(home.embedding_cache_dir, reader.embedder)
        page_vectors = np.concatenate(
            [embed_cached(reader.embedder, cache, texts[i : i + 256])[0] for i in range(0, len(texts), 256)]
        )
        cache.close()
    dense_build = time.perf_counter() - began

    def bm25_pages(query: str, doc: str | None) -> list[Page]:
        k = len(texts) if doc else 50
        ids, _scores = retriever.retrieve(
            bm25s.tokenize([query], stopwords="en", show_progress=False), k=k, show_progress=False
        )
        ranked = [pages[i] for i in ids[0]]
        return [p for p in ranked if doc is None or p[0] == doc][:10]

    def dense_pages(query: str, doc: str | None) -> list[Page]:
        scores = page_vectors @ reader.embedder.embed([query])[0]
        if doc:
            scores = np.where(page_source == doc, scores, -np.inf)
        return [pages[i] for i in np.argsort(-scores)[:10]]

    from sleuth.store.version import search as search_module

    scores = dict(reader.boilerplate)

    shipped = reader.page_ranker

    def sleuth_pages(
        mode: str,
        demote: bool = True,
        named: bool = True,
        rescore: bool = True,
        exact: bool = True,
        learned: bool = True,
    ) -> Callable[[str, str | None], list[Page]]:
        """Sleuth's `search` in `mode`; `demote`, `named`, `rescore`, `exact` and `learned` off give the
        ranking before boilerplate scores, document resolution, the page rescoring, the exact-phrase
        list and the learned page ranker existed."""

        def rank(query: str, doc: str | None) -> list[Page]:
            reader.__dict__["boilerplate"] = scores if demote else {}
            reader.page_ranker = shipped if learned else None
            search_module.RESOLVE_DOCUMENTS = named
            search_module.RESCORE_PAGES = rescore
            search_module.KEEP_EXACT = exact
            try:
                hits = reader.search(
                    query,
                    top_k=100,
                    mode=mode,  # type: ignore[arg-type]
                    sources=[doc] if doc else None,
                )
            finally:
                search_module.RESOLVE_DOCUMENTS = True
                search_module.RESCORE_PAGES = True
                search_module.KEEP_EXACT = True
            ordered: list[Page] = []
            for h in hits:
                if (h.source_path, h.page) not in ordered:
                    ordered.append((h.source_path, h.page))
            return ordered[:30]  # the table reads the first 10; --ranks up to 30

        return rank

    methods: list[tuple[str, Callable[[str, str | None], list[Page]]]] = [
        ("baseline: BM25 over pages (bm25s)", bm25_pages),
        ("baseline: dense over pages (MiniLM)", dense_pages),
        ("Sleuth keyword (BM25, chunks), as before", sleuth_pages("keyword", False, False, False)),
        ("Sleuth semantic (MiniLM, chunks), as before", sleuth_pages("semantic", False, False, False)),
        ("Sleuth hybrid (RRF, chunks), as before", sleuth_pages("hybrid", False, False, False)),
        ("Sleuth keyword + demotion + named document + rescoring", sleuth_pages("keyword")),
        ("Sleuth semantic + demotion + named document + rescoring", sleuth_pages("semantic")),
        ("Sleuth hybrid + demotion + named document, no rescoring", sleuth_pages("hybrid", rescore=False)),
        ("Sleuth hybrid + named document + rescoring, no demotion", sleuth_pages("hybrid", demote=False)),
        ("Sleuth hybrid + demotion + rescoring, no named document", sleuth_pages("hybrid", named=False)),
        ("Sleuth hybrid, default but no exact-phrase list", sleuth_pages("hybrid", exact=False)),
        (
            "Sleuth hybrid, second stage by the fixed fusion (before issue 44)",
            sleuth_pages("hybrid", learned=False),
        ),
        ("**Sleuth hybrid, learned page ranker (default; in-sample here)**", sleuth_pages("hybrid")),
    ]
    if args.only is not None:
        methods = [(name, rank) for name, rank in methods if args.only in name]
    flagged = sum(1 for v in scores.values() if v >= 0.5)
    print(f"boilerplate: {len(scores):,} chunks scored, {flagged:,} at least half boilerplate")
    resolved = sum(reader.resolve_documents(q) == [doc] for q, doc, _gold in questions)
    print(f"named document resolved to the question's filing: {resolved} of {len(questions)} questions")
    print(
        f"\nFinanceBench retrieval: {len(questions)} questions, {len(pages):,} pages, "
        f"{len(reader.chunks):,} chunks (BM25 page index {bm25_build:.1f}s, page vectors "
        f"{dense_build:.1f}s)\n"
    )
    asked = [q for q, _d, _g in questions]
    for primitive in ("search_source", "search_source_by_keyword"):
        p50, p95 = search_source_latency(args.home, args.context, asked, primitive)
        print(f"SDK {primitive}(question, top_k=10), whole context: p50 {p50:.1f} ms, p95 {p95:.1f} ms")
    print()
    for query, needle in PROBES:
        found = {}
        for mode in ("keyword", "semantic", "hybrid"):
            hits = reader.search(query, top_k=30, mode=mode)  # type: ignore[arg-type]
            found[mode] = next((i for i, h in enumerate(hits, 1) if needle in h.text), None)
        print(f"probe {query!r}: the chunk saying {needle!r} ranks {found} (top 30; None: absent)")
    print()
    print("| method | R@5 corpus | R@10 corpus | R@5 in filing | R@10 in filing | ms/query |")
    print("|---|---|---|---|---|---|")
    ranks = args.ranks.open("w", encoding="utf-8") if args.ranks else None
    for name, rank in methods:
        hits = {"c5": 0, "c10": 0, "d5": 0, "d10": 0}
        began = time.perf_counter()
        for question, doc, gold in questions:
            corpus_ranked, doc_ranked = rank(question, None), rank(question, doc)
            if ranks is not None:
                first = {
                    scope: next((i for i, page in enumerate(ranked, 1) if page in gold), None)
                    for scope, ranked in (("corpus", corpus_ranked), ("filing", doc_ranked))
                }
                ranks.write(json.dumps({"method": name, "question": question, **first}) + "\n")
            hits["c5"] += bool(gold & set(corpus_ranked[:5]))
            hits["c10"] += bool(gold & set(corpus_ranked[:10]))
            hits["d5"] += bool(gold & set(doc_ranked[:5]))
            hits["d10"] += bool(gold & set(doc_ranked[:10]))
        ms = (time.perf_counter() - began) * 1000 / (2 * len(questions))
        n = len(questions)
        print(
            f"| {name} | {hits['c5'] / n:.3f} | {hits['c10'] / n:.3f} | {hits['d5'] / n:.3f} | "
            f"{hits['d10'] / n:.3f} | {ms:.1f} |"
        )


#: Short queries whose exact-phrase chunk hybrid search lost before issue 24 (the issue's examples).
PROBES = [
    ("total employees", "3,700 total employees"),
    ("number of employees", "3,700 total employees"),
]


def search_source_latency(
    home_dir: Path, context: str, questions: list[str], primitive: str = "search_source"
) -> tuple[float, float]:
    """p50 and p95 of the SDK's `primitive(question, top_k=10)` over the whole context, in ms, with
    the query embedded on the host as a turn does (one warm-up query first)."""
    import asyncio

    from sleuth.sdk.knowledge import Knowledge, ScopedContext
    from sleuth.store.contexts.home import Home

    ctx = Home(home_dir).find(context)
    version = ctx.live_version()
    assert version is not None
    knowledge = Knowledge([ScopedContext(context, ctx.version_dir(version))])

    search = getattr(knowledge, primitive)

    async def timed() -> list[float]:  # one event loop, as a turn's REPL keeps
        await search(questions[0], top_k=10)
        out = []
        for question in questions:
            began = time.perf_counter()
            await search(question, top_k=10)
            out.append((time.perf_counter() - began) * 1000)
        return out

    times = asyncio.run(timed())
    knowledge.close()
    times.sort()
    return times[len(times) // 2], times[int(len(times) * 0.95)]


if __name__ == "__main__":
    main()
