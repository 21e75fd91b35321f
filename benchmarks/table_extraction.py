"""PDF tables as data (issue 25, item 2): are a question's figures cells of an extracted table?

    .venv/bin/python benchmarks/table_extraction.py --questions ../shared/data/financebench/questions.jsonl \
        [--pdfs DIR]

For each FinanceBench question, the evidence pages FinanceBench names are parsed as a compile parses
them (`compile.parse.pdf.parse`, which runs the layout-table finder) and read for:

- **statement pages**: pages holding a statement table by a test independent of the finder (at least
  six lines of a label followed by two or more figures);
- **rows whole**: of those lines, the share that are a table row with every figure a cell and the
  label whole in the first cell;
- **literal answers**: questions FinanceBench marks "Information extraction" whose answer figure
  (`$1577.00`) is printed on the evidence page, in the page's unit or a thousand times it; of those,
  **cell**: it is a cell of an extracted table; **cell with period**: and its column header holds
  the fiscal year the question asks about (when it names one); **cell with row**: and its row label
  shares a word with the line item
  FinanceBench's justification names (when it names one).

Timing: CPU seconds a page for the parse without the finder (`pdf.parse(…, tables=False)`) and
with it, over every evidence document's pages, in this one run.
"""

from __future__ import annotations

import argparse
import json
import re
import time
from collections import defaultdict
from pathlib import Path

from sleuth.compile.pages import Page
from sleuth.compile.parse import pdf

_FIGURE_LINE = re.compile(r"^[A-Za-z][^\n]*?\s[$(]?\s?[\d,.]+\)?%?\s+[$(]?\s?[\d,.]+\)?%?\s*$")
_NUMBER = re.compile(r"\(?-?[$]?\s?(\d[\d,]*(?:\.\d+)?)\)?")
_ANSWER = re.compile(r"^\s*\$?\s?(-?[\d,]+(?:\.\d+)?)\s*(%|billion|million|thousand)?", re.IGNORECASE)
_FY = re.compile(r"\bFY\s?'?(\d{2,4})\b|\b(?:fiscal|year|end of|in)\s+(20\d\d)\b|\b(20\d\d)\b", re.IGNORECASE)
_LINE_ITEM = re.compile(r"line item name, as seen in the 10K, was:\s*(.+?)\.?\s*$", re.IGNORECASE | re.DOTALL)
_WORD = re.compile(r"[a-z]{3,}")


def number(text: str) -> float | None:
    match = _NUMBER.search(text)
    if not match:
        return None
    try:
        value = float(match.group(1).replace(",", ""))
    except ValueError:
        return None
    return -value if text.strip().startswith("(") or "-" in text[: match.start(1)] else value


def answer_value(answer: str) -> float | None:
    match = _ANSWER.match(answer)
    if not match:
        return None
    return abs(float(match.group(1).replace(",", "")))


def asked_year(question: str) -> int | None:
    for match in _FY.finditer(question):
        raw = next(g for g in match.groups() if g)
        year = int(raw)
        return 2000 + year if year < 100 else year
    return None


def close(a: float, b: float) -> bool:
    return abs(a - b) <= max(0.006 * abs(b), 0.006)


def matches(value: float, answer: float) -> bool:
    return any(close(abs(value) * scale, answer) for scale in (1, 1e-3, 1e3))


