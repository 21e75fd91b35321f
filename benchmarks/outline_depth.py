"""Section depth (issue 25, item 5): what headings read from type add to a PDF's outline, and at what cost.

    .venv/bin/python benchmarks/outline_depth.py [--pdfs ../shared/data/financebench/pdfs] [--limit N]

Every PDF is parsed as a compile parses it, twice in this one run: without the headings read from
type (`pdf.parse(…, fonts=False)`, numbering and bookmarks only: the baseline) and with them. Then
chunked with the default chunking, and read for:

- **CPU a page** for each parse;
- **outline headings a document**;
- **chunks with a path under a numbered item**: chunks whose heading path goes below `Item 7.` and its
  like (deeper than the first two levels), and chunks with no heading path at all;
- **risk factors**: chunks in an `Item 1A` section whose path names a heading below the item (a risk
  factor's title or a group of them);
- a seeded sample of the headings read from type, printed to judge by eye.
"""

from __future__ import annotations

import argparse
import random
import time
from pathlib import Path

from sleuth.compile.chunking import chunk_pages
from sleuth.compile.manifest import Chunking
from sleuth.compile.pages import Page
from sleuth.compile.parse import pdf


def _outline(pages: list[Page]) -> list[str]:
    return [h.text for page in pages for h in (page.outline if page.outline is not None else page.headings)]


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--pdfs", type=Path, default=Path("../shared/data/financebench/pdfs"))
    parser.add_argument("--limit", type=int, default=0, help="at most this many documents (0: all)")
    parser.add_argument("--sample", type=int, default=30)
    args = parser.parse_args()
    files = sorted(args.pdfs.glob("*.pdf"))[: args.limit or None]
    totals = {"base": [0.0, 0, 0, 0, 0, 0, 0], "fonts": [0.0, 0, 0, 0, 0, 0, 0]}
    # cpu seconds, pages, headings, chunks, deep chunks, chunks without a path, risk chunks below the item
    added: list[tuple[str, int, int, str]] = []
    numbered: set[tuple[int, int]] = set()
    risk_chunks = 0
    for path in files:
        data = path.read_bytes()
        for name, fonts in (("base", False), ("fonts", True)):
            began = time.process_time()
            pages = pdf.parse(data, fonts=fonts).pages
            row = totals[name]
            row[0] += time.process_time() - began
            row[1] += len(pages)
            row[2] += len(_outline(pages))
            chunks = chunk_pages(path.name, pages, Chunking())
            row[3] += len(chunks)
            row[4] += sum(1 for c in chunks if len(c.heading_path) > 2)
            row[5] += sum(1 for c in chunks if not c.heading_path)
            for chunk in chunks:
                path_ = [h.lower().replace(" ", "") for h in chunk.heading_path]
                items = [i for i, h in enumerate(path_) if h.startswith("item1a")]
                if items:
                    risk_chunks += name == "base"
                    row[6] += items[0] < len(chunk.heading_path) - 1
            if not fonts:
                numbered = {(p.page, h.start) for p in pages for h in (p.outline or p.headings)}
            else:
                added += [
                    (path.name, page.page, h.level, h.text)
                    for page in pages
                    for h in page.outline or []
                    if (page.page, h.start) not in numbered
                ]
    print(f"{len(files)} documents, {totals['base'][1]:,} pages\n")
    print("| measure | numbering and bookmarks | + headings from type |")
    print("|---|---|---|")
    base, fonts = totals["base"], totals["fonts"]
    print(f"| parse, CPU a page | {base[0] / base[1] * 1000:.2f} ms | {fonts[0] / fonts[1] * 1000:.2f} ms |")
    print(f"| outline headings a document | {base[2] / len(files):.1f} | {fonts[2] / len(files):.1f} |")
    print(f"| chunks | {base[3]:,} | {fonts[3]:,} |")
    print(f"| … with a path deeper than two levels | {base[4] / base[3]:.1%} | {fonts[4] / fonts[3]:.1%} |")
    print(f"| … with no heading path | {base[5] / base[3]:.1%} | {fonts[5] / fonts[3]:.1%} |")
    if risk_chunks:
        print(
            f"| chunks under Item 1A ({risk_chunks:,}) with a heading below the item | "
            f"{base[6] / risk_chunks:.1%} | {fonts[6] / risk_chunks:.1%} |"
        )
    rng = random.Random(25)
    print(f"\n{min(args.sample, len(added))} of the {len(added):,} headings read from type, at random:\n")
    for name, page, level, text in sorted(rng.sample(added, min(args.sample, len(added)))):
        print(f"- {name} p.{page} L{level}: {text[:90]}")


if __name__ == "__main__":
    main()
