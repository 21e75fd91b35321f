"""Evidence for synthesis (spec/runtime.md §8.1): the seen rule, selection caps, windows that keep exact page
offsets, computed results, the numbered list, and sentence splitting."""

from __future__ import annotations

from typing import Any

from sleuth.agent.evidence import (
    computed_results,
    format_evidence,
    mark_seen,
    select_evidence,
    split_sentences,
)
from sleuth.agent.spans import EvidenceSpan


def make_span(ref: str, page_text: str, start: int, end: int, **kw: Any) -> EvidenceSpan:
    """A span sliced from `page_text`, as the sandbox reports them."""
    fields: dict[str, Any] = {"context": "kb", "source_path": "uploads/a.md", "page": 1, **kw}
    return EvidenceSpan(ref=ref, start=start, end=end, text=page_text[start:end], **fields)


def span_of(ref: str, page_text: str, needle: str, **kw: Any) -> EvidenceSpan:
    start = page_text.index(needle)
    return make_span(ref, page_text, start, start + len(needle), **kw)


PAGE = (
    "Refund policy\n\n"
    "Customers may return items within 30 days of delivery. Opened software cannot be returned.\n"
    "Refunds are issued to the original payment method within five business days of inspection.\n"
)


# --- seen ----------------------------------------------------------------------------------------------


def test_label_is_matched_as_a_whole_token() -> None:
    e7 = make_span("E7", PAGE, 0, 10)
    e71 = make_span("E71", PAGE, 20, 30)
    counter = mark_seen([e7, e71], "hits: E71 (score 0.8)", 0)
    assert (e7.seen, e71.seen) == (False, True)
    assert counter == 1 and e71.seen_order == 0
    counter = mark_seen([e7, e71], "[E7], then again E71", counter)
    assert e7.seen and e7.seen_order == 1 and e71.seen_order == 0  # a seen span keeps its order
    assert counter == 2
    assert mark_seen([make_span("E2", PAGE, 0, 5)], "AE2 E2x E23", 0) == 0


def test_sixty_char_prefix_after_whitespace_collapse_counts_as_seen() -> None:
    page = "Intro.\n" + "Customers   may return\n\titems within 30 days of delivery, no questions asked, " * 3
    span = make_span("E1", page, 7, len(page))
    printed = " ".join(span.text[:160].split())  # e.g. print(h.fields["chunk_text"][:160]) then rewrapped
    assert mark_seen([span], f"1. {printed}...", 5) == 6
    assert span.seen and span.seen_order == 5

    other = make_span("E2", page, 7, len(page))
    assert mark_seen([other], " ".join(other.text[:59].split()), 0) == 0  # 59 chars are not enough
    assert not other.seen


def test_short_span_is_seen_when_all_of_it_appears_and_repr_escapes_are_read() -> None:
    short = span_of("E3", PAGE, "Opened software cannot be returned.")
    assert mark_seen([short], "['Opened software cannot be returned.']", 0) == 1
    wrapped = make_span("E4", "a\nOpened\nsoftware cannot be returned.", 2, 35)
    assert mark_seen([wrapped], repr(wrapped.text), 0) == 1  # printed as 'Opened\nsoftware …'


def test_seen_order_follows_appearance_then_label_number() -> None:
    e1 = span_of("E1", PAGE, "Customers may return items")
    e3 = span_of("E3", PAGE, "Refunds are issued")
    twin_b = make_span("E9", "xx", 0, 2)
    twin_a = make_span("E8", "xx", 0, 2)
    counter = mark_seen([e1, e3], "E3 first, then Customers may return items", 10)
    assert (e3.seen_order, e1.seen_order, counter) == (10, 11, 12)
    counter = mark_seen([twin_b, twin_a], "xx", 0)
    assert (twin_a.seen_order, twin_b.seen_order, counter) == (0, 1, 2)


# --- selection -----------------------------------------------------------------------------------------


def test_final_spans_first_then_seen_by_order_deduplicated() -> None:
    a = span_of("E1", PAGE, "Refund policy")
    b = span_of("E2", PAGE, "Opened software cannot be returned.")
    c = span_of("E3", PAGE, "Refunds are issued")
    d = span_of("E4", PAGE, "Refund policy")  # same slice as E1 under another label
    for order, span in enumerate([c, a, d, b]):
        span.sighting.seen, span.sighting.order = True, order
    chosen = select_evidence([a, b, c, d], ["E2", "E1", "E2", "E404"], "refunds")
    assert [s.ref for s in chosen] == ["E2", "E1", "E3"]


def test_caps_on_span_count_and_characters() -> None:
    page = "".join(f"Sentence number {i} is here. " for i in range(200))
    spans = [make_span(f"E{i + 1}", page, i * 28, i * 28 + 28) for i in range(40)]
    for i, s in enumerate(spans):
        s.sighting.seen, s.sighting.order = True, i
    assert len(select_evidence(spans, [], "q")) == 24
    chosen = select_evidence(spans, [], "q", max_chars=100)
    assert sum(len(s.text) for s in chosen) <= 100 and len(chosen) == 3

    big = make_span("E99", page, 0, 90)
    chosen = select_evidence([big, *spans[:3]], ["E99", "E1", "E2", "E3"], "q", max_chars=100)
    assert [s.ref for s in chosen] == ["E99"]  # nothing else fits beside the 90-char span
    chosen = select_evidence([big, *spans[:3]], ["E1", "E99", "E2"], "q", max_chars=100)
    assert [s.ref for s in chosen] == ["E1", "E2", "E3"]  # the span over the cap is skipped; later ones fit


