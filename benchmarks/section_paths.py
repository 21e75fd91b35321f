"""Section paths (issue 43, item 2): do the chunks of Item 1A, Item 7 and Item 8 say so in their path?

    .venv/bin/python benchmarks/section_paths.py [--pdfs ../shared/data/financebench/pdfs]

`benchmarks/section_pages.json` holds, for twelve FinanceBench 10-Ks, the PDF pages each of the three
items covers, labelled by hand page by page (the item's own heading to the last page holding its
text; its notes say where a filing places a section elsewhere). Each filing is parsed and chunked as
a compile does (`pdf.parse`, `chunk_pages` with the default chunking, cut on the target size alone),
and a page of an item is **right** when every chunk on it names the item in its heading path (on the
item's first and last page, which it shares with its neighbours, when one chunk does).

Reported per item, overall, and without the sections a filing places by reference elsewhere (Item 7
and 8 of CVS in an exhibit, Item 8 of Corning and Netflix after Part IV): there the document's own
structure files the statements under another item, and a path that follows it is not wrong. CPU per
page is the parse and the chunking together.
"""

from __future__ import annotations

import argparse
import json
import re
import time
from collections import defaultdict
from pathlib import Path

from sleuth.compile.chunking import chunk_pages
from sleuth.compile.manifest import Chunking
from sleuth.compile.parse import pdf
from sleuth.format.chunks import Chunk

LABELS = Path(__file__).with_name("section_pages.json")
ITEMS = {
    "Item 1A": re.compile(r"^\W*item\s*1a\b", re.IGNORECASE),
    "Item 7": re.compile(r"^\W*item\s*7\b(?!\s*a\b)", re.IGNORECASE),
    "Item 8": re.compile(r"^\W*item\s*8\b", re.IGNORECASE),
}
#: Sections a filing places by reference outside the item's own heading (see each filing's note).
ELSEWHERE = {
    ("CVSHEALTH_2018_10K.pdf", "Item 7"),
    ("CVSHEALTH_2018_10K.pdf", "Item 8"),
    ("CORNING_2021_10K.pdf", "Item 8"),
    ("NETFLIX_2017_10K.pdf", "Item 8"),
}


def _names(chunk: Chunk, item: str) -> bool:
    return any(ITEMS[item].search(heading) for heading in chunk.heading_path)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--pdfs", type=Path, default=Path("../shared/data/financebench/pdfs"))
    parser.add_argument("--misses", type=int, default=3, help="wrong pages to show per filing and item")
    args = parser.parse_args()
    filings: dict[str, dict[str, list[int]]] = json.loads(LABELS.read_text())["filings"]
    right: dict[tuple[str, bool], int] = defaultdict(int)  # (item, placed elsewhere) -> pages right
    total: dict[tuple[str, bool], int] = defaultdict(int)
    cpu, pages_read = 0.0, 0
    misses: list[str] = []
    for name, sections in filings.items():
        began = time.process_time()
        pages = pdf.parse((args.pdfs / name).read_bytes()).pages
        chunks = chunk_pages(name, pages, Chunking())
        cpu += time.process_time() - began
        pages_read += len(pages)
        on_page: dict[int, list[Chunk]] = defaultdict(list)
        for chunk in chunks:
            on_page[chunk.page].append(chunk)
        for item in ITEMS:
            if item not in sections:
                continue
            first, last = sections[item]
            elsewhere = (name, item) in ELSEWHERE
            shown = 0
            for number in range(first, last + 1):
                here = on_page.get(number, [])
                if not here:
                    continue  # a page with no text (a scanned exhibit, a blank page)
                named = [_names(c, item) for c in here]
                ok = any(named) if number in (first, last) else all(named)
                total[item, elsewhere] += 1
                right[item, elsewhere] += ok
                if not ok and shown < args.misses:
                    shown += 1
                    wrong = next(c for c, n in zip(here, named, strict=True) if not n)
                    misses.append(
                        f"- {name} {item} p.{number}: {' > '.join(wrong.heading_path) or '(no path)'}"
                    )
    per_page = cpu / pages_read * 1000
    print(f"{len(filings)} filings, {pages_read:,} pages; parse and chunk {per_page:.2f} ms CPU a page\n")
    print("| item | pages whose chunks name it | placed by reference elsewhere |")
    print("|---|---|---|")
    for item in [*ITEMS, "all"]:
        keys = list(ITEMS) if item == "all" else [item]
        own = sum(right[k, False] for k in keys), sum(total[k, False] for k in keys)
        far = sum(right[k, True] for k in keys), sum(total[k, True] for k in keys)
        cell = f"{own[0]} / {own[1]} ({own[0] / own[1]:.1%})" if own[1] else "-"
        other = f"{far[0]} / {far[1]} ({far[0] / far[1]:.1%})" if far[1] else "-"
        print(f"| {item} | {cell} | {other} |")
    print("\nWrong pages (the path of a chunk on them that does not name the item):\n")
    print("\n".join(misses))


if __name__ == "__main__":
    main()
