"""A document's outline (issue 25, item 5): a PDF's contents page does not head the pages after it,
and a heading its text layer sets a word a line (`Item` / `1A.` / `RISK` / `FACTORS`) is read; every
chunk carries its full heading path, while the path its embedding was headed with stays as it was."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from sleuth.compile.chunking import chunk_pages
from sleuth.compile.manifest import Chunking
from sleuth.compile.pages import Heading, Page
from sleuth.compile.parse import parse_source
from sleuth.format.chunks import Chunk
from sleuth.sdk.knowledge import Knowledge, ScopedContext
from sleuth.settings import DEFAULTS
from sleuth.store.contexts.home import Home
from tests.support import compiled_version, make_pdf

CONTENTS = "\n".join(
    [
        "Table of Contents",
        "Item 1. Business 3",
        "Item 1A. Risk Factors 4",
        "Item 2. Properties 9",
        "Item 7. Management's Discussion and Analysis 12",
        "Item 8. Financial Statements 20",
        "Item 15. Exhibits 40",
    ]
)
BUSINESS = "Our business\nAlder Pumps makes industrial pumps for water utilities and farms."
RISKS = "Item\n1A.\nRISK\nFACTORS\nOur results depend on the price of steel, which we do not control at all."
MORE_RISKS = "A failure of our order system could stop shipments for weeks and hurt our customers."
PROPERTIES = "Item 2-Properties\nWe own two plants in Ohio and lease a warehouse near the port."


def annual_report(tmp_path: Path) -> Path:
    return make_pdf(
        tmp_path / "filings" / "alder-2023.pdf", [CONTENTS, BUSINESS, RISKS, MORE_RISKS, PROPERTIES]
    )


def test_the_outline_skips_contents_and_reads_split_headings(tmp_path: Path) -> None:
    pages = parse_source(annual_report(tmp_path), max_text_bytes=DEFAULTS.max_text_bytes).pages
    assert [h.text for h in pages[0].headings][-1] == "Item 15. Exhibits 40"  # cut as before
    assert pages[0].outline == []  # a contents page heads nothing
    assert pages[2].headings == [] and pages[2].outline is not None
    assert [(h.level, h.text) for h in pages[2].outline] == [(2, "Item 1A. Risk Factors")]
    assert pages[2].text[pages[2].outline[0].start :].startswith("Item\n1A.")
    assert pages[1].outline is None  # the same headings as the chunker's (none)

    chunks = chunk_pages("alder-2023.pdf", pages, Chunking())
    by_page = {c.page: c for c in chunks}
    # The chunks and the paths their embeddings were headed with are unchanged ...
    assert by_page[2].section_path == by_page[4].section_path == ["Item 15. Exhibits 40"]
    # ... and each carries its place in the outline.
    assert by_page[3].heading_path == by_page[4].heading_path == ["Item 1A. Risk Factors"]
    assert by_page[2].heading_path == [] and all(c.heading_path == [] for c in chunks if c.page == 1)
    assert by_page[5].heading_path == ["Item 2-Properties"]  # a dash right after the number
    assert Chunk.from_json(by_page[4].to_json()) == by_page[4]
    assert Page.from_json(pages[2].to_json()) == pages[2]
    assert "outline" not in pages[1].to_json()


def test_sql_and_read_section_scope_by_the_outline(tmp_path: Path, home: Home) -> None:
    annual_report(tmp_path)
    version = compiled_version("filings", [tmp_path / "filings"], home)
    with sqlite3.connect(version / "tables.sqlite") as db:
        pages = db.execute(
            "SELECT DISTINCT page FROM _chunks WHERE section_path LIKE '%Item 1A%' ORDER BY page"
        ).fetchall()
    assert pages == [(3,), (4,)]
    kb = Knowledge([ScopedContext("filings", version)])
    section = kb.read_section("uploads/filings/alder-2023.pdf", section="risk factors")
    assert section.pages == [3, 4] and section.section_path == ["Item 1A. Risk Factors"]
    assert "order system" in section.text


def test_split_headings_mid_page_and_headings_a_chunk_opens_with(tmp_path: Path) -> None:
    body = "Revenue rose by ten percent in the year, and margins held up despite higher steel prices."
    split = ["Item", "7.", "MANAGEMENT'S", "DISCUSSION"]
    closing = ["Item 8. Financial Statements", "The statements follow the notes to them."]
    middle = "\n".join(["Item 6. Selected Data", "Five years.", *split, body, body, *closing])
    part = "PART II\nItem 5. Market for Common Equity\nOur shares trade on the exchange under ALDR."
    pdf = make_pdf(tmp_path / "r.pdf", [CONTENTS, middle, part])
    pages = parse_source(pdf, max_text_bytes=DEFAULTS.max_text_bytes).pages
    assert [h.text for h in pages[1].outline or []] == [
        "Item 6. Selected Data",
        "Item 7. Management's Discussion",  # the title ends where the capitals do; one casing
        "Item 8. Financial Statements",
    ]
    chunks = chunk_pages("r.pdf", pages, Chunking())
    paths = [c.heading_path for c in chunks if c.page > 1]
    # Item 7 opens the first half of the chunk that holds it (Item 8 cuts the next one): not lost
    assert ["Item 7. Management's Discussion"] in paths and ["Item 8. Financial Statements"] in paths
    # `PART II` alone on its line is merged with the item under it: the chunk is under both
    assert paths[-1] == ["Part II", "Item 5. Market for Common Equity"]


def test_a_split_heading_stops_where_its_title_does() -> None:
    cases = {
        "Item\n2.\nPROPERTIES\nWe own\ntwo plants": "Item 2. PROPERTIES",
        "Item\n1A.\nRisk Factors\nOverview\nThe company": "Item 1A. Risk Factors",
        "Item\n7.\nManagement's Discussion\nand Analysis\nRevenue rose by ten percent": (
            "Item 7. Management's Discussion and Analysis"
        ),
        "Item\nof the plan\nwe describe": None,  # `Item` without its number is no heading
        "ITEM\n1A. RISK\nFACTORS\nYou should be aware of the risks": "ITEM 1A. RISK FACTORS",
        # the number's line is read once: `7. MANAGEMENT'S` is not a heading of its own
        "ITEM\n7. MANAGEMENT'S\nDISCUSSION\nAND\nANALYSIS\nThe following": (
            "ITEM 7. MANAGEMENT'S DISCUSSION AND ANALYSIS"
        ),
    }
    for text, heading in cases.items():
        page = make_pdf_text(text)
        assert [h.text for h in page] == ([heading] if heading else []), text
    part = [h.text for h in make_pdf_text("PART\nII\nItem\n5.\nMarket")]
    assert part == ["PART II", "Item 5. Market"]


def make_pdf_text(text: str) -> list[Heading]:
    """The outline's headings of a page of `text` (the parser's reading of its lines)."""
    from sleuth.compile.parse.pdf import _numbered_headings

    return _numbered_headings(text, join_split=True)
