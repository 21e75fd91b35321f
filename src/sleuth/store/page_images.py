"""The page viewer's two reads of a PDF page: the page as an image, and where a span of the stored page
text is on it, from the text layer's character positions (issue 14, item 5).

The stored page text is pdfium's text of the page after `format.text.normalize_text`, so its offsets
are not pdfium's character indices wherever normalisation changed something (CRLF → LF, soft hyphens,
ligatures, odd spaces). The two texts are aligned once per request with difflib; a stored character
with no counterpart (a joined line break, say) simply has no box. Boxes are in PDF points with the
origin at the top left, one per line of the span, so a viewer scales them with the image.
"""

from __future__ import annotations

import difflib
import io
from dataclasses import dataclass
from pathlib import Path

import pypdfium2 as pdfium

from sleuth.errors import Invalid, NotFound
from sleuth.format.text import normalize_text

MAX_IMAGE_WIDTH = 3000


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


def render_png(path: Path, number: int, width: int = 1200) -> bytes:
    """Page `number` (1-based) as a PNG `width` pixels wide (at most `MAX_IMAGE_WIDTH`)."""
    pdf = _open(path)
    try:
        page = _page(pdf, number)
        points = page.get_width()
        scale = min(width, MAX_IMAGE_WIDTH) / points if points else 1.0
        image = page.render(scale=scale).to_pil()
        out = io.BytesIO()
        image.save(out, format="PNG", optimize=False)
        return out.getvalue()
    finally:
        pdf.close()


def span_boxes(path: Path, number: int, page_text: str, start: int, end: int) -> PageBoxes:
    """The boxes of `page_text[start:end]` on page `number`, one per line it covers."""
    pdf = _open(path)
    try:
        page = _page(pdf, number)
        width, height = page.get_size()
        textpage = page.get_textpage()
        try:
            raw = textpage.get_text_range()
            if normalize_text(textpage.get_text_bounded()) != page_text:
                return PageBoxes(number, width, height, [], current=False)
            indices = _aligned(page_text, raw, start, end)
            boxes = _lines([textpage.get_charbox(i, loose=True) for i in indices], height)
        finally:
            textpage.close()
        return PageBoxes(number, width, height, boxes, current=True)
    finally:
        pdf.close()


def _aligned(stored: str, raw: str, start: int, end: int) -> list[int]:
    """pdfium's character indices of the stored characters `start..end` that have a counterpart."""
    out: list[int] = []
    matcher = difflib.SequenceMatcher(None, stored, raw, autojunk=False)
    for a, b, size in matcher.get_matching_blocks():
        lo, hi = max(a, start), min(a + size, end)
        out.extend(b + (i - a) for i in range(lo, hi) if not stored[i].isspace())
    return out


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
