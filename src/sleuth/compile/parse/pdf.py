"""PDF: text per physical page with pypdfium2 (pypdf as the pure-Python fallback).

Tables are read from the text layer's lines (`layout_tables`). Sections come from the bookmarks when
the file has them, else from numbering heuristics on short lines (`PART II`, `Item 7.`, `1.2 Title`),
which is what most filings and policies use. The outline adds, below those, the headings set apart by
their type (`pdf_fonts`).
"""

from __future__ import annotations

import dataclasses
import io
import itertools
import logging
import re
import threading
import warnings
from collections.abc import Iterator
from contextlib import contextmanager

import pypdfium2 as pdfium

from sleuth.compile.boilerplate import is_contents, is_contents_entry
from sleuth.compile.pages import Heading, Page, ParsedSource, ParseError, Table
from sleuth.compile.parse.layout_lines import wanted_lines
from sleuth.compile.parse.layout_tables import find_tables
from sleuth.compile.parse.page_labels import printed_labels
from sleuth.compile.parse.pdf_boxes import line_boxes
from sleuth.compile.parse.pdf_fonts import LineStyle, font_headings, line_styles
from sleuth.compile.parse.table_grid import Box
from sleuth.format.furniture import running_keys
from sleuth.format.pdfium_lock import PDFIUM
from sleuth.format.text import normalize_text, repair_dropped_ligatures

_NUMBERED = [
    (re.compile(r"^PART\s+[IVX]+\b.{0,80}$", re.IGNORECASE), 1),
    (re.compile(r"^ITEM\s+\d{1,2}[A-C]?\.?(\s.{0,100})?$", re.IGNORECASE), 2),
    (re.compile(r"^(\d{1,2}(?:\.\d{1,2}){0,3})\.?\s+[A-Z][^.!?]{1,80}$"), 0),  # level from depth
]


_LONE_LEAD = re.compile(r"^(?:ITEM|PART)$", re.IGNORECASE)
_ITEM = re.compile(r"^ITEM\s+\d{1,2}[A-C]?\b", re.IGNORECASE)
_PART = re.compile(r"^PART\s+[IVX]{1,4}\b", re.IGNORECASE)
_ROMAN = re.compile(r"[IVX]{1,4}")
_SMALL_WORDS = frozenset(
    {"a", "an", "and", "as", "at", "by", "for", "in", "of", "on", "or", "the", "to", "with"}
)
_ITEM_REFERENCE = re.compile(r"^(?i:item)\s+\d{1,2}[A-Ca-c]?\.?\s*(?:,|[a-z(])")
_FOOTNOTE_WORDS = 6  # a number without its point before more words than this starts a footnote
_NUMBER_LEAD = re.compile(r"^(\d{1,2}(?:\.\d{1,2}){0,3})(\.?)\s+(.*)$")
_CONNECTOR = re.compile(r"^(?:and|of|for|in|on|to|the|&)\b", re.IGNORECASE)
_SPLIT_NUMBER = re.compile(r"^(?:\d{1,2}[A-C]?|[IVX]{1,4})\.?(?:\s+(\S+(?:\s+\S+){0,2}))?$", re.IGNORECASE)
_DASHED_ITEM = re.compile(r"^ITEM\s+\d{1,2}[A-C]?\.?\s*[-–—:]\s*[A-Z].{0,100}$", re.IGNORECASE)
_SPLIT_HEADING_LINES = 8  # words of a heading set one a line: `Item 1A. Risk Factors` is four


