"""The page viewer's PDF reads are bounded by design (issue 22): a page image never has more than
`MAX_IMAGE_PIXELS` whatever the page's shape (item 6), and the boxes of a span come from an alignment
whose work is linear in the page, leader dots included (item 7). Work is bounded by the aligner's own
step count; the one CPU-time bound here is generous on purpose (timings are in
`benchmarks/page_boxes.py`)."""

from __future__ import annotations

import io
import random
import time
from pathlib import Path

import pypdfium2 as pdfium
import pypdfium2.raw as pdfium_c
from PIL import Image

from sleuth.format.text import normalize_text
from sleuth.store.version.page_images import (
    ALIGN_ANCHOR,
    ALIGN_WINDOW,
    MAX_IMAGE_PIXELS,
    MAX_IMAGE_WIDTH,
    align,
    image_size,
    render_png,
    span_boxes,
)
from tests.support import LEADER_LINES, contents_page, tall_page


def _texts(path: Path) -> tuple[str, str, list[tuple[float, float, float, float]]]:
    """The stored page text (as the compiler stores it), pdfium's text by character index, and each
    character's box."""
    pdf = pdfium.PdfDocument(path)
    textpage = pdf[0].get_textpage()
    count = textpage.count_chars()
    stored = normalize_text(textpage.get_text_bounded())
    raw = "".join(chr(pdfium_c.FPDFText_GetUnicode(textpage, i)) for i in range(count))
    boxes = [textpage.get_charbox(i, loose=True) for i in range(count)]
    textpage.close()
    pdf.close()
    return stored, raw, boxes


def _png_size(png: bytes) -> tuple[int, int]:
    with Image.open(io.BytesIO(png)) as image:
        assert image.format == "PNG"
        return image.size


def test_a_tall_page_is_rendered_within_the_pixel_cap(tmp_path: Path) -> None:
    width, height = _png_size(render_png(tall_page(tmp_path / "tall.pdf"), 1, MAX_IMAGE_WIDTH))
    assert width * height <= MAX_IMAGE_PIXELS
    assert width * height > 0.99 * MAX_IMAGE_PIXELS  # as large as the cap allows, not a thumbnail
    assert abs(height / width - 144) < 1  # the page's shape is kept


def test_image_sizes_respect_width_and_pixels_for_every_shape() -> None:
    a4 = (595.28, 841.89)
    assert image_size(a4, MAX_IMAGE_WIDTH)[1] == MAX_IMAGE_WIDTH  # an ordinary page is not shrunk
    assert image_size(a4, 600)[1:] == (600, 849)
    for points in [(100, 14400), (14400, 14400), (14400, 1), (1, 14400), (3, 3), (0, 0), (float("nan"), 5)]:
        for asked in (100, 1200, MAX_IMAGE_WIDTH, 10**9):
            scale, width, height = image_size(points, asked)
            assert scale > 0 and width >= 1 and height >= 1
            assert width <= min(asked, MAX_IMAGE_WIDTH) and width * height <= MAX_IMAGE_PIXELS


def test_boxes_on_a_contents_page_are_right_and_cheap(tmp_path: Path) -> None:
    path = contents_page(tmp_path / "contents.pdf")
    stored, raw, charboxes = _texts(path)
    assert len(stored) > 9_000 and stored.count(".") > 5_000

    # Every stored character that is not whitespace is paired with the same character of pdfium's.
    found = align(stored, raw)
    pairs = [(i, j) for i, j in enumerate(found.raw_index) if j >= 0]
    assert len(pairs) == sum(not c.isspace() for c in stored)
    assert all(stored[i] == raw[j] for i, j in pairs)
    assert [j for _i, j in pairs] == sorted(j for _i, j in pairs)
    # Linear work: one step per character of each text, no resynchronisation needed here.
    assert found.steps <= len(raw) + len(stored)

    # The boxes of a line near the end are that line's: one box, at the height of its characters.
    line = f"Item {LEADER_LINES - 7} " + "." * 20 + f" {(LEADER_LINES - 7) % 90 + 10}"
    start = stored.index(line)
    began = time.process_time()
    boxes = span_boxes(path, 1, stored, start, start + len(line))
    spent = time.process_time() - began
    assert boxes.current and len(boxes.boxes) == 1
    (box,) = boxes.boxes
    first = raw.index(line)
    left, _bottom, _right, top = charboxes[first]
    assert abs(box.x - left) < 0.5 and abs(box.y - (boxes.height - top)) < 0.5
    assert abs(box.x + box.width - charboxes[first + len(line) - 1][2]) < 0.5
    assert spent < 5.0  # generous on purpose (about 0.02 s measured; difflib took 165 s)


def test_the_alignment_skips_what_normalisation_changed() -> None:
    raw = "Eﬃcient op\u0002\r\nen-market \u00a0terms\u200b here\r\nand cafe\u0301 then more words follow"
    stored = normalize_text(raw)
    assert stored == "Efficient open-market  terms here\nand café then more words follow"
    found = align(stored, raw)
    unpaired = [stored[i] for i, j in enumerate(found.raw_index) if j < 0 and not stored[i].isspace()]
    assert unpaired == ["é"]  # NFC joined two raw characters into one
    for i, j in enumerate(found.raw_index):
        if j >= 0:
            assert stored[i] in normalize_text(raw[j])
    assert found.raw_index[stored.index("ffi")] == raw.index("ﬃ")  # a ligature is one pdfium character
    assert found.raw_index[stored.index("en-")] == raw.index("en-")  # past the joined soft hyphen


def test_alignment_work_is_linear_even_when_the_texts_disagree() -> None:
    rng = random.Random(22)
    stored = "".join(rng.choice("ab. ") for _ in range(10_000))
    raw = "".join(rng.choice("ab. \n") for _ in range(10_000))
    found = align(stored, raw)
    # Per stored character: one comparison and at most one resynchronisation over both windows.
    assert found.steps <= len(raw) + 2 * len(stored) * (1 + (2 * ALIGN_WINDOW + 2) * ALIGN_ANCHOR)
    paired = [(i, j) for i, j in enumerate(found.raw_index) if j >= 0]
    assert all(stored[i] == raw[j] for i, j in paired)
    assert [j for _i, j in paired] == sorted(j for _i, j in paired)
    assert align(stored, raw, end=100).raw_index[100:] == [-1] * (len(stored) - 100)
