"""The page viewer's two reads of a PDF page: the page as an image, and where a span of the stored page
text is on it, from the text layer's character positions (issue 14, item 5).

The stored page text is pdfium's text of the page after `format.text.normalize_text`, so its offsets
are not pdfium's character indices wherever normalisation changed something (CRLF → LF, soft hyphens,
ligatures, odd spaces). The two texts are aligned once per request by `align`, in time linear in the
page (issue 22, item 7: difflib's matcher took seconds to minutes on a contents page's leader dots); a
stored character with no counterpart (a joined line break, say) simply has no box. Boxes are in PDF
points with the origin at the top left, one per line of the span, so a viewer scales them with the
image.

A page image is bounded by its total pixels as well as its width (issue 22, item 6): a tall page is
rendered smaller, so no request makes the server allocate a bitmap over `MAX_IMAGE_PIXELS`.
"""

from __future__ import annotations

import io
import math
from dataclasses import dataclass
from pathlib import Path

import pypdfium2 as pdfium
import pypdfium2.raw as pdfium_c

from sleuth.errors import Invalid, NotFound
from sleuth.format.pdfium_lock import PDFIUM
from sleuth.format.text import normalize_text

MAX_IMAGE_WIDTH = 3000
#: The most pixels a page image has (16 MP: a 64 MB bitmap). An A4 or Letter page at the widest
#: `MAX_IMAGE_WIDTH` is 11.6–12.7 MP, so only pages taller than about 1.8 × their width come out
#: narrower than asked.
MAX_IMAGE_PIXELS = 16_000_000
#: How far `align` looks ahead, in characters of each text, to find where the two texts agree again
#: after a difference, and how many characters must agree to count as agreeing.
ALIGN_WINDOW = 64
ALIGN_ANCHOR = 4


class PageNotFound(NotFound, LookupError):
    """The PDF has no such page."""


class NotAPdf(Invalid, ValueError):
    """Page images and boxes exist for PDF sources only; other formats show their page text."""


@dataclass(frozen=True)
class Box:
    x: float
    y: float
    width: float
    height: float


@dataclass(frozen=True)
class PageBoxes:
    page: int
    width: float  # the page's size in points
    height: float
    boxes: list[Box]
    #: Whether the stored page text is the text of this file's page now; when the file changed after
    #: the version was built, the offsets belong to the old text and no boxes are given.
    current: bool


def _open(path: Path) -> pdfium.PdfDocument:
    if path.suffix.lower() != ".pdf":
        raise NotAPdf(f"{path.name} is not a PDF: its page is shown as text")
    try:
        return pdfium.PdfDocument(path)
    except pdfium.PdfiumError as exc:
        raise NotAPdf(f"{path.name} cannot be opened as a PDF: {exc}") from None


def _page(pdf: pdfium.PdfDocument, number: int) -> pdfium.PdfPage:
    if not 1 <= number <= len(pdf):
        raise PageNotFound(f"no page {number}: the document has {len(pdf)}")
    return pdf[number - 1]


def image_size(points: tuple[float, float], width: int) -> tuple[float, int, int]:
    """The render scale and pixel size of a page `points` (width, height) asked `width` pixels wide:
    at most `MAX_IMAGE_WIDTH` wide and `MAX_IMAGE_PIXELS` in all, whatever the page's shape, decided
    before anything is drawn. pdfium rounds each side up, so the scale is eased until the rounded
    size fits."""
    page_w, page_h = (p if math.isfinite(p) and p > 0 else 1.0 for p in points)
    scale = min(min(width, MAX_IMAGE_WIDTH) / page_w, math.sqrt(MAX_IMAGE_PIXELS / (page_w * page_h)))
    while math.ceil(page_w * scale) * math.ceil(page_h * scale) > MAX_IMAGE_PIXELS:
        scale *= 0.999
    return scale, math.ceil(page_w * scale), math.ceil(page_h * scale)


def render_png(path: Path, number: int, width: int = 1200) -> bytes:
    """Page `number` (1-based) as a PNG `width` pixels wide, or narrower where that would exceed
    `MAX_IMAGE_PIXELS` (see `image_size`)."""
    with PDFIUM:  # pdfium is not thread-safe
        pdf = _open(path)
        try:
            page = _page(pdf, number)
            scale, _w, _h = image_size(page.get_size(), width)
            image = page.render(scale=scale).to_pil()
        finally:
            pdf.close()
    out = io.BytesIO()
    image.save(out, format="PNG", optimize=False)
    return out.getvalue()


def span_boxes(path: Path, number: int, page_text: str, start: int, end: int) -> PageBoxes:
    """The boxes of `page_text[start:end]` on page `number`, one per line it covers."""
    with PDFIUM:  # pdfium is not thread-safe
        return _span_boxes(path, number, page_text, start, end)


