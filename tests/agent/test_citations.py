"""Markers to verified citations (spec/runtime.md §8.3–8.4, spec/api.md §8.4): lenient markers, unknown
markers, renumbering by first appearance, grounding choice, verification and its normalisation, rule 4."""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Collection, Sequence
from typing import Any

from sleuth.agent.citations import (
    build_citations,
    grounding_order,
    normalize_markers,
    renumber_grounding,
    verify_grounding,
)
from sleuth.agent.records import Citation
from sleuth.agent.spans import EvidenceSpan
from tests.agent.support import assert_quotes_are_groundings

PAGES: dict[tuple[str, str, int], str] = {
    ("kb", "uploads/refunds.md", 1): (
        "# Refund policy\n\n"
        "Customers may return items within 30 days of delivery. Refunds go to the original payment method.\n"
        "Opened software cannot be returned. Gift cards are final sale.\n"
    ),
    ("kb", "uploads/shipping.md", 2): (
        "Shipping. Orders ship within two business days. Express delivery costs 12 dollars per order.\n"
    ),
}


def page_text(context: str, source: str, page: int) -> str | None:
    return PAGES.get((context, source, page))


def span_of(
    ref: str, needle: str, source: str = "uploads/refunds.md", page: int = 1, **kw: Any
) -> EvidenceSpan:
    text = PAGES[("kb", source, page)]
    start = text.index(needle)
    return EvidenceSpan(
        ref=ref, context="kb", source_path=source, page=page, start=start, end=start + len(needle),
        text=needle, **kw,
    )  # fmt: skip


def evidence() -> list[EvidenceSpan]:
    return [
        span_of("E1", "Customers may return items within 30 days of delivery. Refunds go to the original"),
        span_of("E2", "Opened software cannot be returned. Gift cards are final sale.", score=0.7),
        span_of(
            "E5", "Orders ship within two business days.", "uploads/shipping.md", 2, section_path=["Ship"]
        ),
    ]


def assert_api_rules(text: str, citations: Sequence[Citation], grounded: Collection[int] = ()) -> None:
    """spec/api.md §8.4 rules 1–3 on a result."""
    numbers = [int(n) for n in re.findall(r"\[(\d+)\]", text)]
    assert all(1 <= n <= len(citations) for n in numbers)
    first = list(dict.fromkeys(numbers))
    assert first == list(range(1, len(first) + 1))  # numbered by first appearance
    assert set(first) | set(grounded) == set(range(1, len(citations) + 1))  # every citation is referenced
    assert not re.search(r"\[[^\]]*[,\-–]", text)  # no lists or ranges left
    for c in citations:
        assert verify_grounding(c, page_text)


# --- markers -------------------------------------------------------------------------------------------


def test_lenient_marker_forms_become_canonical() -> None:
    labels = {"E7": 2, "E9": 4}
    text, unknown = normalize_markers(
        "A [3, 5]. B [1-3]. C [E7]. D 【4】. E [3][5]. F [2] [1]. G [4; E9]. H [2], [2].", 5, labels
    )
    assert text == "A [3][5]. B [1][2][3]. C [2]. D [4]. E [3][5]. F [2][1]. G [4]. H [2]."
    assert unknown == []
    assert normalize_markers(text, 5, labels) == (text, [])  # idempotent


def test_unknown_markers_are_removed_and_reported() -> None:
    text, unknown = normalize_markers("Yes [9]. Maybe [2, 8] and [E42] here [7] ok. [6] Next.", 3, {"E1": 1})
    assert text == "Yes. Maybe [2] and here ok. Next."
    assert unknown == ["[9]", "[8]", "[E42]", "[7]", "[6]"]
    text, unknown = normalize_markers("Range [2-4] and [5-1].", 3, {})
    assert (text, unknown) == ("Range [2][3] and.", ["[4]", "[5-1]"])