def statement_lines(page: Page) -> list[tuple[int, int]]:
    out = []
    offset = 0
    for line in page.text.split("\n"):
        if _FIGURE_LINE.match(line.strip()):
            out.append((offset, offset + len(line)))
        offset += len(line) + 1
    return out


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--questions", type=Path, required=True)
    parser.add_argument("--pdfs", type=Path, default=None)
    args = parser.parse_args()
    pdfs = args.pdfs or args.questions.parent / "pdfs"
    questions = [json.loads(line) for line in args.questions.read_text().splitlines() if line.strip()]
    docs = sorted({q["doc_name"] for q in questions if (pdfs / f"{q['doc_name']}.pdf").exists()})

    parsed: dict[str, list[Page]] = {}
    plain_s = tables_s = 0.0
    page_count = 0
    for doc in docs:
        data = (pdfs / f"{doc}.pdf").read_bytes()
        t0 = time.process_time()
        pdf.parse(data, tables=False)
        t1 = time.process_time()
        parsed[doc] = pdf.parse(data).pages
        t2 = time.process_time()
        plain_s += t1 - t0
        tables_s += t2 - t1
        page_count += len(parsed[doc])

    statement_pages: set[tuple[str, int]] = set()
    rows_seen = rows_whole = labels_whole = 0
    tally: dict[str, int] = defaultdict(int)
    misses: list[str] = []
    for q in questions:
        pages = parsed.get(q["doc_name"])
        if not pages:
            continue
        evidence = [e["evidence_page_num"] for e in q.get("evidence") or []]
        held = [pages[n] for n in evidence if 0 <= n < len(pages)]
        statement = [p for p in held if len(statement_lines(p)) >= 6]
        for page in statement:
            key = (q["doc_name"], page.page)
            if key in statement_pages:
                continue
            statement_pages.add(key)
            rows = {r.start: r for t in page.tables for r in t.rows[1:] if r.spans}
            ends = {r.end: r for r in rows.values()}
            for start, end in statement_lines(page):
                rows_seen += 1
                row = rows.get(start) or ends.get(end)
                if row is None:
                    continue
                figures = re.findall(
                    r"[\d][\d,.]*", page.text[row.spans[-1][0] if row.spans[-1] else start : end]
                )
                whole = row.end == end and len(row.cells) >= 3 and bool(figures)
                rows_whole += whole
                label = row.cells[0]
                labels_whole += whole and bool(label) and page.text[start:end].strip().startswith(label)
        if not statement:
            continue
        tally["statement questions"] += 1
        answer = answer_value(q["answer"]) if q.get("answer") else None
        extracted = "information extraction" in (q.get("question_reasoning") or "").lower()
        if answer is None or answer == 0 or not extracted:
            continue  # a computed answer may equal some cell by chance
        printed = [
            p
            for p in statement
            if any(
                (v := number(tok)) is not None and matches(v, answer)
                for tok in re.findall(r"\(?\$?\d[\d,]*(?:\.\d+)?\)?", p.text)
            )
        ]
        if not printed:
            continue
        tally["literal answers"] += 1
        year = asked_year(q["question"])
        item = _LINE_ITEM.search(q.get("justification") or "")
        item_words = set(_WORD.findall(item.group(1).lower())) if item else set()
        best = 0
        for page in printed:
            for table in page.tables:
                headers = table.rows[0].cells
                for row in table.rows[1:]:
                    for i, cell in enumerate(row.cells[1:], start=1):
                        value = number(cell)
                        if value is None or not matches(value, answer):
                            continue
                        level = 1
                        header = headers[i] if i < len(headers) else ""
                        if year is None or str(year) in header:
                            level = 2
                            label_words = set(_WORD.findall(row.cells[0].lower()))
                            if not item_words or item_words & label_words:
                                level = 3
                        best = max(best, level)
        tally["cell"] += best >= 1
        tally["cell with period"] += best >= 2
        tally["cell with period and row"] += best >= 3
        if best < 3:
            what = f"answer {q['answer'][:20]!r} level {best}"
            misses.append(f"{q['financebench_id']} {q['doc_name']} p.{evidence} {what}")

    print(f"documents {len(docs)}, pages {page_count}")
    print()
    print("| measure | value |")
    print("|---|---|")
    print(f"| statement pages (evidence pages with >= 6 label-and-figures lines) | {len(statement_pages)} |")
    if rows_seen:
        share, labels = rows_whole / rows_seen, labels_whole / rows_seen
        print(f"| their figure lines that are a whole table row | {rows_whole} / {rows_seen} ({share:.0%}) |")
        print(f"| ... with the label whole in the first cell | {labels_whole} / {rows_seen} ({labels:.0%}) |")
    print(f"| questions with a statement evidence page | {tally['statement questions']} |")
    lit = tally["literal answers"]
    print(f"| ... whose answer figure is printed on it | {lit} |")
    for name in ("cell", "cell with period", "cell with period and row"):
        found = tally[name]
        print(f"| ... a {name} of an extracted table | {found} / {lit} ({found / max(lit, 1):.0%}) |")
    print()
    print("| parse, CPU s a page | without tables | with tables |")
    print("|---|---|---|")
    plain, tables = plain_s / page_count * 1000, tables_s / page_count * 1000
    print(f"| {page_count} pages | {plain:.2f} ms | {tables:.2f} ms |")
    print()
    for line in misses:
        print("miss:", line)


if __name__ == "__main__":
    main()
