"""Where each word of a PDF line stands on the page (issue 43, item 1): a table's columns are read
from the x-positions of its figures, and its header phrases are put over the columns they stand
above, which the page text (one line of words) cannot say.

pdfium gives each character's box; a call costs a few microseconds, so only a word's first and last
characters are read, and only on the lines the table finder asks for (`layout_lines.wanted_lines`).
A word's box is its first character's loose box (the font's ascent to descent, so the words of one
printed line share a bottom) joined with its last character's.
"""

from __future__ import annotations

import ctypes
import re
from collections.abc import Iterable
from typing import Any

import pypdfium2.raw as pdfium_c

from sleuth.compile.parse.pdf_fonts import raw_text
from sleuth.compile.parse.table_grid import Box
from sleuth.format.text import normalize_text, repair_dropped_ligatures

_WORD = re.compile(r"\S+")
#: A hyphen pdfium's whole text gives as U+FFFE and its bounded text as U+0002.
_PDFIUM_HYPHEN = "\ufffe"
_BOUNDED_HYPHEN = "\x02"
#: The most characters of pdfium's whole text skipped at once to find the next one read.
_MAX_SKIPPED = 4
_LINE_BREAK = re.compile(r"\r\n|\r|\n")


def line_boxes(textpage: Any, read: str, stored: str, wanted: Iterable[int]) -> dict[int, tuple[Box, ...]]:
    """For each wanted line of the stored page text (its index in `stored.split("\\n")`), each word's
    box, in the order of the line's words. `read` is the text the page was read as (pdfium's bounded
    text), which may leave out a few of the page's characters (a line break beyond the bounds); where
    it cannot be matched to the page's whole text, no line has boxes. A line whose words do not match
    pdfium's one for one (normalisation dropped some), or that normalisation joined with the next (a
    soft hyphen), has none."""
    wanted = list(wanted)
    if not wanted:
        return {}
    at = _char_indices(raw_text(textpage), read)
    if at is None:
        return {}
    starts = [0, *(m.end() for m in _LINE_BREAK.finditer(read))]
    ends = [m.start() for m in _LINE_BREAK.finditer(read)] + [len(read)]
    stored_lines = stored.split("\n")
    if len(starts) == len(stored_lines):
        lines = dict(enumerate(zip(starts, ends, strict=True)))
    else:
        lines = _aligned(read, list(zip(starts, ends, strict=True)), stored_lines)
    rect = pdfium_c.FS_RECTF()
    ref = ctypes.byref(rect)
    handle = getattr(textpage, "raw", textpage)  # pypdfium2's page object, or its raw handle
    char_box = pdfium_c.FPDFText_GetLooseCharBox
    out: dict[int, tuple[Box, ...]] = {}
    for index in sorted(set(wanted)):
        if index not in lines:
            continue
        a, b = lines[index]
        words = [(m.start(), m.end()) for m in _WORD.finditer(read, a, b)]
        if len(words) != len(stored_lines[index].split()):
            continue
        boxes: list[Box] = []
        for first, end in words:
            if not char_box(handle, at[first], ref):
                break
            left, bottom, top = rect.left, rect.bottom, rect.top
            if end - 1 > first:  # a failed call leaves the first character's box: its right edge
                char_box(handle, at[end - 1], ref)
            boxes.append(Box(left, max(left, rect.right), bottom, top))
        else:
            out[index] = tuple(boxes)
    return out


def _char_indices(raw: str, read: str) -> list[int] | None:
    """For each character of `read`, its index in pdfium's whole text `raw`: the same text but for a
    hyphen each gives its own way and a few characters `read` leaves out; None where they part more."""
    if raw == read:
        return list(range(len(read)))
    out: list[int] = []
    i = 0
    for ch in read:
        skipped = 0
        while i < len(raw) and raw[i] != ch and not (raw[i] == _PDFIUM_HYPHEN and ch == _BOUNDED_HYPHEN):
            i += 1
            skipped += 1
            if skipped > _MAX_SKIPPED:
                return None
        if i >= len(raw):
            return None
        out.append(i)
        i += 1
    return out if len(raw) - len(read) <= _MAX_SKIPPED * 8 else None


def _aligned(read: str, raw_lines: list[tuple[int, int]], stored: list[str]) -> dict[int, tuple[int, int]]:
    """Stored lines to pdfium's lines, where normalisation joined some (a word hyphenated with a soft
    hyphen across a line break): each stored line that is one of pdfium's lines, normalised."""
    out: dict[int, tuple[int, int]] = {}
    i = j = 0
    while i < len(raw_lines) and j < len(stored):
        a, b = raw_lines[i]
        if _stored(read[a:b]) == stored[j]:
            out[j] = (a, b)
            i, j = i + 1, j + 1
            continue
        k = i + 1  # the stored line is pdfium's lines i to k joined
        while k < len(raw_lines) and len(_stored(read[a : raw_lines[k][1]])) <= len(stored[j]):
            if _stored(read[a : raw_lines[k][1]]) == stored[j]:
                break
            k += 1
        if k >= len(raw_lines) or _stored(read[a : raw_lines[k][1]]) != stored[j]:
            break  # they do not agree: no line after this one is placed
        i, j = k + 1, j + 1
    return out


def _stored(text: str) -> str:
    return repair_dropped_ligatures(normalize_text(text))
