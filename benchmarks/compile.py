"""Compile throughput on FinanceBench: pages/s, peak RSS, index size, time per phase.

    .venv/bin/python benchmarks/compile.py [--pdfs DIR] [--limit N] [--home DIR]

Runs, in one process and one table:
  1. a parse-only baseline (pypdfium2 text of every page, nothing else),
  2. the embedding limit: Sleuth's parser, then every page's text embedded once in the embedder's own
     windows (no chunks, no headers, no cache) — what a compile that embeds each word once costs,
  3. a cold compile (empty embedding cache),
  4. an unchanged re-compile (must do no work),
  5. a `--force` compile (re-parses and re-chunks everything; vectors come from the cache).
The compiled context is left in --home so benchmarks/retrieval.py can reuse it.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import resource
import shutil
import sys
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
DEFAULT_PDFS = REPO.parent / "shared" / "data" / "financebench" / "pdfs"
DEFAULT_HOME = REPO / "benchmarks" / "results" / "home"


def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def dir_mb(path: Path) -> float:
    if path.is_file():
        return path.stat().st_size / 1e6
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file()) / 1e6 if path.exists() else 0.0


def embed_limit(corpus: Path, embedder: Any, max_text_bytes: int) -> tuple[float, int]:
    """Seconds to parse every file and embed each page's text once, cut into the embedder's windows
    (no chunking, no header line, no cache), and how many windows that was."""
    from sleuth.compile.parse import parse_source

    began = time.perf_counter()
    texts: list[str] = []
    for path in sorted(corpus.iterdir()):
        for page in parse_source(path, max_text_bytes=max_text_bytes).pages:
            if embedder.window is None:
                texts.append(page.text)
                continue
            starts = embedder.piece_starts(page.text)
            step = embedder.window - 2  # [CLS] and [SEP]
            texts += [
                page.text[starts[i] : (starts[i + step] if i + step < len(starts) else None)]
                for i in range(0, len(starts), step)
            ]
    texts.sort(key=len, reverse=True)
    for begin in range(0, len(texts), 256):
        embedder.embed(texts[begin : begin + 256])
    return time.perf_counter() - began, len(texts)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    parser.add_argument("--pdfs", type=Path, default=DEFAULT_PDFS)
    parser.add_argument("--limit", type=int, default=0, help="only the first N files (0 = all)")
    parser.add_argument("--home", type=Path, default=DEFAULT_HOME)
    parser.add_argument("--keep-cache", action="store_true", help="do not empty the embedding cache first")
    parser.add_argument("--context", default="financebench")
    parser.add_argument("--no-limit", action="store_true", help="skip the embedding-limit row (long)")
    parser.add_argument(
        "--embedding-model",
        default="default",
        help="default (MiniLM int8 ONNX) or minilm-l6-v2-static (the lite embedder)",
    )
    args = parser.parse_args()

    files = sorted(args.pdfs.glob("*.pdf"))
    if args.limit:
        files = files[: args.limit]
    if not files:
        sys.exit(f"no PDFs under {args.pdfs}")
    corpus = args.home.parent / "corpus" / "pdfs"
    if corpus.exists():
        shutil.rmtree(corpus)
    corpus.mkdir(parents=True)
    for f in files:
        os.link(f, corpus / f.name) if f.stat().st_dev == corpus.stat().st_dev else shutil.copy2(f, corpus)
    os.environ["SLEUTH_HOME"] = str(args.home)

    import json

    import pypdfium2 as pdfium

    from sleuth.compile.pipeline import compile_context
    from sleuth.models.embedder import get_embedder
    from sleuth.settings import current
    from sleuth.store.contexts.home import ContextNotFound, Home

    settings = current()  # read once, at the benchmark's start, as a command does
    home = Home(args.home)
    with contextlib.suppress(ContextNotFound):
        shutil.rmtree(home.find(args.context).root)
    embedder = get_embedder(args.embedding_model, threads=settings.embed_threads)
    if not args.keep_cache:
        (home.embedding_cache_dir / f"{embedder.id}.sqlite").unlink(missing_ok=True)
    manifest = args.home.parent / f"{args.context}.manifest.json"
    manifest.write_text(json.dumps({"curate": {"chunks": {"embedding_model": args.embedding_model}}}))

    began = time.perf_counter()
    pages = 0
    for f in files:
        pdf = pdfium.PdfDocument(f)
        for i in range(len(pdf)):
            pdf[i].get_textpage().get_text_bounded()
        pages += len(pdf)
        pdf.close()
    parse_only = time.perf_counter() - began

    limit, windows = (0.0, 0) if args.no_limit else embed_limit(corpus, embedder, settings.max_text_bytes)
    rows: list[tuple[str, float, dict[str, float], dict[str, int | float]]] = []
    for label, force in (("cold compile", False), ("unchanged re-compile", False), ("--force compile", True)):
        began = time.perf_counter()
        report = compile_context(args.context, [corpus], manifest, home=home, force=force, settings=settings)
        rows.append((label, time.perf_counter() - began, report.timings, report.counts))

    version = home.find(args.context).live_version()
    assert version is not None
    vdir = home.find(args.context).version_dir(version)
    counts = rows[0][3]

    print(
        f"\nFinanceBench compile ({embedder.id}): {len(files)} PDFs, {pages:,} pages, "
        f"{counts.get('chunks', 0):,} chunks, {os.cpu_count()} CPUs\n"
    )
    print("| run | wall s | pages/s | vs parse-only | embedded | parse s | chunk s | embed s | index s |")
    print("|---|---|---|---|---|---|---|---|---|")
    print(
        f"| parse-only baseline (pypdfium2) | {parse_only:.1f} | {pages / parse_only:,.0f} | 1.00 | - "
        f"| {parse_only:.1f} | - | - | - |"
    )
    if limit:
        print(
            f"| embedding limit: parse + every page's text once ({windows:,} windows) | {limit:.1f} "
            f"| {pages / limit:,.1f} | {parse_only / limit:.3f} | {windows:,} | - | - | - | - |"
        )
    for label, wall, timings, c in rows:
        print(
            f"| {label} | {wall:.1f} | {pages / wall:,.1f} | {parse_only / wall:.3f} | "
            f"{c.get('embedded', 0):,} | {timings.get('parse', 0):.1f} | {timings.get('chunk', 0):.1f} | "
            f"{timings.get('embed', 0):.1f} | {timings.get('index', 0):.1f} |"
        )
    cold = rows[0][1]
    if limit:
        print(
            f"\ncold compile at {limit / cold:.2f}x the embedding limit "
            f"({pages / cold:.2f} against {pages / limit:.2f} pages/s)"
        )
    print(f"\npeak RSS: {peak_rss_mb():,.0f} MB")
    print("| index part | MB |")
    print("|---|---|")
    for name, path in (
        ("keyword index", vdir / "index" / "keyword"),
        ("dense (chunks + artifacts)", vdir / "index" / "dense"),
        ("tables.sqlite", vdir / "tables.sqlite"),
        ("knowledge (pages + chunks)", vdir / "knowledge"),
        ("embedding cache", args.home / "cache"),
    ):
        print(f"| {name} | {dir_mb(path):,.1f} |")


if __name__ == "__main__":
    main()
