"""Chunks that fit the embedder's window: what they cost at compile time and what they find.

    .venv/bin/python benchmarks/window.py [--pdfs DIR] [--limit N] [--workdir DIR]

Compiles the first N FinanceBench filings twice in one run, cold each time (an empty embedding
cache): with `chunking.fit_embedder: false` (chunks cut on `target_size` alone, as before issue 11;
MiniLM reads the first 256 word pieces of each) and with the default `true`. Then:

- compile: chunks, embedded texts, embed and total seconds, pages/s, and the ratio of the two;
- *tail sentences*: prose sentences (over 100 characters, mostly letters) taken from the part of a
  `false` chunk that its vector never saw (past the 230th word piece), each used verbatim as a query
  inside its own filing. Is its page among the top 10 chunks, with semantic and with hybrid search?
  This is a constructed check of the mechanism (a verbatim sentence favours keyword search), not a
  question set: it measures what becomes findable by meaning once no text is invisible.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import shutil
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
DEFAULT_PDFS = REPO.parent / "shared" / "data" / "financebench" / "pdfs"
SEEN_PIECES = 230  # past the header and well inside what a 256-piece window dropped


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    parser.add_argument("--pdfs", type=Path, default=DEFAULT_PDFS)
    parser.add_argument("--limit", type=int, default=6)
    parser.add_argument("--workdir", type=Path, default=Path("/tmp/sleuth-window-bench"))
    parser.add_argument("--needles", type=int, default=200)
    args = parser.parse_args()

    from sleuth.compile.pipeline import compile_context
    from sleuth.settings import current
    from sleuth.store.contexts.home import Home
    from sleuth.store.version.search import VersionReader

    settings = current()  # read once, at the benchmark's start, as a command does

    files = sorted(args.pdfs.glob("*.pdf"))[: args.limit]
    shutil.rmtree(args.workdir, ignore_errors=True)
    corpus = args.workdir / "corpus" / "pdfs"
    corpus.mkdir(parents=True)
    for f in files:
        shutil.copy2(f, corpus)

    readers: dict[bool, VersionReader] = {}
    rows = []
    for fit in (False, True):
        home_dir = args.workdir / f"home-{'fit' if fit else 'plain'}"
        os.environ["SLEUTH_HOME"] = str(home_dir)
        manifest = args.workdir / f"manifest-{fit}.json"
        manifest.write_text(json.dumps({"curate": {"chunks": {"chunking": {"fit_embedder": fit}}}}))
        home = Home(home_dir)
        began = time.perf_counter()
        report = compile_context("fb", [corpus], manifest, home=home, settings=settings)
        wall = time.perf_counter() - began
        readers[fit] = VersionReader.live(home.find("fb"))
        pages = len({(c.source_path, c.page) for c in readers[fit].chunks.values()})
        rows.append((fit, wall, report.timings.get("embed", 0.0), len(readers[fit].chunks), pages))

    print(f"\n{len(files)} FinanceBench filings, {rows[0][4]:,} pages, cold compiles in one run\n")
    print("| chunking.fit_embedder | chunks | embed s | compile s | pages/s | compile time vs false |")
    print("|---|---|---|---|---|---|")
    for fit, wall, embed, chunks, pages in rows:
        print(
            f"| {str(fit).lower()} | {chunks:,} | {embed:.1f} | {wall:.1f} | {pages / wall:.1f} | "
            f"{wall / rows[0][1]:.2f} |"
        )

    plain = readers[False]
    embedder = plain.embedder
    rng = random.Random(1)
    needles: list[tuple[str, str, int]] = []
    for chunk in rng.sample(list(plain.chunks.values()), len(plain.chunks)):
        starts = embedder.piece_starts(chunk.text)
        if len(starts) <= SEEN_PIECES + 40:
            continue
        tail = chunk.text[starts[SEEN_PIECES] :]
        for sentence in re.split(r"(?<=[.;])\s+", tail)[1:]:  # the first may start mid-sentence
            sentence = sentence.strip()
            if len(sentence) > 100 and sum(ch.isalpha() for ch in sentence) > 0.7 * len(sentence):
                needles.append((sentence[:300], chunk.source_path, chunk.page))
                break
        if len(needles) >= args.needles:
            break

    print(f"\nTail sentences: {len(needles)} prose sentences from the unseen part of `false` chunks")
    print("| chunking.fit_embedder | semantic: page in top 10 | hybrid: page in top 10 |")
    print("|---|---|---|")
    for fit in (False, True):
        found = {}
        for mode in ("semantic", "hybrid"):
            hits = 0
            for query, source, page in needles:
                top = readers[fit].search(query, top_k=10, mode=mode, sources=[source])  # type: ignore[arg-type]
                hits += any(h.page == page for h in top)
            found[mode] = hits / max(len(needles), 1)
        print(f"| {str(fit).lower()} | {found['semantic']:.3f} | {found['hybrid']:.3f} |")


if __name__ == "__main__":
    main()