def test_bracketed_non_citation_integers_become_parentheses() -> None:
    text, unknown = normalize_markers(
        "Founded [2024] and [1990-2020] [1]. Use `x[0]` or\n```\ny = a[12]\n```\nDone [1].", 2, {}
    )
    assert text == "Founded (2024) and (1990-2020) [1]. Use `x(0)` or\n```\ny = a(12)\n```\nDone [1]."
    assert unknown == []


def test_grounding_order_and_renumbering() -> None:
    grounding = {"/price": [3], "/items/0": [1, 3], "/gone": [9]}
    assert grounding_order(grounding) == [3, 1, 9]
    assert renumber_grounding(grounding, {1: 2, 3: 1}) == {"/price": [1], "/items/0": [2, 1]}


# --- citations -----------------------------------------------------------------------------------------


def test_citations_are_numbered_by_first_appearance() -> None:
    ev = evidence()
    result = build_citations(
        "Orders ship in two business days [3]. Returns are accepted for 30 days [E1]. "
        "Opened software is excluded [2][1].",
        ev,
        page_text,
    )
    assert result.text == (
        "Orders ship in two business days [1]. Returns are accepted for 30 days [2]. "
        "Opened software is excluded [2][3]."
    )
    assert result.evidence_to_citation == {3: 1, 1: 2, 2: 3}
    assert [c.source for c in result.citations] == [
        "uploads/shipping.md", "uploads/refunds.md", "uploads/refunds.md",
    ]  # fmt: skip
    first = result.citations[0]
    assert first.model_dump() == {
        "source": "uploads/shipping.md",
        "section_paths": [["Ship"]],
        "pages": [2],
        "score": 0.0,
        "grounding": "Orders ship within two business days.",
        "kind": "chunk",
        "sources": [],
        "artifact_name": None,
        "context": "kb",
        "start": ev[2].start,
        "end": ev[2].end,
        "cell": None,
    }
    assert result.citations[2].score == 0.7
    assert result.dropped == []
    assert_api_rules(result.text, result.citations)


def test_grounding_is_the_best_matching_sentence_with_page_offsets() -> None:
    ev = evidence()
    result = build_citations("Refunds go back to the original payment method [1].", ev, page_text)
    (c,) = result.citations
    assert c.grounding == "Refunds go to the original"  # the span's second sentence (cut by the span)
    page = PAGES[("kb", "uploads/refunds.md", 1)]
    assert page[c.start : c.end] == c.grounding

    tie = build_citations("Something unrelated entirely [2].", ev, page_text)
    assert tie.citations[0].grounding == "Opened software cannot be returned."  # ties go to the earliest


def test_a_forged_span_is_dropped_and_the_rest_renumbered() -> None:
    ev = evidence()
    forged = EvidenceSpan(
        ref="E6", context="kb", source_path="uploads/refunds.md", page=1, start=17, end=60,
        text="Customers may return items within 90 days.",
    )  # fmt: skip
    missing = EvidenceSpan(
        ref="E8", context="kb", source_path="uploads/gone.md", page=1, start=0, end=4, text="Gone"
    )
    ev = [forged, *ev, missing]
    result = build_citations(
        "Returns within 90 days [1]. Software is excluded [3]. Gone [5]. Orders ship fast [4] [1].",
        ev,
        page_text,
    )
    assert result.text == "Returns within 90 days. Software is excluded [1]. Gone. Orders ship fast [2]."
    assert [c.grounding for c in result.citations] == [
        "Opened software cannot be returned.",
        "Orders ship within two business days.",
    ]
    assert result.dropped == [
        {"marker": "[1]", "source": "uploads/refunds.md", "page": 1, "reason": "not_verbatim"},
        {"marker": "[5]", "source": "uploads/gone.md", "page": 1, "reason": "page_missing"},
    ]
    assert result.evidence_to_citation == {3: 1, 4: 2}
    assert_api_rules(result.text, result.citations)


