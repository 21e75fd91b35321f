"""Latency of the search primitives at 100k and 1M chunks, next to an exact NumPy scan.

    .venv/bin/python benchmarks/search.py [--sizes 100000 1000000] [--queries 200] [--vectors clustered]

Keyword rows are given for both engines in the same run up to --fts5-max chunks: tantivy (now) and
SQLite FTS5 (before). From SLEUTH_ANN_MIN_VECTORS vectors (50,000 by default) the version also has an
HNSW graph (store/version/ann.py, the `ann` extra), as a compile writes it; its recall@10 against the exact
scan is printed below the table, with the graph's build time.

The corpus is synthetic (word sequences drawn from a fixed vocabulary, one identifier per chunk),
written in the real on-disk layout with the real index writers, and searched through the SDK
(`Knowledge`) exactly as a REPL step would, except that the query vector is handed in (inside the
sandbox it comes from the host's `embed` function, which is timed separately by benchmarks/sandbox.py
and the compile benchmark). Vectors are `clustered` by default: 2,000 topics with noise, as text
embeddings cluster; `random` unit vectors have no neighbourhoods at all, the worst case for any graph.
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

_SYLLABLES = ["ka", "ro", "mi", "te", "sun", "dor", "vel", "pa", "lin", "qua", "ex", "tor", "ban", "ci", "mo"]
#: 5,000 pseudo-words with Zipf-like frequencies, so term statistics look like prose.
WORDS = sorted({a + b + c for a in _SYLLABLES for b in _SYLLABLES for c in _SYLLABLES})[:5000]
_WEIGHTS = 1.0 / np.arange(1, len(WORDS) + 1) ** 1.07
_WEIGHTS /= _WEIGHTS.sum()


def unit_rows(rows: npt.NDArray[np.float32]) -> npt.NDArray[np.float32]:
    rows /= np.linalg.norm(rows, axis=1, keepdims=True)
    return rows


def make_vectors(
    n: int, queries: int, kind: str, rng: np.random.Generator
) -> tuple[npt.NDArray[np.float32], npt.NDArray[np.float32]]:
    """(chunk vectors, query vectors): around 2,000 topics (`clustered`), or uniform (`random`)."""
    if kind == "random":
        return (
            unit_rows(rng.standard_normal((n, 384), dtype=np.float32)),
            unit_rows(rng.standard_normal((queries, 384), dtype=np.float32)),
        )
    centers = rng.standard_normal((2000, 384), dtype=np.float32)
    matrix = np.empty((n, 384), dtype=np.float32)
    for begin in range(0, n, 100_000):  # in slices: the noise of 1M rows at once is another 1.5 GB
        part = min(100_000, n - begin)
        noise = rng.standard_normal((part, 384), dtype=np.float32)
        matrix[begin : begin + part] = centers[rng.integers(0, 2000, part)] + 0.9 * noise
    asked = centers[rng.integers(0, 2000, queries)] + 1.2 * rng.standard_normal(
        (queries, 384), dtype=np.float32
    )
    return unit_rows(matrix), unit_rows(asked)


def build_version(
    root: Path, n_chunks: int, rng: np.random.Generator, matrix: npt.NDArray[np.float32], fts5: bool
) -> float:
    """Write the version; returns the seconds the HNSW graph took (0 when none is built)."""
    from sleuth.compile.manifest import parse_manifest
    from sleuth.compile.tables_db import write_tables
    from sleuth.settings import current
    from sleuth.store.version import ann, dense, keyword

    per_source = 100
    chunk_rows, kw_rows = [], []
    by_source: dict[str, list[dict[str, object]]] = {}
    for i in range(n_chunks):
        source = f"uploads/synthetic/doc-{i // per_source:05d}.txt"
        text = " ".join(rng.choice(WORDS, size=60, p=_WEIGHTS)) + f" REF-{i:06d}."
        cid = "chk_" + hashlib.sha256(f"{source}{i}".encode()).hexdigest()[:16]
        row = {
            "id": cid,
            "source_path": source,
            "page": (i % per_source) // 3 + 1,  # about three chunks a page, as in real documents
            "start": 0,
            "end": len(text),
            "section_path": [],
            "text": text,
            "tokens": len(text) // 4,
            "sha256": "",
        }
        by_source.setdefault(source, []).append(row)
        kw_rows.append((cid, source, (i % per_source) // 3 + 1, source, "", text))
        chunk_rows.append(cid)
    for source, rows in by_source.items():
        path = root / "knowledge" / "chunks" / f"{source}.jsonl"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    (root / "knowledge" / "sources.json").write_text(json.dumps({s: {"path": s} for s in by_source}))
    (root / "index").mkdir(exist_ok=True)
    keyword.build(root / "index" / "keyword", kw_rows, [])
    if fts5:
        keyword.build_fts5(root / "index" / "keyword.sqlite", kw_rows, [])  # the engine before, for its rows
    dense.write(root / "index" / "dense", "chunks", chunk_rows, matrix, "bench", 384)
    graph_s = 0.0
    if n_chunks >= current().ann_min_vectors and ann.available():
        began = time.perf_counter()
        ann.build(ann.graph_path(root / "index" / "dense", "chunks"), matrix)
        graph_s = time.perf_counter() - began
    dense.write(root / "index" / "dense", "artifacts", [], np.zeros((0, 384), np.float32), "bench", 384)
    write_tables(root / "tables.sqlite", parse_manifest({}), [], [], [], {}, [], [])
    (root / "version.json").write_text(
        json.dumps(
            {
                "version": "v000001",
                "manifest": parse_manifest({}).model_dump(mode="json", by_alias=True),
                "embedder": {"id": "minilm-l6-v2-int8", "dim": 384, "enabled": True},
                "keyword": True,
                "counts": {},
                "flipped_at": "",
            }
        )
    )
    return graph_s


def timed(fn: object, runs: list[object]) -> list[float]:
    out = []
    for arg in runs:
        began = time.perf_counter()
        fn(arg)  # type: ignore[operator]
        out.append((time.perf_counter() - began) * 1000)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    parser.add_argument("--sizes", type=int, nargs="+", default=[100_000, 1_000_000])
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--vectors", choices=["clustered", "random"], default="clustered")
    parser.add_argument("--fts5-max", type=int, default=100_000, help="FTS5 rows up to this size")
    args = parser.parse_args()

    rng = np.random.default_rng(7)
    notes: list[str] = []
    print("\n| chunks | primitive | p50 ms | p99 ms |")
    print("|---|---|---|---|")
    for size in args.sizes:
        with tempfile.TemporaryDirectory() as tmp:
            notes.append(
                measure(Path(tmp) / "v000001", size, args.queries, rng, args.vectors, size <= args.fts5_max)
            )
    print()
    for line in notes:
        print(line)


def engine_rows(
    kb: object,
    loop: asyncio.AbstractEventLoop,
    engine: str,
    queries: list[str],
    indexes: list[int],
    sources: list[str],
) -> dict[str, list[float]]:
    k: Any = kb
    return {
        f"search_source (hybrid), {engine}": timed(
            lambda q: loop.run_until_complete(k.search_source(q, top_k=10)), queries
        ),
        f"search_source_by_keyword, {engine}": timed(
            lambda q: loop.run_until_complete(k.search_source_by_keyword(q, top_k=10)), queries
        ),
        f"search_source_by_keyword (identifier), {engine}": timed(
            lambda i: loop.run_until_complete(k.search_source_by_keyword(f"REF-{i:06d}", top_k=10)), indexes
        ),
        f"search_in_sources (5 sources), {engine}": timed(
            lambda q: loop.run_until_complete(k.search_in_sources(sources, q, max_total=10)), queries
        ),
    }


def measure(root: Path, size: int, n_queries: int, rng: np.random.Generator, kind: str, fts5: bool) -> str:
    from sleuth.sdk.knowledge import Knowledge, ScopedContext
    from sleuth.store.version.dense import DenseIndex

    began = time.perf_counter()
    matrix, query_vectors = make_vectors(size, n_queries, kind, rng)
    graph_s = build_version(root, size, rng, matrix, fts5)
    build_s = time.perf_counter() - began
    vectors = list(query_vectors)
    # Queries read like questions: a few words, mostly of middle frequency.
    queries = [" ".join(rng.choice(WORDS[20:2000], size=4)) for _ in range(n_queries)]
    by_text = dict(zip(queries, vectors, strict=True))

    async def embed(_model: str, text: str) -> npt.NDArray[np.float32]:
        return by_text.get(text, vectors[0])

    sources = [f"uploads/synthetic/doc-{i:05d}.txt" for i in range(5)]
    indexes = list(range(n_queries))
    exact = [np.argsort(-(matrix @ v), kind="stable")[:10] for v in vectors]
    rows = {
        "numpy exact scan (baseline)": timed(
            lambda i: np.argpartition(-(matrix @ vectors[i]), 10)[:10], indexes
        )
    }
    index = DenseIndex(root / "index" / "dense", "chunks")
    path = "HNSW graph" if index.graph is not None else "exact scan"
    rows[f"dense search alone ({path}, store.dense)"] = timed(lambda i: index.search(vectors[i], 10), indexes)
    ids = index.ids
    recall = [
        len({ids[int(j)] for j in exact[i]} & {h.id for h in index.search(vectors[i], 10)}) / 10
        for i in indexes
    ]
    tantivy_dir, parked = root / "index" / "keyword", root / "index" / "keyword.parked"
    for engine in ("FTS5, before", "tantivy") if fts5 else ("tantivy",):
        if engine.startswith("FTS5"):
            tantivy_dir.rename(parked)  # open_index then finds only keyword.sqlite
        elif parked.exists():
            parked.rename(tantivy_dir)
        kb = Knowledge([ScopedContext("bench", root)], embed=embed)
        kb.outline_knowledge()
        loop = asyncio.new_event_loop()
        loop.run_until_complete(kb.search_source(queries[0]))  # load the chunk table once, as a turn would
        rows |= engine_rows(kb, loop, engine, queries, indexes, sources)
        if engine == "tantivy":  # the second stage before issue 44, in the same run
            readers = [c.reader for c in kb._contexts.values()]
            shipped = readers[0].page_ranker
            for reader in readers:
                reader.page_ranker = None
            rows["search_source (hybrid), tantivy, fixed fusion (before the learned ranker)"] = timed(
                lambda q, kb=kb, loop=loop: loop.run_until_complete(kb.search_source(q, top_k=10)), queries
            )
            for reader in readers:
                reader.page_ranker = shipped
        loop.close()
    for name, values in rows.items():
        p99 = sorted(values)[int(0.99 * (len(values) - 1))]
        print(f"| {size:,} | {name} | {statistics.median(values):.2f} | {p99:.2f} |")
    print(f"| {size:,} | (build of the synthetic version: {build_s:.1f} s) | | |")
    hybrid = statistics.median(rows["search_source (hybrid), tantivy"])
    scan = statistics.median(rows["numpy exact scan (baseline)"])
    return (
        f"{size:,} chunks ({kind} vectors): dense path {path}"
        + (f" (graph built in {graph_s:.1f} s)" if graph_s else "")
        + f", recall@10 against the exact scan {np.mean(recall):.3f}; "
        f"hybrid search_source p50 {hybrid:.2f} ms = {hybrid / scan:.2f}x the exact scan's {scan:.2f} ms"
    )


if __name__ == "__main__":
    main()
