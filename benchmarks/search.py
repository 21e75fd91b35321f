"""Latency of the search primitives at 10k and 100k chunks, next to an exact NumPy scan.

    .venv/bin/python benchmarks/search.py [--sizes 10000 100000] [--queries 200]

Keyword rows are given for both engines in the same run: tantivy (now) and SQLite FTS5 (before).

The corpus is synthetic (word sequences drawn from a fixed vocabulary, one identifier per chunk,
random unit vectors of 384 dimensions), written in the real on-disk layout with the real index
writers, and searched through the SDK (`Knowledge`) exactly as a REPL step would, except that the
query vector is handed in (inside the sandbox it comes from the host's `embed` function, which is
timed separately by benchmarks/sandbox.py and the compile benchmark).
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


def build_version(root: Path, n_chunks: int, rng: np.random.Generator) -> npt.NDArray[np.float32]:
    from sleuth.compile.manifest import parse_manifest
    from sleuth.compile.tables_db import write_tables
    from sleuth.store import dense, keyword

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
            "page": 1,
            "start": 0,
            "end": len(text),
            "section_path": [],
            "text": text,
            "tokens": len(text) // 4,
            "sha256": "",
        }
        by_source.setdefault(source, []).append(row)
        kw_rows.append((cid, source, 1, source, "", text))
        chunk_rows.append(cid)
    for source, rows in by_source.items():
        path = root / "knowledge" / "chunks" / f"{source}.jsonl"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    (root / "knowledge" / "sources.json").write_text(json.dumps({s: {"path": s} for s in by_source}))
    (root / "index").mkdir(exist_ok=True)
    keyword.build(root / "index" / "keyword", kw_rows, [])
    keyword.build_fts5(root / "index" / "keyword.sqlite", kw_rows, [])  # the engine before, for its rows
    matrix = rng.standard_normal((n_chunks, 384)).astype(np.float32)
    matrix /= np.linalg.norm(matrix, axis=1, keepdims=True)
    dense.write(root / "index" / "dense", "chunks", chunk_rows, matrix, "bench", 384)
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
    return matrix


def timed(fn: object, runs: list[object]) -> list[float]:
    out = []
    for arg in runs:
        began = time.perf_counter()
        fn(arg)  # type: ignore[operator]
        out.append((time.perf_counter() - began) * 1000)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    parser.add_argument("--sizes", type=int, nargs="+", default=[10_000, 100_000])
    parser.add_argument("--queries", type=int, default=200)
    args = parser.parse_args()

    rng = np.random.default_rng(7)
    print("\n| chunks | primitive | p50 ms | p99 ms |")
    print("|---|---|---|---|")
    for size in args.sizes:
        with tempfile.TemporaryDirectory() as tmp:
            measure(Path(tmp) / "v000001", size, args.queries, rng)


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


def measure(root: Path, size: int, n_queries: int, rng: np.random.Generator) -> None:
    from sleuth.sdk.knowledge import Knowledge, ScopedContext

    began = time.perf_counter()
    matrix = build_version(root, size, rng)
    build_s = time.perf_counter() - began
    vectors = [v / np.linalg.norm(v) for v in rng.standard_normal((n_queries, 384)).astype(np.float32)]
    # Queries read like questions: a few words, mostly of middle frequency.
    queries = [" ".join(rng.choice(WORDS[20:2000], size=4)) for _ in range(n_queries)]
    by_text = dict(zip(queries, vectors, strict=True))

    async def embed(_model: str, text: str) -> npt.NDArray[np.float32]:
        return by_text.get(text, vectors[0])

    sources = [f"uploads/synthetic/doc-{i:05d}.txt" for i in range(5)]
    indexes = list(range(n_queries))
    rows = {
        "numpy exact scan (baseline)": timed(
            lambda i: np.argpartition(-(matrix @ vectors[i]), 10)[:10], indexes
        )
    }
    tantivy_dir, parked = root / "index" / "keyword", root / "index" / "keyword.parked"
    for engine in ("FTS5, before", "tantivy"):
        if engine.startswith("FTS5"):
            tantivy_dir.rename(parked)  # open_index then finds only keyword.sqlite
        else:
            parked.rename(tantivy_dir)
        kb = Knowledge([ScopedContext("bench", root)], embed=embed)
        kb.outline_knowledge()
        loop = asyncio.new_event_loop()
        loop.run_until_complete(kb.search_source(queries[0]))  # load the chunk table once, as a turn would
        rows |= engine_rows(kb, loop, engine, queries, indexes, sources)
        loop.close()
    for name, values in rows.items():
        p99 = sorted(values)[int(0.99 * (len(values) - 1))]
        print(f"| {size:,} | {name} | {statistics.median(values):.2f} | {p99:.2f} |")
    print(f"| {size:,} | (build of the synthetic version: {build_s:.1f} s) | | |")


if __name__ == "__main__":
    main()