def _span_boxes(path: Path, number: int, page_text: str, start: int, end: int) -> PageBoxes:
    pdf = _open(path)
    try:
        page = _page(pdf, number)
        width, height = page.get_size()
        textpage = page.get_textpage()
        try:
            if normalize_text(textpage.get_text_bounded()) != page_text:
                return PageBoxes(number, width, height, [], current=False)
            # One character per pdfium character index, so a position in `raw` is a char index.
            raw = "".join(
                chr(pdfium_c.FPDFText_GetUnicode(textpage, i)) for i in range(textpage.count_chars())
            )
            found = align(page_text, raw, end).raw_index[start:end]
            indices = [j for k, j in enumerate(found) if j >= 0 and (k == 0 or found[k - 1] != j)]
            boxes = _lines([textpage.get_charbox(i, loose=True) for i in indices], height)
        finally:
            textpage.close()
        return PageBoxes(number, width, height, boxes, current=True)
    finally:
        pdf.close()


@dataclass(frozen=True)
class Alignment:
    #: For each stored character, the index of its counterpart in the raw text, or -1 (whitespace,
    #: a character normalisation made, or one past the `end` the alignment was asked for).
    raw_index: list[int]
    #: Characters compared and looked up while aligning: the work done, which a test bounds.
    steps: int


def _folded(raw: str) -> tuple[str, list[int]]:
    """The raw text as `normalize_text` would write each character (a ligature spelled out, a soft
    hyphen or control character gone), whitespace dropped, with each character's raw index."""
    forms: dict[str, str] = {}
    chars: list[str] = []
    index: list[int] = []
    for j, ch in enumerate(raw):
        form = forms.get(ch)
        if form is None:
            form = forms[ch] = "".join(c for c in normalize_text(ch) if not c.isspace())
        chars.extend(form)
        index.extend([j] * len(form))
    return "".join(chars), index


def align(stored: str, raw: str, end: int | None = None) -> Alignment:
    """Which raw character each stored character `[0, end)` is, by a greedy walk of the two texts
    with whitespace left out of both: equal characters pair up; at a difference, the nearest place
    (fewest characters skipped on the two sides together, within `ALIGN_WINDOW` of each) where
    `ALIGN_ANCHOR` characters agree again is found through a table of the raw side's n-grams, and
    what was skipped has no counterpart. No place within the window: one character of each is
    skipped. Each step costs at most O(window), so the whole is linear in the texts, where difflib's
    matcher was cubic on runs of one character (leader dots)."""
    end = len(stored) if end is None else min(end, len(stored))
    a_index = [i for i in range(end) if not stored[i].isspace()]
    a = "".join(stored[i] for i in a_index)
    b, b_index = _folded(raw)
    out = [-1] * len(stored)
    steps = len(raw)
    i = j = 0
    while i < len(a) and j < len(b):
        steps += 1
        if a[i] == b[j]:
            out[a_index[i]] = b_index[j]
            i, j = i + 1, j + 1
            continue
        skip, work = _resync(a, b, i, j)
        steps += work
        i, j = (i + skip[0], j + skip[1]) if skip else (i + 1, j + 1)
    return Alignment(out, steps)


def _resync(a: str, b: str, i: int, j: int) -> tuple[tuple[int, int] | None, int]:
    """The fewest characters to skip in `a` from `i` and in `b` from `j` (together) so that the next
    `ALIGN_ANCHOR` characters agree (one near the end), within `ALIGN_WINDOW`; and the work done."""
    size = ALIGN_ANCHOR if min(len(a) - i, len(b) - j) >= ALIGN_ANCHOR else 1
    grams: dict[str, int] = {}
    reach = min(ALIGN_WINDOW, len(b) - j - size + 1)
    for dj in range(reach):
        grams.setdefault(b[j + dj : j + dj + size], dj)
    work = reach + 1
    best: tuple[int, int] | None = None
    for di in range(min(ALIGN_WINDOW, len(a) - i - size + 1)):
        if best is not None and di >= best[0] + best[1]:
            break
        work += 1
        at = grams.get(a[i + di : i + di + size])
        if at is not None and (best is None or di + at < best[0] + best[1]):
            best = (di, at)
    return best, work * size


def _lines(charboxes: list[tuple[float, float, float, float]], page_height: float) -> list[Box]:
    """Character boxes (left, bottom, right, top; PDF origin at the bottom left) merged into one box
    per run of characters on the same line, with the origin moved to the top left."""
    boxes: list[list[float]] = []  # left, bottom, right, top
    for left, bottom, right, top in charboxes:
        if right <= left or top <= bottom:
            continue
        if boxes:
            line = boxes[-1]
            same_line = abs(top - line[3]) < 0.6 * (line[3] - line[1]) and left >= line[0] - 1.0
            if same_line:
                line[:] = [min(line[0], left), min(line[1], bottom), max(line[2], right), max(line[3], top)]
                continue
        boxes.append([left, bottom, right, top])
    return [
        Box(round(b[0], 2), round(page_height - b[3], 2), round(b[2] - b[0], 2), round(b[3] - b[1], 2))
        for b in boxes
    ]