def parse(
    data: bytes, *, tables: bool = True, fonts: bool = True, max_pages: int | None = None
) -> ParsedSource:
    """`tables=False` skips the layout-table finder, `fonts=False` the headings read from type (the
    baselines of benchmarks); `max_pages` reads only the first pages (a sample: `compile.explore`)."""
    styles: list[list[LineStyle]] | None = None
    boxes: list[dict[int, tuple[Box, ...]]] | None = None
    try:
        texts, title, toc, styles, boxes = _read_pdfium(data, fonts, tables, max_pages)
    except pdfium.PdfiumError as exc:
        if "password" in str(exc).lower():
            raise ParseError("failed", "encrypted") from None
        said: list[str] = []
        try:
            with pypdf_said(said):
                texts, title, toc = _read_pypdf(data)
            texts = texts if max_pages is None else texts[:max_pages]
        except ParseError:
            raise
        except Exception as fallback:
            said.append(str(fallback).strip() or type(fallback).__name__)
            heard = "; ".join(dict.fromkeys(line for line in said if line))
            raise ParseError("failed", f"corrupt: {exc}" + (f" (pypdf: {heard})" if heard else "")) from None
        if said:  # read all the same: what pypdf noticed is no problem of the source's
            log.debug("pypdf read a damaged PDF: %s", "; ".join(said))
    pages = [Page(i + 1, repair_dropped_ligatures(normalize_text(t))) for i, t in enumerate(texts)]
    if toc:
        _headings_from_toc(pages, toc)
    else:
        outlines = _outlines([page.text for page in pages])
        for page, outline in zip(pages, outlines, strict=True):
            page.headings = _numbered_headings(page.text)
            if outline != page.headings:
                page.outline = outline
    if tables:
        running = running_keys(page.text for page in pages)
        for index, page in enumerate(pages):
            page.tables = find_tables(page.text, boxes[index] if boxes else None, running)
    if styles is not None:
        _add_font_headings(pages, styles, level=max((level for level, _t, _i in toc), default=2) + 1)
    if tables:
        for page in pages:
            page.tables = [_titled(page, table) for table in page.tables]
    for page, label in zip(pages, printed_labels([p.text for p in pages]), strict=True):
        page.label = label
    empty = sum(1 for p in pages if not p.text.strip())
    return ParsedSource("pdf", pages, title=title, images_skipped=empty)


def _titled(page: Page, table: Table) -> Table:
    """A table with no caption of its own takes the nearest heading above it on its page."""
    if table.title is not None or len(table.rows) < 2:
        return table
    first = min(row.start for row in table.rows[1:])
    above = [h for h in (page.outline if page.outline is not None else page.headings) if h.start < first]
    return dataclasses.replace(table, title=above[-1].text) if above else table


def _add_font_headings(pages: list[Page], styles: list[list[LineStyle]], level: int) -> None:
    """The headings set apart by type join each page's outline, below numbering's and bookmarks'
    levels; a line those already read as a heading keeps their reading."""
    for page, found in zip(pages, font_headings(pages, styles, level), strict=True):
        if not found:
            continue
        outline = page.outline if page.outline is not None else list(page.headings)
        lines = {page.text.rfind("\n", 0, h.start + 1) for h in outline}
        added = [h for h in found if page.text.rfind("\n", 0, h.start + 1) not in lines]
        if added:
            page.outline = sorted([*outline, *added], key=lambda h: (h.start, h.level))


Pdfium = tuple[
    list[str],
    str | None,
    list[tuple[int, str, int]],
    list[list[LineStyle]] | None,
    list[dict[int, tuple[Box, ...]]] | None,
]


def _read_pdfium(data: bytes, fonts: bool, tables: bool, max_pages: int | None = None) -> Pdfium:
    with PDFIUM:  # pdfium is not thread-safe
        return _read_pdfium_locked(data, fonts, tables, max_pages)


def _read_pdfium_locked(data: bytes, fonts: bool, tables: bool, max_pages: int | None) -> Pdfium:
    """Each page's text, the title and the bookmarks; with `fonts` each page's line types, with
    `tables` the boxes of the words on the lines the table finder reads (`pdf_boxes`)."""
    pdf = pdfium.PdfDocument(data)
    try:
        texts = []
        styles: list[list[LineStyle]] | None = [] if fonts else None
        boxes: list[dict[int, tuple[Box, ...]]] | None = [] if tables else None
        for index in range(len(pdf) if max_pages is None else min(len(pdf), max_pages)):
            page = pdf[index]
            textpage = page.get_textpage()
            texts.append(textpage.get_text_bounded())
            if boxes is not None:
                stored = repair_dropped_ligatures(normalize_text(texts[-1]))
                boxes.append(line_boxes(textpage, texts[-1], stored, wanted_lines(stored)))
            if styles is not None:
                styles.append(line_styles(textpage))
            textpage.close()
            page.close()
        title = (pdf.get_metadata_dict().get("Title") or "").strip() or None
        toc: list[tuple[int, str, int]] = []
        for bookmark in pdf.get_toc(max_depth=6):
            dest = bookmark.get_dest()
            page_index: int | None = dest.get_index() if dest is not None else None
            text = (bookmark.get_title() or "").strip()
            if page_index is not None and text:
                toc.append((bookmark.level + 1, text, page_index))
        return texts, title, toc, styles, boxes
    finally:
        pdf.close()


