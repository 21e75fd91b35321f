"""Hits a model can use at once (issue 43, item 3): a hit reads without the page's running headers,
footers and page numbers and with its wrapped lines joined, while its span stays the page's verbatim
text; it says where the search matched (`match`, `snippet`); a quote taken from what it reads still
cites the page; and a `must_contain` that matched nothing says why (whole words) and what it may mean."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from sleuth.agent.citations import build_citations, verify_grounding
from sleuth.agent.evidence import mark_seen
from sleuth.agent.spans import EvidenceSpan, SpanResolver
from sleuth.format.sentences import split_sentences
from sleuth.sandbox.messages import SpanReport
from sleuth.sdk.knowledge import Knowledge, ScopedContext
from sleuth.sdk.matches import SNIPPET_CHARS, find_match
from sleuth.sdk.types import Hit
from sleuth.store.contexts.home import Home
from sleuth.store.version.search import VersionReader
from tests.agent.support import assert_quotes_are_groundings
from tests.support import compiled_version, make_pdf

REPORT = "uploads/acme-corpus/reports/annual-report-2025.pdf"
FILING = "uploads/northwind/northwind-q3-2023.pdf"
HEADER = "Northwind Traders | Quarterly Report Q3 2023 | {n}"
BODY = (
    "Net sales in the U.S. were approximately $5.5 billion for the quarter, an increase of 4 percent "
    "compared with the same quarter a year ago, driven by strong demand for outdoor equipment and by "
    "the opening of twelve new stores. Merchandise inventories rose to $1.2 billion at quarter end."
)
#: What the other pages say (each its own: a line on the edges of most pages is a running line).
OTHERS = [
    "Gross margin was 38.1 percent of net sales, down from 38.9 percent, as freight costs rose in the "
    "second half of the quarter and promotional activity increased in the outdoor category.",
    "Selling, general and administrative expenses were $410 million, or 7.5 percent of net sales, "
    "compared with $395 million a year ago, reflecting higher advertising and store labor.",
    "Cash and cash equivalents were $860 million at quarter end. We repurchased 1.2 million shares for "
    "$95 million and paid dividends of $31 million during the quarter under our existing programs.",
]
DIVIDEND = (
    "The board approved a quarterly dividend of $0.25 per share.\nTable of Contents\n"
    "The dividend is payable on October 1, 2023 to holders of record."
)


@pytest.fixture
def acme(sample_version: Path) -> Knowledge:
    return Knowledge([ScopedContext("acme", sample_version)])


@pytest.fixture
def filing(home: Home, tmp_path: Path) -> Path:
    """A quarterly report as filings print it: a running header with the page number beside it,
    "Table of Contents" under it and the number again at the foot, paragraphs wrapped at the margin;
    on page 4, "Table of Contents" between two sentences (all five of its lines are page edges)."""
    bodies = [OTHERS[0], BODY, OTHERS[1], DIVIDEND, OTHERS[2]]
    pages = [
        f"{HEADER.format(n=n)}\nTable of Contents\nSection {n}. Results\n{body}\n{n}"
        for n, body in enumerate(bodies, 1)
    ]
    pages[3] = f"{HEADER.format(n=4)}\n{DIVIDEND}\n4"
    make_pdf(tmp_path / "northwind" / "northwind-q3-2023.pdf", pages)
    return compiled_version("nw", [tmp_path / "northwind"], home)


def search(kb: Knowledge, query: str, **kwargs: object) -> list[Hit]:
    return asyncio.run(kb.search_source(query, **kwargs))  # type: ignore[arg-type]


def test_a_hit_reads_without_page_furniture_and_its_span_stays_verbatim(filing: Path) -> None:
    kb = Knowledge([ScopedContext("nw", filing)])
    hit = search(kb, "net sales increase outdoor equipment", top_k=1, sources=[FILING])[0]
    page = VersionReader(filing).page_text(FILING, hit.page or 0) or ""
    assert hit.span is not None and page[hit.start : hit.end] == hit.span.text == page
    assert hit.span.text.startswith(HEADER.format(n=hit.page) + "\nTable of Contents\n")
    assert hit.chunk_text == f"Section {hit.page}. Results\n{BODY}"  # header, contents link, number cut
    assert "\n" in hit.span.text.split("Results\n")[1]  # the page wraps the paragraph; the hit does not
    sentences = [hit.chunk_text[a:b] for a, b in split_sentences(hit.chunk_text)]
    assert BODY.split(" Merchandise")[0] in sentences  # "U.S." and "$5.5 billion" inside one sentence
    assert hit.fields["chunk_text"] == hit.chunk_text and hit.fields["start"] == hit.start


def test_a_hit_says_where_it_matched(filing: Path, acme: Knowledge) -> None:
    kb = Knowledge([ScopedContext("nw", filing)])
    hit = search(kb, "stores", top_k=1, sources=[FILING], must_contain="merchandise inventories")[0]
    assert hit.match is not None and hit.snippet is not None
    a, b = hit.match
    assert hit.chunk_text is not None and hit.chunk_text[a:b] == "Merchandise inventories"
    assert hit.snippet in hit.chunk_text and "Merchandise inventories" in hit.snippet
    assert len(hit.snippet) <= SNIPPET_CHARS and hit.fields["match"] == hit.match
    assert " ".join(hit.snippet.split()) in repr(hit)  # what printing the hit shows
    # Over the sample report: the query's words, the window holding most of them.
    for found in search(acme, "gross margin improved", top_k=3):
        assert found.match is not None and found.snippet is not None and found.chunk_text is not None
        start, end = found.match
        assert "margin" in found.chunk_text[start:end].lower()
        assert found.chunk_text.find(found.snippet) <= start and end <= len(found.chunk_text)
        assert len(found.snippet) <= SNIPPET_CHARS
    # A hit sharing no word with the query (found by meaning) has no match; its snippet is its start.
    text = "Operating income was $6.9 million. It rose from $5.4 million a year earlier."
    plain = find_match(text, "profitability of the business")
    assert plain.start is None and text[plain.snippet_start : plain.snippet_end] == text


def test_reads_show_what_a_reader_reads_and_skip_chunks_that_are_only_furniture(acme: Knowledge) -> None:
    page = acme.read_page(REPORT, page=3)
    for hit in page.hits:
        assert hit.chunk_text and "Acme Instruments - Annual Report 2025" not in hit.chunk_text
        assert "Page 3 of 4" not in hit.chunk_text and hit.snippet is None and hit.match is None
    assert "helped by higher calibration capacity and lower costs for ceramic pressure elements" in page.text
    spans = "".join(h.span.text for h in page.hits if h.span is not None)
    assert "Page 3 of 4" in spans  # still the page's own text, footer and all


def test_a_quote_from_what_a_hit_reads_still_cites_the_page(filing: Path) -> None:
    kb = Knowledge([ScopedContext("nw", filing)])
    hit = search(kb, "quarterly dividend payable", top_k=1, sources=[FILING])[0]
    assert hit.page == 4 and hit.span is not None
    read = "The board approved a quarterly dividend of $0.25 per share.\nThe dividend is payable"
    assert hit.chunk_text is not None and hit.chunk_text.startswith(read)
    span = hit.span
    report = SpanReport(
        ref=span.ref,
        context="nw",
        source_path=span.source_path,
        page=span.page,
        start=span.start,
        end=span.end,
        text=span.text,
        section_path=span.section_path,
    )
    reader = VersionReader(filing)
    evidence = SpanResolver({"nw": reader}).resolve(report)
    assert evidence is not None and evidence.text == span.text and evidence.removed
    # The model printed the hit's text alone (no label): its start is what it saw.
    mark_seen([evidence], f"p.4 {hit.chunk_text[:100]}", 1)
    assert evidence.seen
    quote = "approved a quarterly dividend of $0.25 per share. The dividend is payable on October 1, 2023"
    answer = f'The board "{quote}" [1].'

    def page_text(context: str, source: str, page: int) -> str | None:
        return reader.page_text(source, page)

    result = build_citations(answer, [evidence], page_text)
    assert [c.pages for c in result.citations] == [[4]] and result.dropped == []
    citation = result.citations[0]
    assert "Table of Contents" in citation.grounding  # the page's text between the two sentences
    assert verify_grounding(citation, page_text)
    # The reader sees beside [1] exactly what [1] proves: the page's words, its contents link included.
    shown = quote.replace("share. The", "share. Table of Contents The")
    assert f'"{shown}" [1]' in result.text
    assert_quotes_are_groundings(result.text, result.citations)
    # The same quote against the span without what was cut: not in it, the marker is dropped.
    bare = EvidenceSpan(**{**evidence.__dict__, "removed": ()})
    assert build_citations(answer, [bare], page_text).citations == []


def test_must_contain_a_fragment_says_it_matches_whole_words(
    acme: Knowledge, capsys: pytest.CaptureFixture[str]
) -> None:
    assert search(acme, "revenue", top_k=3, must_contain="calibrat") == []
    err = capsys.readouterr().err
    assert "[notice: must_contain='calibrat' is in no chunk searched (it matches whole words" in err
    assert "calibration (" in err and "'calibrat*'" in err
    hits = search(acme, "revenue", top_k=3, must_contain="calibrat*")
    assert hits and all("calibrat" in (h.chunk_text or "").lower() for h in hits)
    assert capsys.readouterr().err == ""
    for hit in hits:
        assert hit.match is not None and (hit.chunk_text or "")[slice(*hit.match)].lower().startswith(
            "calibrat"
        )
    # Once per call, however many sources it searched on their own; the keyword search says so too.
    sources = [REPORT, "uploads/acme-corpus/policies/travel-policy.md"]
    assert (
        asyncio.run(acme.search_in_sources(sources, "revenue", per_source=1, must_contain="calibrat")) == []
    )
    assert capsys.readouterr().err.count("[notice: must_contain='calibrat'") == 1
    assert asyncio.run(acme.search_source_by_keyword("revenue", must_contain="zzyzx")) == []
    assert "must_contain='zzyzx' is in no chunk searched (it matches whole words, any case)]" in (
        capsys.readouterr().err
    )


def test_a_snippet_starts_at_its_sentence_and_the_match_holds_the_query_words() -> None:
    text = (
        "The company operates in three segments. Each segment is managed on its own and reports to the "
        "chief operating decision maker every quarter. In the U.S. the company's revenues were $5.5 "
        "billion, and consolidation of the two acquired businesses added $0.4 billion. Outside the U.S. "
        "revenue grew more slowly, held back by currency and by the sale of the European unit in 2022."
    )
    found = find_match(text, "What were U.S. revenue and consolidated results?")
    assert found.start is not None and found.end is not None
    sentence = text.index("In the U.S.")
    assert text[found.start : found.end].startswith("revenues were $5.5 billion, and consolidation")
    assert found.snippet_start == sentence  # the sentence's start: "U.S." and "$5.5" end none
    assert found.snippet_end - found.snippet_start <= SNIPPET_CHARS and text[found.snippet_end - 1] != " "
