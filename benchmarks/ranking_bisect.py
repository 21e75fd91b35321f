"""One row of the ranking bisect (issue 44): page recall of the hybrid search on a compiled context.

    PYTHONPATH=WORKTREE/src .venv/bin/python benchmarks/ranking_bisect.py --home HOME --label NAME \
        [--context fb] [--questions FILE] [--fixed]

Runs with whatever Sleuth is first on `sys.path`, so one script measures a worktree of any commit of
the last rounds (the reader moved from `sleuth.store.search` to `sleuth.store.version.search`). For
each question the hybrid search runs over the whole context and inside the question's filing; a page
is found at its first chunk's rank. `--fixed` turns the learned page ranker off (the fixed fusion), on
commits that have one. Prints one Markdown row: chunks, R@3/5/10 corpus and in filing, ms a search.
How the bisect was run and what it found: `benchmarks/ranking_bisect.md`.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
DATA = REPO.parent / "shared" / "data" / "financebench"
Page = tuple[str, int]


def reader_of(home: Path, context: str) -> Any:
    """The live version's reader, from either layout of the store."""
    try:
        from sleuth.store.contexts.home import Home
        from sleuth.store.version.search import VersionReader
    except ImportError:  # commits before the store was split into rooms
        from sleuth.store.home import Home  # type: ignore[import-not-found,no-redef,unused-ignore]
        from sleuth.store.search import VersionReader  # type: ignore[import-not-found,no-redef,unused-ignore]
    return VersionReader.live(Home(home).find(context))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    parser.add_argument("--home", type=Path, required=True)
    parser.add_argument("--label", required=True)
    parser.add_argument("--context", default="fb")
    parser.add_argument("--questions", type=Path, default=DATA / "questions.jsonl")
    parser.add_argument("--fixed", action="store_true", help="the fixed fusion, not the learned ranker")
    args = parser.parse_args()

    reader = reader_of(args.home, args.context)
    sources = json.loads((reader.root / "knowledge" / "sources.json").read_text("utf-8"))
    by_doc = {Path(p).stem: p for p in sources}
    questions: list[tuple[str, str, set[Page]]] = []
    for line in args.questions.read_text("utf-8").splitlines():
        q = json.loads(line)
        docs = [e.get("evidence_doc_name") or e.get("doc_name") or q["doc_name"] for e in q["evidence"]]
        if q["doc_name"] in by_doc and all(d in by_doc for d in docs):
            gold = {
                (by_doc[d], int(e["evidence_page_num"]) + 1) for d, e in zip(docs, q["evidence"], strict=True)
            }
            questions.append((q["question"], by_doc[q["doc_name"]], gold))
    label = args.label
    if args.fixed and hasattr(reader, "page_ranker"):
        reader.page_ranker = None
        label += " (fixed fusion)"

    def ranked(question: str, doc: str | None) -> list[Page]:
        hits = reader.search(question, top_k=100, mode="hybrid", sources=[doc] if doc else None)
        return list(dict.fromkeys((h.source_path, h.page) for h in hits))

    found = dict.fromkeys(("c3", "c5", "c10", "f3", "f5", "f10"), 0)
    began = time.perf_counter()
    for question, doc, gold in questions:
        for scope, pages in (("c", ranked(question, None)), ("f", ranked(question, doc))):
            for k in (3, 5, 10):
                found[f"{scope}{k}"] += bool(gold & set(pages[:k]))
    n = len(questions)
    ms = (time.perf_counter() - began) * 1000 / (2 * n)
    cells = " | ".join(f"{found[key] / n:.3f}" for key in found)
    print(f"| {label} | {len(reader.chunks):,} | {cells} | {ms:.0f} |")


if __name__ == "__main__":
    main()