log = logging.getLogger("sleuth.compile.parse")
_PYPDF = threading.Lock()  # pypdf's logger is the process's: one reading collects it at a time


class _Collect(logging.Handler):
    def __init__(self, into: list[str]) -> None:
        super().__init__(logging.DEBUG)
        self.into = into

    def emit(self, record: logging.LogRecord) -> None:
        self.into.append(record.getMessage().strip())


@contextmanager
def pypdf_said(into: list[str]) -> Iterator[None]:
    """What pypdf says of a damaged file (`EOF marker not found`) through its `pypdf` logger and
    `warnings` goes into `into`, for the source's problem, instead of onto stderr (Python's last-resort
    handler prints a warning nobody configured a handler for); other modules' warnings pass on."""
    logger = logging.getLogger("pypdf")
    handler = _Collect(into)
    with _PYPDF, warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        propagate, logger.propagate = logger.propagate, False
        logger.addHandler(handler)
        try:
            yield
        finally:
            logger.removeHandler(handler)
            logger.propagate = propagate
    for warning in caught:
        if "pypdf" in warning.filename.replace("\\", "/").split("/"):
            into.append(str(warning.message).strip())
        else:
            warnings.warn_explicit(warning.message, warning.category, warning.filename, warning.lineno)


def _read_pypdf(data: bytes) -> tuple[list[str], str | None, list[tuple[int, str, int]]]:
    from pypdf import PdfReader

    reader = PdfReader(io.BytesIO(data))
    if reader.is_encrypted:
        raise ParseError("failed", "encrypted")
    texts = [page.extract_text() or "" for page in reader.pages]
    title = reader.metadata.title if reader.metadata else None
    return texts, (title or "").strip() or None, []


def _headings_from_toc(pages: list[Page], toc: list[tuple[int, str, int]]) -> None:
    """Place each bookmark on its page: at the line that shows its title, else at the top."""
    for level, text, index in toc:
        if not 0 <= index < len(pages):
            continue
        page = pages[index]
        found = page.text.casefold().find(text.casefold())
        start = page.text.rfind("\n", 0, found) + 1 if found >= 0 else 0
        page.headings.append(Heading(min(level, 6), text, start))
    for page in pages:
        page.headings.sort(key=lambda h: (h.start, h.level))


def _numbered_headings(text: str, join_split: bool = False) -> list[Heading]:
    """Lines that read as numbered headings. `join_split` (the outline's reading) also reads a lone
    `Item` or `PART` line with the short lines after it (`Item` / `1A.` / `RISK` / `FACTORS`), as a
    text layer that sets a heading a word a line gives it, and `Item 1A—Risk Factors`."""
    headings: list[Heading] = []
    lines = text.split("\n")
    offsets = list(itertools.accumulate((len(line) + 1 for line in lines), initial=0))
    skip_to = 0  # lines a split heading read are not read again (`7. MANAGEMENT'S` after `ITEM`)
    for index, line in enumerate(lines):
        if index < skip_to:
            continue
        stripped = line.strip()
        consumed = 0
        if join_split and _LONE_LEAD.match(stripped):
            stripped, consumed = _joined_heading(lines, index)
        heading = _numbered(stripped)
        if heading is None and join_split and _DASHED_ITEM.match(stripped):
            heading = (2, stripped)  # `Item 1A—Risk Factors`
        if heading is not None:
            level, heading_text = heading
            start = offsets[index] + (line.index(line.strip()) if line.strip() else 0)
            headings.append(Heading(level, heading_text, start))
            skip_to = index + 1 + consumed
    return headings


def _outlines(texts: list[str]) -> list[list[Heading]]:
    """Each page's numbered headings as the outline reads them (issue 43, item 2): what reads as a
    heading (`_in_outline`); of a contents page only the one item heading above an index of its
    statements (`Item 8. Financial Statements…` over `Report of … 36`), never its entries; and in a
    document with items, numbered headings below the items (a note `1. Summary of …` under `Item 8`,
    not beside `PART II`)."""
    outlines: list[list[Heading]] = []
    for text in texts:
        found = [h for h in _numbered_headings(text, join_split=True) if _in_outline(h.text)]
        if is_contents(text):
            own = [h for h in found if _ITEM.match(h.text) and not is_contents_entry(h.text)]
            found = own if len(own) == 1 else []
        outlines.append(found)
    outlines = [[_canonical(h) for h in outline] for outline in outlines]
    if any(_ITEM.match(h.text) for outline in outlines for h in outline):
        outlines = [
            [Heading(min(h.level + 2, 6), h.text, h.start) if h.text[0].isdigit() else h for h in outline]
            for outline in outlines
        ]
    return outlines