def _long_page() -> tuple[str, int]:
    filler = "".join(
        f"Paragraph {i} talks about shipping logistics and warehouse schedules. " for i in range(60)
    )
    target = "The warranty on refurbished laptops lasts eighteen months from purchase."
    more = "".join(f"Line {i} covers unrelated packaging material and boxes. " for i in range(60))
    page = "HEADER\n" + filler + target + " " + more
    return page, page.index(target)


def test_long_span_is_windowed_around_the_question_with_exact_offsets() -> None:
    page, at = _long_page()
    span = make_span("E1", page, 7, len(page), section_path=["Policies"], score=0.5)
    span.sighting.seen, span.sighting.order = True, 0
    (cut,) = select_evidence([span], [], "How long is the warranty on refurbished laptops?")
    assert len(cut.text) <= 1_600 and cut.text == page[cut.start : cut.end]
    assert cut.start <= at < cut.end
    assert cut.text[0].isupper() and cut.text.endswith(".")  # whole sentences
    assert (cut.ref, cut.section_path, cut.score, cut.seen_order) == ("E1", ["Policies"], 0.5, 0)
    assert span.text == page[7:]  # the original is untouched


def test_window_without_sentences_snaps_to_words() -> None:
    words = [f"tok{i}" for i in range(800)]
    words[500] = "needle"
    page = "x " + " ".join(words)
    span = make_span("E1", page, 2, len(page))
    (cut,) = select_evidence([span], ["E1"], "needle", window=300)
    assert cut.text == page[cut.start : cut.end] and len(cut.text) <= 300
    assert "needle" in cut.text
    assert page[cut.start - 1] == " " and (cut.end == len(page) or page[cut.end] == " ")


# --- computed results and the list ---------------------------------------------------------------------


def test_computed_results_keep_only_computing_steps_within_caps() -> None:
    obs = [
        (["search_source"], "hits…"),
        (["query_db"], "n\n42"),
        (["get_fact", "search_source"], "x" * 2_500),
        (["read_rosters"], "y" * 2_500),
        (["query_db"], "z" * 2_500),
    ]
    out = computed_results(obs)
    assert out.startswith("Step 2 (query_db):\nn\n42\n\nStep 3 (get_fact):\n")
    assert "x" * 2_000 in out and "x" * 2_001 not in out
    assert "Step 5 (query_db):" in out
    assert "y" * 2_000 in out and "y" * 2_001 not in out
    assert out.count("z") == 6_000 - 4 - 2_000 - 2_000  # the last one gets what is left of the total
    assert computed_results([(["search_source"], "nothing")]) == ""


def test_format_evidence_numbers_the_list() -> None:
    a = span_of("E4", PAGE, "Opened software cannot be returned.", section_path=["Refunds", "Exclusions"])
    b = span_of("E1", PAGE, "Refund policy", source_path="uploads/b.pdf", page=3)
    assert format_evidence([a, b]) == (
        '[1] (uploads/a.md, p. 1, § Refunds > Exclusions) "Opened software cannot be returned."\n\n'
        '[2] (uploads/b.pdf, p. 3) "Refund policy"'
    )


# --- sentences -----------------------------------------------------------------------------------------


def _sentences(text: str) -> list[str]:
    spans = split_sentences(text)
    for a, b in spans:
        assert text[a:b] == text[a:b].strip() and text[a:b]
    return [text[a:b] for a, b in spans]


def test_split_sentences_respects_abbreviations_and_decimals() -> None:
    text = (
        "  Acme Inc. sells e.g. widgets, i.e. small parts. The rate is 3.5 percent in the U.S. today! "
        'See No. 5 for details. Is it? "Yes." 2024 was a good year.'
    )
    assert _sentences(text) == [
        "Acme Inc. sells e.g. widgets, i.e. small parts.",
        "The rate is 3.5 percent in the U.S. today!",
        "See No. 5 for details.",
        "Is it?",
        '"Yes."',
        "2024 was a good year.",
    ]


def test_split_sentences_on_blocks_bullets_headings_and_tables() -> None:
    text = (
        "# Returns\nItems may be returned\nwithin 30 days.\n\nExclusions:\n- opened software\n- gift cards"
        "\n  bought on sale\n1. First step\n| col | val |\n|-----|-----|\n| a | 1 |\nlower case line"
    )
    assert _sentences(text) == [
        "# Returns",
        "Items may be returned\nwithin 30 days.",
        "Exclusions:",
        "- opened software",
        "- gift cards\n  bought on sale",
        "1. First step",
        "| col | val |",
        "|-----|-----|",
        "| a | 1 |",
        "lower case line",
    ]
    assert split_sentences("") == [] and split_sentences(" \n\n ") == []
