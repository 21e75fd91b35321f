"""Comparing a section across documents (issue 43): two quarterly filings' risk factors, which differ by
one added sentence, one removed and one changed figure, but break their pages, chunks and running
lines in other places, compare as exactly those three, each side citable on its page."""

from __future__ import annotations

from pathlib import Path

import pytest

from sleuth.agent.citations import build_citations, verify_grounding
from sleuth.agent.spans import SpanResolver
from sleuth.sandbox.messages import SpanReport
from sleuth.sdk import comparisons
from sleuth.sdk.errors import LimitError, NotFoundError
from sleuth.sdk.knowledge import Knowledge, ScopedContext
from sleuth.sdk.types import Comparison, Span
from sleuth.store.contexts.home import Home
from sleuth.store.version.search import VersionReader
from tests.support import compiled_version, make_pdf

Q2 = "uploads/filings/northwind-q2-2023.pdf"
Q3 = "uploads/filings/northwind-q3-2023.pdf"
MDNA = (
    "PART I. FINANCIAL INFORMATION\nItem 2. Management's Discussion and Analysis\nNet sales were $3.6 "
    "billion for the quarter, up 4 percent from a year ago, on strong demand for camping gear."
)
AFTER = (
    "Item 2. Unregistered Sales of Equity Securities\nWe repurchased 1.2 million shares for $95 million "
    "during the quarter under the program the board approved in 2021."
)
RISKS = [
    "Our results depend on consumer demand for outdoor equipment, which is seasonal and sensitive to the "
    "weather. A mild winter or a wet spring can reduce our sales in the quarters that matter most.",
    "We buy most of our products from suppliers in Asia, and shipping delays can leave our stores "
    "without stock. Freight costs rose sharply in recent years and may rise again.",
    "Competition from online retailers is intense and growing. Many of them offer lower prices and "
    "faster delivery than we do, and we may not be able to pass higher costs on to our customers.",
    "A breach of our information systems could expose customer data and disrupt our stores. The "
    "pandemic disrupted our stores and our supply chain in 2020 and 2021. We rely on third parties to "
    "host parts of our systems, and their failures could interrupt our sales.",
    "We had $2.1 billion of debt outstanding at the end of the quarter. Our credit agreement limits our "
    "ability to pay dividends and to make acquisitions.",
    *(
        f"Our {topic} could change in ways we do not expect, and a change could raise our costs or "
        f"reduce our sales in one or more quarters. We monitor our {topic} closely and report on it "
        f"to the audit committee of our board of directors every quarter, with the actions we propose."
        for topic in (
            "labor costs",
            "store leases",
            "insurance coverage",
            "pension obligations",
            "product recalls",
            "franchise partners",
            "brand licenses",
            "distribution centers",
        )
    ),
    "Changes in tax laws, trade policy or accounting standards could affect our results of operations.",
]
ADDED = "New tariffs on imported steel took effect in July 2023 and may raise our costs."
REMOVED = "The pandemic disrupted our stores and our supply chain in 2020 and 2021."
OLD_DEBT = "We had $2.1 billion of debt outstanding at the end of the quarter."
NEW_DEBT = "We had $2.4 billion of debt outstanding at the end of the quarter."


def _risks(paragraphs: list[str]) -> str:
    return "PART II. OTHER INFORMATION\nItem 1A. Risk Factors\n" + "\n".join(paragraphs)


def _pages(text: str, breaks: list[str]) -> list[str]:
    """`text` cut into pages just before each of `breaks` (words of it, in order)."""
    pages, at = [], 0
    for phrase in breaks:
        cut = text.index(phrase, at)
        pages.append(text[at:cut].rstrip())
        at = cut
    return [*pages, text[at:]]


def _filing(path: Path, bodies: list[str], header: str | None, footer: str | None) -> None:
    pages = []
    for n, body in enumerate(bodies, 1):
        top = f"{header} | {n}\nTable of Contents\n" if header else ""
        bottom = f"\n{footer} | {n}" if footer else f"\n{n}"
        pages.append(f"{top}{body}{bottom}")
    make_pdf(path, pages)


@pytest.fixture
def filings(home: Home, tmp_path: Path) -> Path:
    """Two 10-Qs: Q2's running header is at the top of its pages, Q3's running footer at the foot;
    their pages break inside different sentences (Q3's inside the changed one), and Q2's long page
    holds two chunks of the section."""
    q3 = list(RISKS)
    q3[1] = RISKS[1].replace("stock. ", f"stock. {ADDED} ")
    q3[3] = RISKS[3].replace(f"{REMOVED} ", "")
    q3[4] = RISKS[4].replace("$2.1 billion", "$2.4 billion")
    root = tmp_path / "filings"
    q2_risks = _pages(_risks(RISKS), ["shipping delays", "franchise partners could"])
    q3_risks = _pages(_risks(q3), ["retailers is intense", "outstanding at the end", "distribution centers"])
    _filing(root / "northwind-q2-2023.pdf", [MDNA, *q2_risks, AFTER], "Northwind Traders | Form 10-Q", None)
    _filing(root / "northwind-q3-2023.pdf", [MDNA, *q3_risks, AFTER], None, "Northwind Q3 2023 Form 10-Q")
    return compiled_version("nw", [root], home)


