"""A document's outline (issue 25, item 5): a PDF's contents page does not head the pages after it,
and a heading its text layer sets a word a line (`Item` / `1A.` / `RISK` / `FACTORS`) is read; every
chunk carries its full heading path, while the path its embedding was headed with stays as it was."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from sleuth.compile.chunking import chunk_pages
from sleuth.compile.manifest import Chunking
from sleuth.compile.pages import Page
from sleuth.compile.parse import parse_source
from sleuth.compile.pipeline import compile_context
from sleuth.format.chunks import Chunk
from sleuth.sdk.knowledge import Knowledge, ScopedContext
from sleuth.store.home import Home
from tests.support import make_pdf

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
    pages = parse_source(annual_report(tmp_path)).pages
    assert [h.text for h in pages[0].headings][-1] == "Item 15. Exhibits 40"  # cut as before
    assert pages[0].outline == []  # a contents page heads nothing
    assert pages[2].headings == [] and pages[2].outline is not None
    assert [(h.level, h.text) for h in pages[2].outline] == [(2, "Item 1A. RISK FACTORS")]
    assert pages[2].text[pages[2].outline[0].start :].startswith("Item\n1A.")
    assert pages[1].outline is None  # the same headings as the chunker's (none)

    chunks = chunk_pages("alder-2023.pdf", pages, Chunking())
    by_page = {c.page: c for c in chunks}
    # The chunks and the paths their embeddings were headed with are unchanged ...
    assert by_page[2].section_path == by_page[4].section_path == ["Item 15. Exhibits 40"]
    # ... and each carries its place in the outline.
    assert by_page[3].heading_path == by_page[4].heading_path == ["Item 1A. RISK FACTORS"]
    assert by_page[2].heading_path == [] and all(c.heading_path == [] for c in chunks if c.page == 1)
    assert by_page[5].heading_path == ["Item 2-Properties"]  # a dash right after the number
    assert Chunk.from_json(by_page[4].to_json()) == by_page[4]
    assert Page.from_json(pages[2].to_json()) == pages[2]
    assert "outline" not in pages[1].to_json()


def test_sql_and_read_section_scope_by_the_outline(tmp_path: Path, home: Home) -> None:
    annual_report(tmp_path)
    compile_context("filings", [tmp_path / "filings"], home=home)
    ctx = home.find("filings")
    version = ctx.version_dir(ctx.live_version() or "")
    with sqlite3.connect(version / "tables.sqlite") as db:
        pages = db.execute(
            "SELECT DISTINCT page FROM _chunks WHERE section_path LIKE '%Item 1A%' ORDER BY page"
        ).fetchall()
    assert pages == [(3,), (4,)]
    kb = Knowledge([ScopedContext("filings", version)])
    section = kb.read_section("uploads/filings/alder-2023.pdf", section="risk factors")
    assert section.pages == [3, 4] and section.section_path == ["Item 1A. RISK FACTORS"]
    assert "order system" in section.text