def _canonical(heading: Heading) -> Heading:
    """One form for an item or part heading however the filing sets it: `ITEM 1A. RISK FACTORS` and
    `Item 1A. RISK FACTORS` read `Item 1A. Risk Factors`, as `Item 1A. Risk Factors` does; `PART II`
    reads `Part II` (`read_section` matches either way)."""
    text = heading.text
    lead = _ITEM.match(text) or _PART.match(text)
    title = text[lead.end() :] if lead else ""
    if lead is None or title != title.upper():
        return heading  # its title set in mixed case already: `Item 1A. Risk Factors`
    cased = [_cased(word, index) for index, word in enumerate(text.split(" "))]
    return Heading(heading.level, " ".join(cased), heading.start)


def _cased(word: str, index: int) -> str:
    """`RISK` → `Risk`, `OF` → `of` past the number, `II` and `1A.` as they are."""
    if _ROMAN.fullmatch(word.strip(".,:")) or any(ch.isdigit() for ch in word):
        return word
    if index > 1 and word.lower() in _SMALL_WORDS:
        return word.lower()
    return word[:1] + word[1:].lower()


def _in_outline(text: str) -> bool:
    """Whether a line numbering read as a heading is one: not a cross-reference (`Item 3 of this
    Annual Report…`, `Item 7, Management's…`), a footnote (`1 Calculated based on…`: a number without
    its point and a sentence), a table's header (`1 Year 1-3 Years`) or a contents line
    (`1. Financial statements 65`)."""
    if _ITEM.match(text):
        return not _ITEM_REFERENCE.match(text)
    numbered = _NUMBER_LEAD.match(text)
    if numbered is None:
        return True
    number, point, title = numbered.groups()
    if any(ch.isdigit() for ch in title):
        return False
    # `1 Booking travel` is a heading; `6 We expect to fund these marketing obligations with …` and
    # `5 Years` (a column header's last line) are not
    return "." in number or bool(point) or 2 <= len(title.split()) <= _FOOTNOTE_WORDS


def _numbered(stripped: str) -> tuple[int, str] | None:
    if not 3 <= len(stripped) <= 100:
        return None
    for pattern, level in _NUMBERED:
        match = pattern.match(stripped)
        if match:
            if level == 0:
                level = min(match.group(1).count(".") + 1, 6)
            return level, stripped
    return None


def _joined_heading(lines: list[str], index: int) -> tuple[str, int]:
    """`Item` or `PART`, its number on the next line, and the title words after it set one or a
    few a line: up to a line that is not such a word (a sentence, a figure, another heading), and in
    an all-capitals title up to the first line that is not in capitals. Also the lines it read."""
    lead = lines[index].strip()
    following = [line.strip() for line in lines[index + 1 : index + 1 + _SPLIT_HEADING_LINES]]
    number = _SPLIT_NUMBER.match(following[0]) if following else None
    if number is None:
        return lead, 0
    parts = [lead, following[0]]
    rest = number.group(1) or ""  # `1A. RISK` / `FACTORS`: the title may start beside the number
    capitals: bool | None = rest.isupper() if rest else None
    for line in following[1:]:
        words = line.split()
        if (
            not words
            or len(words) > 3
            or _LONE_LEAD.match(line)
            or any(ch.isdigit() or ch == "$" for ch in line)
        ):
            break
        if capitals is None:  # the title's first line
            if not line[0].isupper():
                break
            capitals = line.isupper()
        elif capitals and not line.isupper():
            break  # `RISK` / `FACTORS` / `Overview`: the title ended
        elif not capitals and not _CONNECTOR.match(line):
            break  # `Risk Factors` / `Overview`: a title in mixed case goes on only with `and …`, `of …`
        parts.append(" ".join(words))
    return " ".join(parts), len(parts) - 1
