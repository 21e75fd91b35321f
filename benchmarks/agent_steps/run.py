"""Steps a capable model writes, with stop 33's primitives, with issue 25's (reading around a hit,
`must_contain`, `latest`, `per_source`) and, where a table holds the figures, with `_cells`.

    SLEUTH_HOME=benchmarks/results/home .venv/bin/python benchmarks/agent_steps/run.py \
        --questions ../shared/data/financebench/questions.jsonl [--context financebench]

Each question is a folder `qNN-<financebench id>/` with two step sequences, `before/` (stop 33's
primitives: the searches with their filters, `query_db`) and `after/` (issue 25's too), one file a step,
each written as a model would after reading the previous step's output; a question whose figures
are table cells also has `tables/`, the same question read from `_cells` (issue 25, item 2). Every
step runs in a fresh sandbox through `sleuth exec` (the output a model reads, cut at 10,000
characters), so a later step names what it read by path and page, not by evidence label. The table
gives, per question and sequence: the steps, the characters printed, and whether the printed output
shows the question's evidence page
(FinanceBench's `evidence_page_num`, 0-based, printed as `p.<N>` or `[E.. p.<N>]` with the document's
name in the output). It says what reading costs, not whether the answer is right.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
SLEUTH = Path(sys.executable).parent / "sleuth"


def run_step(step: Path, context: str) -> str:
    done = subprocess.run(
        [str(SLEUTH), "exec", "--context", context, str(step)],
        capture_output=True,
        text=True,
        env=os.environ,
        timeout=300,
        check=False,
    )
    return done.stdout + done.stderr


def shows_evidence(output: str, document: str, pages: set[int]) -> bool:
    """The output names the evidence document and one of its evidence pages."""
    if document.casefold() not in output.casefold():
        return False
    return any(re.search(rf"\bp\.\s?{page}\b", output) for page in pages)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    parser.add_argument("--questions", type=Path, required=True)
    parser.add_argument("--context", default="financebench")
    args = parser.parse_args()
    questions = {
        q["financebench_id"]: q
        for q in (json.loads(line) for line in args.questions.read_text("utf-8").splitlines() if line)
    }
    rows = []
    for folder in sorted(p for p in HERE.iterdir() if p.is_dir() and p.name.startswith("q")):
        question = questions[folder.name.split("-", 1)[1]]
        pages = {int(e["evidence_page_num"]) + 1 for e in question["evidence"]}
        row: dict[str, object] = {"question": folder.name, "document": question["doc_name"]}
        for side in ("before", "after", "tables"):
            if not (folder / side).is_dir():
                continue
            outputs = [run_step(step, args.context) for step in sorted((folder / side).glob("step*.py"))]
            printed = "".join(outputs)
            row[side] = {
                "steps": len(outputs),
                "chars": len(printed),
                "evidence": shows_evidence(printed, question["doc_name"], pages),
            }
        rows.append(row)
        print(json.dumps(row), flush=True)
    shown = "steps / chars / evidence page shown"
    print(f"\n| question | before: {shown} | after: {shown} | tables: {shown} |")
    print("|---|---|---|---|")
    for row in rows:
        cells = []
        for side in ("before", "after", "tables"):
            s = row.get(side)
            cells.append(
                f"{s['steps']} / {s['chars']:,} / {'yes' if s['evidence'] else 'no'}"
                if isinstance(s, dict)
                else "—"
            )
        print(f"| {row['question']} | " + " | ".join(cells) + " |")
    for side in ("before", "after", "tables"):
        sides = [r[side] for r in rows if side in r]
        if not sides:
            continue
        steps = sum(s["steps"] for s in sides) / max(1, len(sides))  # type: ignore[index]
        chars = sum(s["chars"] for s in sides) / max(1, len(sides))  # type: ignore[index]
        found = sum(bool(s["evidence"]) for s in sides)  # type: ignore[index]
        print(f"{side}: {steps:.1f} steps, {chars:,.0f} chars a question; evidence page {found}/{len(sides)}")


if __name__ == "__main__":
    main()