def test_unknown_markers_are_reported_as_dropped() -> None:
    result = build_citations("Yes [1]. No [7]. Never [E99].", evidence(), page_text)
    assert result.text == "Yes [1]. No. Never."
    assert [(d["marker"], d["reason"]) for d in result.dropped] == [
        ("[7]", "unknown_marker"),
        ("[E99]", "unknown_marker"),
    ]


def test_long_sentence_grounding_is_a_word_snapped_window() -> None:
    words = [f"w{i}" for i in range(150)]
    words[120:123] = ["copper", "pipes", "corrode"]
    sentence = " ".join(words) + "."
    key = ("kb", "uploads/long.md", 1)
    PAGES[key] = "Intro line.\n" + sentence + " Tail sentence here."
    try:
        span = span_of("E1", PAGES[key][12:], "uploads/long.md")
        result = build_citations("Copper pipes corrode [1].", [span], page_text)
        (c,) = result.citations
        g = c.grounding
        assert len(sentence) > 400 and len(g) <= 400
        assert "copper pipes corrode" in g and sentence.find(g) >= 0
        page = PAGES[key]
        assert page[c.start : c.end] == g
        assert page[c.start - 1] in " \n" and page[c.end] in " ."  # whole words
    finally:
        del PAGES[key]


def test_grounding_only_citations_follow_text_citations() -> None:
    ev = evidence()
    grounding = {"/ship": [3], "/refund": [1], "/bogus": [11]}
    result = build_citations(
        "Refunds within 30 days [1].",
        ev,
        page_text,
        extra_cited=grounding_order(grounding),
        grounding_text={3: "two business days"},
    )
    assert result.text == "Refunds within 30 days [1]."
    assert [c.source for c in result.citations] == ["uploads/refunds.md", "uploads/shipping.md"]
    assert result.citations[1].grounding == "Orders ship within two business days."
    assert renumber_grounding(grounding, result.evidence_to_citation) == {"/ship": [2], "/refund": [1]}
    assert result.dropped == [{"marker": "[11]", "source": None, "page": None, "reason": "unknown_marker"}]
    assert_api_rules(result.text, result.citations, grounded={2})


def test_artifact_citations_carry_their_sources() -> None:
    span = span_of(
        "E1", "Gift cards are final sale.", via="artifact", artifact_name="policy-summary",
        artifact_sources=["uploads/refunds.md", "uploads/faq.md"], score=0.9,
    )  # fmt: skip
    (c,) = build_citations("Gift cards are final [1].", [span], page_text).citations
    assert (c.kind, c.artifact_name, c.sources, c.score) == (
        "artifact", "policy-summary", ["uploads/refunds.md", "uploads/faq.md"], 0.9,
    )  # fmt: skip
    table = span_of(
        "E2", "Gift cards are final sale.", via="table", artifact_name="x", artifact_sources=["y"]
    )
    (t,) = build_citations("Final [1].", [table], page_text).citations
    assert (t.kind, t.artifact_name, t.sources) == ("table", None, [])


def test_non_citation_brackets_and_spacing_in_the_final_text() -> None:
    result = build_citations(
        "In [2019] sales rose [1] and [4] fell.\n[9] Next line `a[3]`.",
        evidence(),
        page_text,
        question="How did sales move in 2019?",  # the year is the question's, not a claim of [1]
    )
    assert result.text == "In (2019) sales rose [1] and fell.\nNext line `a(3)`."
    assert_api_rules(result.text, result.citations)


# --- verification --------------------------------------------------------------------------------------


