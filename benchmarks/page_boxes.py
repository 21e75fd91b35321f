"""Citation boxes on a contents page: the linear aligner against the difflib matcher it replaced.

    .venv/bin/python benchmarks/page_boxes.py [--lines N] [--baseline-limit SECONDS]

Builds a PDF page of N contents lines (`Item 12 .................... 22`, about 33 characters each:
the leader dots are the case difflib's matcher was cubic on, issue 22 item 7), then times in one run,
in CPU seconds of this process: `store.page_images.span_boxes` for one line near the end (the request
`…/boxes` serves), `align` alone, and the old difflib alignment of the same two texts. The baseline
runs in a child process killed after `--baseline-limit` seconds, so a page it cannot finish still
gives a figure ("> limit").
"""

from __future__ import annotations

import argparse
import difflib
import multiprocessing
import tempfile
import time
from pathlib import Path

import pypdfium2 as pdfium
import pypdfium2.raw as pdfium_c
from fpdf import FPDF

from sleuth.format.text import normalize_text
from sleuth.store.version.page_images import align, span_boxes


def contents_page(path: Path, lines: int) -> Path:
    pdf = FPDF(unit="pt", format=(612, 12 * lines + 80))
    pdf.set_font("Helvetica", size=9)
    pdf.add_page()
    for n in range(1, lines + 1):
        pdf.cell(0, 12, f"Item {n} " + "." * 20 + f" {n % 90 + 10}", new_x="LMARGIN", new_y="NEXT")
    pdf.output(str(path))
    return path


def texts(path: Path) -> tuple[str, str]:
    """The stored page text and pdfium's text by character index, as `span_boxes` reads them."""
    pdf = pdfium.PdfDocument(path)
    textpage = pdf[0].get_textpage()
    stored = normalize_text(textpage.get_text_bounded())
    raw = "".join(chr(pdfium_c.FPDFText_GetUnicode(textpage, i)) for i in range(textpage.count_chars()))
    textpage.close()
    pdf.close()
    return stored, raw


def difflib_align(stored: str, raw: str, start: int, end: int) -> list[int]:
    """The alignment before issue 22 (difflib.SequenceMatcher over the whole page)."""
    out: list[int] = []
    matcher = difflib.SequenceMatcher(None, stored, raw, autojunk=False)
    for a, b, size in matcher.get_matching_blocks():
        lo, hi = max(a, start), min(a + size, end)
        out.extend(b + (i - a) for i in range(lo, hi) if not stored[i].isspace())
    return out


def _baseline(stored: str, raw: str, start: int, end: int, result: multiprocessing.Queue[float]) -> None:
    began = time.process_time()
    difflib_align(stored, raw, start, end)
    result.put(time.process_time() - began)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    parser.add_argument("--lines", type=int, default=300)
    parser.add_argument("--baseline-limit", type=float, default=120.0)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        path = contents_page(Path(tmp) / "contents.pdf", args.lines)
        stored, raw = texts(path)
        start = stored.index(f"Item {args.lines - 10} ")
        end = stored.index("\n", start)
        print(f"page: {args.lines} lines, {len(stored)} characters stored, {len(raw)} in pdfium")

        began = time.process_time()
        found = span_boxes(path, 1, stored, start, end)
        print(f"span_boxes (new): {time.process_time() - began:.3f} CPU s, {len(found.boxes)} box(es)")
        began = time.process_time()
        steps = align(stored, raw).steps
        print(f"align alone: {time.process_time() - began:.3f} CPU s, {steps} steps")

        result: multiprocessing.Queue[float] = multiprocessing.Queue()
        child = multiprocessing.Process(target=_baseline, args=(stored, raw, start, end, result))
        child.start()
        child.join(args.baseline_limit)
        if child.is_alive():
            child.kill()
            child.join()
            print(f"difflib (before): > {args.baseline_limit:.0f} CPU s (stopped)")
        else:
            print(f"difflib (before): {result.get():.3f} CPU s")


if __name__ == "__main__":
    main()
