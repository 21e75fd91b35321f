"""Sections from the document's own structure (issue 43, item 2): every chunk of a 10-K's Item 1A, 7
and 8 names its item in its heading path. Over FinanceBench filings where they are kept beside the
repository (`benchmarks/section_paths.py` measures all twelve hand-labelled ones), and over text."""

from __future__ import annotations

from functools import cache

from sleuth.compile.chunking import chunk_pages
from sleuth.compile.manifest import Chunking
from sleuth.compile.pages import Heading
from sleuth.compile.parse import pdf
from sleuth.format.chunks import Chunk
from tests.support import FINANCEBENCH, needs_financebench


@cache
def _chunks(name: str) -> tuple[Chunk, ...]:
    pages = pdf.parse((FINANCEBENCH / name).read_bytes()).pages
    return tuple(chunk_pages(name, pages, Chunking()))


def _paths(name: str, page: int) -> list[str]:
    return [" > ".join(c.heading_path) for c in _chunks(name) if c.page == page]


@needs_financebench("AMAZON_2019_10K.pdf")
def test_an_items_heading_above_an_index_of_statements_is_kept() -> None:
    """Item 8 opens on a page that lists its statements with their page numbers: the page reads as a
    contents page, whose entries are never headings, but the item's own heading above them is (its
    pages were filed under `Item 7A`)."""
    assert all("Item 8. Financial Statements" in path for path in _paths("AMAZON_2019_10K.pdf", 36))


@needs_financebench("COCACOLA_2017_10K.pdf")
def test_a_footnote_is_no_heading() -> None:
    """`1 Calculated based on net income attributable to shareowners of The Coca-Cola` under a table
    was a top-level heading, and MD&A's pages after it were filed under it."""
    for path in _paths("COCACOLA_2017_10K.pdf", 50):
        assert "ITEM 7. MANAGEMENT" in path.upper() and "Calculated based" not in path, path


@needs_financebench("CVSHEALTH_2018_10K.pdf")
def test_a_cross_reference_is_no_heading() -> None:
    """`Item 3 of this Annual Report on Form 10-K for additional information.` inside the risk factors
    filed the rest of them under Item 3."""
    for path in _paths("CVSHEALTH_2018_10K.pdf", 46):
        assert "Item 1A" in path and "Item 3 of this" not in path, path


@needs_financebench("BESTBUY_2019_10K.pdf")
def test_numbered_notes_sit_under_their_item() -> None:
    """`1. Summary of Significant Accounting Policies` was a heading beside `PART II`, so the notes lost
    `Item 8`; in a document with items, numbered headings go below them."""
    for path in _paths("BESTBUY_2019_10K.pdf", 58):
        assert "Item 8" in path and "1. Summary of Significant Accounting Policies" in path, path


def test_what_numbering_reads_as_a_heading() -> None:
    reads = pdf._in_outline  # the rule itself, over the lines the filings above showed
    assert reads("Item 1A. Risk Factors") and reads("ITEM 7. MANAGEMENT'S DISCUSSION")
    assert not reads("Item 3 of this Annual Report on Form 10-K for additional information.")
    assert not reads("Item 7, Management's Discussion and Analysis")
    assert reads("1. Summary of Significant Accounting Policies") and reads("2.1 Revenue recognition")
    assert reads("1 Booking travel")  # a policy's numbering without points
    assert not reads("6 We expect to fund these marketing obligations with cash flows from operating")
    assert not reads("1 Year 1-3 Years 3-5 Years") and not reads("5 Years")
    assert not reads("1. Financial statements 65")  # a contents line


def test_an_item_heading_has_one_form() -> None:
    canonical = pdf._canonical
    heading = Heading(2, "ITEM 7. MANAGEMENT'S DISCUSSION AND ANALYSIS OF FINANCIAL CONDITION", 0)
    assert canonical(heading).text == "Item 7. Management's Discussion and Analysis of Financial Condition"
    assert canonical(Heading(2, "ITEM 1A. RISK FACTORS", 0)).text == "Item 1A. Risk Factors"
    assert canonical(Heading(2, "Item 1A. RISK FACTORS", 0)).text == "Item 1A. Risk Factors"
    assert canonical(Heading(1, "PART II", 0)).text == "Part II"
    assert canonical(Heading(2, "Item 1A. Risk Factors", 0)).text == "Item 1A. Risk Factors"  # as set
    assert canonical(Heading(3, "CONSOLIDATED BALANCE SHEETS", 0)).text == "CONSOLIDATED BALANCE SHEETS"