def test_verification_accepts_nfc_and_whitespace_differences() -> None:
    raw = "Caf" + unicodedata.normalize("NFD", "é") + "  au\n\tlait is served daily."
    key = ("kb", "uploads/menu.md", 1)
    PAGES[key] = "Menu\n" + raw
    try:
        citation = {
            "source": "uploads/menu.md", "pages": [1], "context": "kb",
            "grounding": "Café au lait is served daily.", "start": 5, "end": 5 + len(raw),
        }  # fmt: skip
        assert verify_grounding(citation, page_text)
        assert not verify_grounding({**citation, "start": 6}, page_text)  # the offsets must locate it
        assert not verify_grounding({**citation, "grounding": "Café au lait is free."}, page_text)
        assert not verify_grounding({**citation, "pages": [2]}, page_text)
        assert not verify_grounding({**citation, "grounding": "   "}, page_text)

        # A span whose stored text differs from the page only in whitespace still verifies.
        text = raw.replace("\n\t", "  ")
        span = EvidenceSpan(
            ref="E1",
            context="kb",
            source_path="uploads/menu.md",
            page=1,
            start=5,
            end=5 + len(raw),
            text=text,
        )
        result = build_citations("Coffee is served [1].", [span], page_text)
        assert len(result.citations) == 1 and result.dropped == []
    finally:
        del PAGES[key]


def test_a_quote_in_the_answer_is_the_grounding() -> None:
    page = "Rail and ground transport\nTaxis may be used late at night. Rail is booked through the portal."
    start = 0
    span = EvidenceSpan(
        ref="E1", context="ctx", source_path="a.md", page=1, start=start, end=len(page), text=page
    )
    answer = 'According to a.md (p. 1): "Taxis may be used late at night." [1]'
    result = build_citations(answer, [span], lambda c, s, p: page)
    [citation] = result.citations
    assert citation.grounding == "Taxis may be used late at night."
    assert page[citation.start : citation.end] == citation.grounding


# --- quotations beside markers are the citations' groundings (issue 22, item 1) ----------------------
FILING = (
    "Fiscal 2022 was a record year. These milestone achievements demonstrate the power of our model. "
    "Net sales increased 18.2% to $10.2 billion compared to $8.6 billion in fiscal 2021. "
    "Comparable sales increased 15.6%."
)


def filing_span(ref: str = "E1") -> EvidenceSpan:
    return EvidenceSpan(
        ref=ref, context="ctx", source_path="10k.pdf", page=3, start=0, end=len(FILING), text=FILING
    )


def filing_page(_c: str, _s: str, _p: int) -> str:
    return FILING


def test_two_quotes_of_one_span_get_a_citation_each() -> None:
    """The answer quoted two sentences of the same span beside `[2]`; one citation had one grounding,
    so the reader saw one sentence and was shown another as its proof."""
    answer = (
        'According to 10k.pdf (p. 3): "Net sales increased 18.2% to $10.2 billion compared to $8.6 billion '
        'in fiscal 2021." [1]\nAccording to 10k.pdf (p. 3): "These milestone achievements demonstrate the '
        'power of our model." [1]'
    )
    result = build_citations(answer, [filing_span()], filing_page)
    assert len(result.citations) == 2
    assert assert_quotes_are_groundings(result.text, result.citations) == 2
    assert result.text.endswith('"These milestone achievements demonstrate the power of our model." [2]')
    assert result.evidence_to_citation == {1: 1}
    for c in result.citations:
        assert FILING[c.start : c.end] == c.grounding
        assert verify_grounding(c, filing_page)


def test_a_quote_not_in_its_span_loses_its_marker() -> None:
    answer = (
        'Sales grew. The filing says "net sales fell sharply in fiscal 2022" [1]. Comparable sales rose [1].'
    )
    result = build_citations(answer, [filing_span()], filing_page)
    assert result.text == (
        'Sales grew. The filing says "net sales fell sharply in fiscal 2022". Comparable sales rose [1].'
    )
    assert [d["reason"] for d in result.dropped] == ["quote_not_in_evidence"]
    assert "fell" not in result.citations[0].grounding
    assert assert_quotes_are_groundings(result.text, result.citations) == 0


