"""Headings from type (issue 25, item 5): a PDF's lines set larger than its body text or wholly in
bold join the outline with levels that follow the type; running headers, table rows, sentences and
figures do not; chunks carry the deeper path without being cut differently."""

from __future__ import annotations

from pathlib import Path

from sleuth.compile.chunking import chunk_pages
from sleuth.compile.manifest import Chunking
from sleuth.compile.parse import parse_source
from sleuth.compile.parse.pdf_fonts import font_headings
from sleuth.sdk.knowledge import Knowledge, ScopedContext
from sleuth.settings import DEFAULTS
from sleuth.store.contexts.home import Home
from tests.support import StyledLine, compiled_version, make_styled_pdf

BODY = 10.0
RUNNING: StyledLine = ("Alder Pumps - Travel Policy", BODY, True)  # a bold running header on each page


def body(text: str) -> StyledLine:
    return (text, BODY, False)


def policy(tmp_path: Path) -> Path:
    sentence = "Employees book travel through the portal and keep every receipt for the claim they file."
    return make_styled_pdf(
        tmp_path / "docs" / "travel-policy.pdf",
        [
            [
                RUNNING,
                ("Travel and Expense Policy", 20, True),  # the cover's display type, on one page only
                body(sentence),
                ("1 Booking travel", 14, True),
                body(sentence),
                ("Air travel", BODY, True),
                body("Economy class is booked for every flight shorter than six hours in the air."),
                ("Hotels", BODY, True),
                body("The hotel limit is 220 dollars per night in large cities and 150 elsewhere."),
            ],
            [
                RUNNING,
                ("2 Claiming expenses", 14, True),
                body(sentence),
                ("Region 2025 2024", BODY, True),  # a table's bold header row and rows
                body("North 1,200 1,100"),
                body("South 900 850"),
                ("Total 2,100 1,950", BODY, True),
                ("Receipts are kept for seven years and shown on request to the auditors.", BODY, True),
            ],
            [
                RUNNING,
                ("Meals", BODY, True),
                body("Meals are paid up to 60 dollars a day when the trip lasts a whole day."),
            ],
            [RUNNING, ("Approvals", BODY, True), body("A manager approves each claim within ten days.")],
            [
                RUNNING,
                ("Offices abroad", 14, True),
                ("Alder Pumps GmbH Germany", BODY, True),  # a list set in bold: not headings
                ("Alder Pumps Ltd United Kingdom", BODY, True),
                ("Alder Pumps SAS France", BODY, True),
                ("Amount allocated to", BODY, True),  # ends in a function word
                body("Each office books its own travel under this policy."),
                ("Fiscal Year Fiscal Year Fiscal Year", BODY, True),  # a column header
                body("The offices report their travel spending each fiscal year to the parent."),
            ],
        ],
    )


def test_headings_set_apart_by_type_join_the_outline(tmp_path: Path) -> None:
    pages = parse_source(policy(tmp_path), max_text_bytes=DEFAULTS.max_text_bytes).pages
    outline = [[(h.level, h.text) for h in page.outline or page.headings] for page in pages]
    # `1 Booking travel` is also numbered: numbering's reading (level 1) stands
    assert outline == [
        [(3, "Travel and Expense Policy"), (1, "1 Booking travel"), (4, "Air travel"), (4, "Hotels")],
        [(1, "2 Claiming expenses")],
        [(4, "Meals")],
        [(4, "Approvals")],
        [(3, "Offices abroad")],
    ]
    for page in pages:  # each heading's offset is its line in the stored page text
        for heading in page.outline or []:
            assert page.text[heading.start :].startswith(heading.text)
    # the chunker's headings are untouched: only the outline reads type
    assert all(h.text != "Hotels" for page in pages for h in page.headings)

    chunks = chunk_pages("travel-policy.pdf", pages, Chunking(target_size=64))
    hotel = next(c for c in chunks if "220 dollars" in c.text)
    assert hotel.heading_path[-2:] == ["1 Booking travel", "Hotels"]
    meals = next(c for c in chunks if "60 dollars" in c.text)
    assert meals.heading_path[-2:] == ["2 Claiming expenses", "Meals"]


def test_a_document_in_one_type_has_no_type_headings(tmp_path: Path) -> None:
    lines = [body("Short line"), body("Another line of the body text of this memo, set in one type.")]
    pdf = make_styled_pdf(tmp_path / "memo.pdf", [lines, lines])
    assert all(
        page.outline is None for page in parse_source(pdf, max_text_bytes=DEFAULTS.max_text_bytes).pages
    )
    assert font_headings([], [], 3) == []


def test_read_section_finds_a_type_heading(tmp_path: Path, home: Home) -> None:
    policy(tmp_path)
    kb = Knowledge([ScopedContext("policies", compiled_version("policies", [tmp_path / "docs"], home))])
    section = kb.read_section("uploads/docs/travel-policy.pdf", section="Meals")
    assert section.section_path[-1] == "Meals" and "60 dollars" in section.text
    assert "220 dollars" not in section.text and "approves" not in section.text
