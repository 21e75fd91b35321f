"""Peak memory (RSS) of a compile and of a server holding one version, by corpus size.

    .venv/bin/python benchmarks/memory.py [--sizes 10000 100000 1000000] [--compile-sizes 10000 100000]

Each figure is the peak resident set (`VmHWM`) of a fresh child process, beside a baseline child
that imports the same modules and does nothing else (the same run, the same interpreter):

- server: opens a synthetic version of N chunks (benchmarks/search.py's layout: real index writers,
  an HNSW graph from SLEUTH_ANN_MIN_VECTORS) through the SDK as a turn does, runs 50 hybrid
  searches and reads the pages of 200 hits. The dense matrix and the graph are memory-mapped: their
  pages count in RSS once touched, but belong to the page cache, shared by every process on the node.
- compile: compiles a synthetic Markdown corpus cut into N chunks (50 sections of ~1,900 characters
  per file) with the `lite` embedder (the default MiniLM would take hours at 1M chunks). A compile
  holds one source's text at a time and writes vectors to disk a buffer at a time (spec/context.md
  §5.1), so the embedder's width changes the file, not the peak.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.util
import json
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent


def peak_mb() -> float:
    """This process's peak resident set since its exec (`VmHWM`; `ru_maxrss` on Linux also counts the
    forking parent's peak, which here holds the synthetic corpus)."""
    status = Path("/proc/self/status")
    if status.exists():
        for line in status.read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def search_bench() -> object:
    spec = importlib.util.spec_from_file_location("search_bench", HERE / "search.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def probe_server(root: Path, baseline: bool) -> None:
    from sleuth.sdk.knowledge import Knowledge, ScopedContext

    if baseline:
        print(json.dumps({"peak_mb": peak_mb()}))
        return
    rng = np.random.default_rng(3)
    vectors = rng.standard_normal((50, 384)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    words = search_bench().WORDS  # type: ignore[attr-defined]
    queries = [" ".join(rng.choice(words[20:2000], size=4)) for _ in range(50)]
    by_text = dict(zip(queries, vectors, strict=True))

    async def embed(_model: str, text: str) -> np.ndarray:
        return by_text.get(text, vectors[0])

    async def run() -> None:
        kb = Knowledge([ScopedContext("bench", root)], embed=embed)
        kb.outline_knowledge()
        reader = kb._contexts["bench"].reader if hasattr(kb, "_contexts") else None
        hits = []
        for query in queries:
            hits += await kb.search_source(query, top_k=10)
        if reader is not None:
            for hit in hits[:200]:
                reader.page_text(hit.fields["source_path"], hit.fields["page"])

    began = time.perf_counter()
    asyncio.run(run())
    print(json.dumps({"peak_mb": peak_mb(), "s": time.perf_counter() - began}))


def write_corpus(directory: Path, chunks: int) -> None:
    rng = np.random.default_rng(5)
    words = search_bench().WORDS  # type: ignore[attr-defined]
    per_file = 50
    directory.mkdir(parents=True)
    for f in range(max(1, chunks // per_file)):
        sections = []
        for k in range(per_file):
            body = " ".join(rng.choice(words, size=300))
            sections.append(f"## Section {k} of file {f}\n\n{body[:1900]}\n")
        (directory / f"doc-{f:06d}.md").write_text(
            f"# Document {f}\n\n" + "\n".join(sections), encoding="utf-8"
        )


def probe_compile(corpus: Path, home: Path, baseline: bool) -> None:
    from sleuth.compile.pipeline import compile_context
    from sleuth.settings import current
    from sleuth.store.contexts.home import Home

    if baseline:
        print(json.dumps({"peak_mb": peak_mb()}))
        return
    manifest = home / "manifest.json"
    home.mkdir(parents=True, exist_ok=True)
    manifest.write_text(json.dumps({"curate": {"chunks": {"embedding_model": "minilm-l6-v2-static"}}}))
    began = time.perf_counter()
    report = compile_context("mem", [corpus], manifest, home=Home(home), settings=current())
    print(
        json.dumps(
            {"peak_mb": peak_mb(), "s": time.perf_counter() - began, "chunks": report.counts.get("chunks", 0)}
        )
    )


def child(*args: str) -> dict[str, float]:
    out = subprocess.run([sys.executable, __file__, *args], capture_output=True, text=True, check=True)
    result: dict[str, float] = json.loads(out.stdout.strip().splitlines()[-1])
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    parser.add_argument("--sizes", type=int, nargs="+", default=[10_000, 100_000, 1_000_000])
    parser.add_argument("--compile-sizes", type=int, nargs="+", default=[10_000, 100_000])
    parser.add_argument("--probe-server", type=Path)
    parser.add_argument("--probe-compile", type=Path, nargs=2)
    parser.add_argument("--baseline", action="store_true")
    args = parser.parse_args()
    if args.probe_server:
        return probe_server(args.probe_server, args.baseline)
    if args.probe_compile:
        return probe_compile(*args.probe_compile, baseline=args.baseline)

    bench = search_bench()
    print("\n| what | chunks | peak RSS MB | baseline MB | above baseline MB | s |")
    print("|---|---|---|---|---|---|")
    for size in args.sizes:
        with tempfile.TemporaryDirectory() as tmp:
            root = Path(tmp) / "v000001"
            rng = np.random.default_rng(7)
            matrix, _queries = bench.make_vectors(size, 1, "clustered", rng)  # type: ignore[attr-defined]
            bench.build_version(root, size, rng, matrix, False)  # type: ignore[attr-defined]
            del matrix
            base = child("--probe-server", str(root), "--baseline")
            got = child("--probe-server", str(root))
            print(
                f"| server holding one version, 50 hybrid searches | {size:,} | {got['peak_mb']:,.0f} "
                f"| {base['peak_mb']:,.0f} | {got['peak_mb'] - base['peak_mb']:,.0f} | {got['s']:.1f} |",
                flush=True,
            )
    for size in args.compile_sizes:
        with tempfile.TemporaryDirectory() as tmp:
            corpus = Path(tmp) / "corpus"
            write_corpus(corpus, size)
            base = child("--probe-compile", str(corpus), str(Path(tmp) / "home0"), "--baseline")
            got = child("--probe-compile", str(corpus), str(Path(tmp) / "home"))
            print(
                f"| compile (lite embedder), {int(got['chunks']):,} chunks | {size:,} "
                f"| {got['peak_mb']:,.0f} | {base['peak_mb']:,.0f} "
                f"| {got['peak_mb'] - base['peak_mb']:,.0f} | {got['s']:.1f} |",
                flush=True,
            )


if __name__ == "__main__":
    main()