def test_a_quote_is_rewritten_to_its_grounding_when_only_spacing_or_marks_differ() -> None:
    page = "The policy’s scope — all staff — applies from\nJanuary 1, 2024 onwards."
    span = EvidenceSpan(ref="E1", context="c", source_path="p.md", page=1, start=0, end=len(page), text=page)
    answer = "It says “The policy's scope - all staff - applies from January 1, 2024 onwards.” [1]"
    result = build_citations(answer, [span], lambda c, s, p: page)
    [citation] = result.citations
    assert citation.grounding == page
    assert "“The policy’s scope — all staff — applies from January 1, 2024 onwards.” [1]" in result.text
    assert assert_quotes_are_groundings(result.text, result.citations) == 1


def test_quotes_with_inner_marks_ellipses_and_a_gap_before_the_marker() -> None:
    page = 'Members of the "Fan Club" program earn points on every purchase. Points expire after a year.'
    span = EvidenceSpan(ref="E1", context="c", source_path="p.md", page=1, start=0, end=len(page), text=page)
    answers = [
        'Per p.md: "Members of the "Fan Club" program earn points on every purchase." [1]',
        'Per p.md: "… the "Fan Club" program earn points on every purchase …" [1]',
        'The policy ("Points expire after a year."), as p.md puts it [1], is strict.',
        'Per the "Fan Club" terms, the rule is "Points expire after a year." [1]',
    ]
    for answer in answers:
        result = build_citations(answer, [span], lambda c, s, p: page)
        assert result.dropped == [], answer
        assert assert_quotes_are_groundings(result.text, result.citations) >= (answer.count("[1]")), answer


def test_one_quote_beside_two_markers_must_be_in_both() -> None:
    other = EvidenceSpan(
        ref="E2", context="ctx", source_path="other.md", page=1, start=0, end=20, text="Unrelated words here"
    )
    answer = 'It reports "Comparable sales increased 15.6%." [1][2]'
    result = build_citations(
        answer, [filing_span(), other], lambda c, s, p: FILING if s == "10k.pdf" else other.text
    )
    assert result.text == 'It reports "Comparable sales increased 15.6%." [1]'
    assert [d["marker"] for d in result.dropped] == ["[2]"]
    assert assert_quotes_are_groundings(result.text, result.citations) == 1


def test_a_quote_from_the_text_a_hit_showed_skips_exactly_what_it_cut() -> None:
    """A hit shows its span without page furniture and with a hyphenated line break joined (issue 43,
    item 3): a quote taken from that text is found by skipping exactly those characters, and cites the
    verbatim slice; a quote that leaves out anything else is still not in the span."""
    page = (
        "The company repaid its long-\nterm notes in March.\nAcme Corp | Annual Report 2024 | 7\n"
        "It issued no new notes during the year."
    )
    pages = {("kb", "uploads/r.pdf", 7): page}
    hyphen = page.index("-\n") + 1
    footer = page.index("Acme Corp")
    removed = ((hyphen, hyphen + 1), (footer, page.index("It issued")))
    span = EvidenceSpan(
        ref="E1", context="kb", source_path="uploads/r.pdf", page=7, start=0, end=len(page), text=page,
        removed=removed,
    )  # fmt: skip

    def pages_of(context: str, source: str, number: int) -> str | None:
        return pages.get((context, source, number))

    quote = "repaid its long-term notes in March. It issued no new notes"
    result = build_citations(f'It "{quote}" [1].', [span], pages_of)
    assert len(result.citations) == 1 and result.dropped == []
    citation = result.citations[0]
    assert citation.grounding == page[page.index("repaid") : page.index(" during")]  # verbatim, footer too
    assert verify_grounding(citation, pages_of)
    assert_quotes_are_groundings(result.text, result.citations)
    bare = EvidenceSpan(**{**span.__dict__, "removed": ()})
    assert build_citations(f'It "{quote}" [1].', [bare], pages_of).citations == []
    skipped = "repaid its long-term notes. It issued no new notes during"  # "in March" is not cut
    assert build_citations(f'It "{skipped}" [1].', [span], pages_of).citations == []
