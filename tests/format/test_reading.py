"""How a hit's text reads (issue 43, item 3): a filing's running headers, footers and page numbers cut,
its wrapped lines joined, its table rows kept, the page text itself untouched; and sentences that keep
"$5.5 billion" and "U.S." whole."""

from __future__ import annotations

import pytest

from sleuth.compile.pages import Page
from sleuth.compile.parse import parse_source
from sleuth.format.furniture import furniture, running_keys
from sleuth.format.reading import PageReading, cut_text, read_page
from sleuth.format.sentences import split_sentences
from sleuth.settings import DEFAULTS
from tests.support import FINANCEBENCH

TEN_Q = FINANCEBENCH / "BESTBUY_2024Q2_10Q.pdf"


@pytest.fixture(scope="module")
def filing() -> list[Page]:
    if not TEN_Q.exists():
        pytest.skip("FinanceBench PDFs are not on this machine")
    return parse_source(TEN_Q, max_text_bytes=DEFAULTS.max_text_bytes).pages


def reading(pages: list[Page], number: int) -> tuple[str, PageReading]:
    running = running_keys(p.text for p in pages)
    page = pages[number - 1]
    return page.text, read_page(page.text, furniture(page.text, running, page.label))


def test_a_filings_page_reads_without_its_furniture_and_with_its_lines_joined(filing: list[Page]) -> None:
    text, read = reading(filing, 17)
    whole = read.read(text, 0, len(text))
    # The page prints "Table of Contents" at its head and "17" at its foot, as every page of the filing.
    assert text.startswith("Table of Contents\n") and text.endswith("\n17")
    assert "Table of Contents" not in whole and not whole.endswith("17")
    assert whole.startswith("Segment Performance Summary\nDomestic Segment\n")
    # The trial's sentence: wrapped after "second quarter and", it reads as one line, one sentence.
    sentence = (
        "Online revenue of $2.8 billion and $5.5 billion in the second quarter and first six months of "
        "fiscal 2024 decreased 7.1% and 9.7% on a comparable basis, respectively."
    )
    assert sentence not in text and sentence in whole
    assert sentence in [whole[a:b] for a, b in split_sentences(whole)]
    # Table rows stay rows, each on its own line.
    assert "\nTotal 100 % 100 % (6.3)% (12.7)%" in whole
    # Only furniture and line breaks changed: the words are the page's, in order.
    assert whole.split() == text.split()[3:-1]  # less "Table of Contents" and "17"


def test_a_span_of_the_page_reads_the_same_and_its_removals_are_in_page_offsets(filing: list[Page]) -> None:
    text, read = reading(filing, 17)
    head = text.index("Segment Performance Summary")
    assert read.removals(0, head + 10) == [(0, head)]  # "Table of Contents\n"
    assert read.read(text, 0, head + 27) == "Segment Performance Summary"
    # A slice keeps the reading of its own characters: the page read whole holds each slice's reading.
    whole = read.read(text, 0, len(text))
    for start in range(0, len(text), 700):
        assert read.read(text, start, start + 500) in whole


def test_the_filings_running_lines_are_its_headers_not_its_content(filing: list[Page]) -> None:
    running = running_keys(p.text for p in filing)
    assert running == {"table of contents"}
    cut = [p.text[a:b].strip() for p in filing for a, b in furniture(p.text, running, p.label)]
    assert cut.count("Table of Contents") >= 25
    assert all(line == "Table of Contents" or line.isdigit() for line in cut)
    # pages 2-26 print their number; the certifications after them print none
    assert sorted({line for line in cut if line.isdigit()}, key=int) == [str(n) for n in range(2, 27)]


def test_a_lone_number_is_cut_only_where_it_is_the_pages_printed_number() -> None:
    page = "Quarterly results\nRevenue rose in every region this year.\nUnits sold\n4,210\n38"
    assert furniture(page, frozenset(), "38") == [(len(page) - 3, len(page))]
    assert furniture(page, frozenset(), None) == []  # no label: a number on its own stays
    assert furniture(page, frozenset(), "12") == []


def test_a_hyphenated_line_break_joins_its_word_and_is_a_removal() -> None:
    wrapped = "x" * 60
    page = f"{wrapped} the long-\nterm debt of the company was repaid in the second quarter of the year\nNext"
    read = read_page(page)
    at = page.index("-\n") + 1
    assert read.cut == ((at, at + 1),)
    assert "the long-term debt" in read.read(page, 0, len(page))
    kept = cut_text(page[at - 5 : at + 6], at - 5, read.removals(at - 5, at + 6))
    assert kept.text == "long-term " and kept.offsets[5] == at + 1


def test_sentences_keep_figures_and_initialisms_whole() -> None:
    text = (
        "Revenue in the U.S. was approximately $5.5 billion. $3.1 billion was repaid in cash. "
        "The U.S. Treasury bought 1.5 million shares."
    )
    assert [text[a:b] for a, b in split_sentences(text)] == [
        "Revenue in the U.S. was approximately $5.5 billion.",
        "$3.1 billion was repaid in cash.",
        "The U.S. Treasury bought 1.5 million shares.",
    ]