def test_a_section_compares_by_sentence_across_page_chunk_and_running_line_breaks(filings: Path) -> None:
    reader = VersionReader(filings)
    q2_chunks = [c for c in reader.source_chunks(Q2) if "Item 1A. Risk Factors" in c.heading_path]
    assert len(q2_chunks) > len({c.page for c in q2_chunks})  # a chunk ends inside a page of it
    kb = Knowledge([ScopedContext("nw", filings)])
    result = kb.compare_sections([Q2, Q3], section="risk factors")
    assert isinstance(result, Comparison) and len(result.diffs) == 1
    diff = result.diffs[0]
    assert [s.text for s in diff.added] == [ADDED]
    assert [s.text for s in diff.removed] == [REMOVED]
    assert [(c.old.text, c.new.text) for c in diff.changed] == [(OLD_DEBT, NEW_DEBT)]
    change = diff.changed[0]
    assert change.edits == [("$2.1", "$2.4")] and 0.8 < change.similarity < 1
    assert diff.moved == 0 and diff.unchanged == result.documents[0].sentences - 2
    assert result.documents[1].sentences == result.documents[0].sentences  # one added, one removed
    # Q3's page breaks inside the changed sentence: its new side stands on two pages, a span on each.
    assert change.new.pages == [3, 4] and len(change.new.evidence) == 2
    assert [d.section_path[-1] for d in result.documents] == ["Item 1A. Risk Factors"] * 2
    assert result.added == diff.added and result.evidence == diff.evidence
    shown = repr(result)
    for span in diff.evidence:
        assert span.ref in shown
    for running in ("Northwind Traders", "Table of Contents", "Form 10-Q", "Item 2. Unregistered"):
        assert running not in shown
    # The same comparison by pages: Q2's risk factors are on pages 2-4, Q3's on pages 2-5.
    by_pages = kb.compare_sections([Q2, Q3], pages={Q2: (2, 4), Q3: (2, 5)})
    assert [s.text for s in by_pages.added] == [ADDED] and [s.text for s in by_pages.removed] == [REMOVED]
    assert [c.new.text for c in by_pages.changed] == [NEW_DEBT]


def test_each_side_of_a_difference_is_cited_on_its_page(filings: Path) -> None:
    reader = VersionReader(filings)
    kb = Knowledge([ScopedContext("nw", filings)])
    diff = kb.compare_sections([Q2, Q3], section="Part II > Item 1A").diffs[0]

    def page_text(context: str, source: str, page: int) -> str | None:
        return reader.page_text(source, page)

    assert diff.evidence and all(s.ref.startswith("E") for s in diff.evidence)
    for span in diff.evidence:
        evidence = SpanResolver({"nw": reader}).resolve(_report(span))
        assert (
            evidence is not None
            and evidence.text == (page_text("nw", span.source_path, span.page) or "")[span.start : span.end]
        )
        quote = reader.read_span(span.source_path, span.page, span.start, span.end, span.text)
        result = build_citations(f'The filing says "{quote}" [1].', [evidence], page_text)
        assert result.dropped == [] and [c.pages for c in result.citations] == [[span.page]], quote
        assert verify_grounding(result.citations[0], page_text)
    # A sentence on one page is quoted whole, as the comparison prints it.
    added = diff.added[0]
    evidence = SpanResolver({"nw": reader}).resolve(_report(added.evidence[0]))
    assert evidence is not None
    result = build_citations(f'"{added.text}" [1]', [evidence], page_text)
    assert len(result.citations) == 1 and verify_grounding(result.citations[0], page_text)


def _report(span: Span) -> SpanReport:
    return SpanReport(
        ref=span.ref,
        context=span.context,
        source_path=span.source_path,
        page=span.page,
        start=span.start,
        end=span.end,
        text=span.text,
        section_path=span.section_path,
    )


def test_comparisons_are_bounded_and_say_what_they_need(
    filings: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    kb = Knowledge([ScopedContext("nw", filings)])
    cut = kb.compare_sections([Q2, Q3], section="risk factors", max_sentences=10)
    assert [d.sentences for d in cut.documents] == [10, 10] and all(d.truncated for d in cut.documents)
    err = capsys.readouterr().err
    assert f"[notice: compare_sections: {Q2} has 32 sentences" in err and "compared the first 10" in err
    # Q2's 10th sentence is Q3's 11th: past the cut, it is no difference; the added one, before it, is.
    assert [s.text for s in cut.added] == [ADDED] and cut.removed == [] and cut.changed == []
    assert "cut at max_sentences" in repr(cut)
    # A call lists a bounded number of sentences (a change is two); the rest are counted and said.
    monkeypatch.setattr(comparisons, "MAX_LISTED", 3)
    few = kb.compare_sections([Q2, Q3], section="risk factors").diffs[0]
    assert (len(few.added), len(few.removed), len(few.changed), few.unlisted) == (1, 1, 0, 1)
    assert "[notice: compare_sections: 1 more differences of" in capsys.readouterr().err
    assert "[1 more differences not listed" in repr(few)
    with pytest.raises(LimitError, match="needs section="):
        kb.compare_sections([Q2, Q3])
    with pytest.raises(LimitError, match="a list of 2-10 source paths"):
        kb.compare_sections([Q2], section="risk factors")
    with pytest.raises(LimitError, match="a list of 2-10 source paths"):
        kb.compare_sections(Q2, section="risk factors")
    with pytest.raises(LimitError, match="not one of sources"):
        kb.compare_sections([Q2, Q3], pages={Q2: (2, 3), "elsewhere.pdf": (1, 2)})
    with pytest.raises(LimitError, match="1 <= first <= last"):
        kb.compare_sections([Q2, Q3], pages=(3, 2))
    with pytest.raises(NotFoundError, match="has 5 pages"):
        kb.compare_sections([Q2, Q3], pages=(2, 9))
    with pytest.raises(NotFoundError, match=r"no heading of .* contains 'legal proceedings'"):
        kb.compare_sections([Q2, Q3], section="legal proceedings")
    with pytest.raises(NotFoundError, match="no source 'uploads/filings/northwind-q4"):
        kb.compare_sections([Q2, "uploads/filings/northwind-q4-2023.pdf"], section="risk factors")
