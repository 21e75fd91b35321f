"""The second stage (issue 11, 3): pages rescored by their title zone and how much of the question
they hold, fused with the first-stage order."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from sleuth.compile.pipeline import CompileReport
from sleuth.store.contexts.home import Home
from sleuth.store.version.keyword import open_index
from sleuth.store.version.rescore import (
    RESCORE_PAGES,
    PageWords,
    TitleIndex,
    idf_from,
    query_terms,
    rescore,
    title_pages,
)
from sleuth.store.version.search import VersionReader

PAGES = {
    # the first stage likes this one best: one chunk says "cash" many times, nothing else matches
    ("a.pdf", 1): "Liquidity overview\nCash cash cash was discussed with the board.",
    # the statement the question means: its title says so, its rows do not
    ("a.pdf", 2): "Consolidated Statements of Cash Flows\n(In millions)\nPurchases of equipment (1,577)",
    # holds the question's words spread over the page, no title match
    ("a.pdf", 3): "Notes\n" + "Other matters. " * 30 + "The flows of cash are summarised in the statement.",
}
CHUNKS = {"c1": ("a.pdf", 1), "c2": ("a.pdf", 2), "c3": ("a.pdf", 3), "c2b": ("a.pdf", 2)}


def _rescore(query: str, ranked: list[tuple[str, float]]) -> list[tuple[str, float]]:
    return rescore(
        query,
        ranked,
        page_of=CHUNKS.__getitem__,
        page_words=lambda key: PageWords.of(PAGES[key]),
        idf=lambda word: {"cash": 0.2}.get(word, 2.0),  # "cash" is on every page of a filing
    )


def test_title_zone_and_coverage_lift_the_page_the_question_means() -> None:
    ranked = [("c1", 0.9), ("c2", 0.5), ("c3", 0.4), ("c2b", 0.1)]
    out = _rescore("How much capital went out per the cash flow statement?", ranked)
    order = [cid for cid, _ in out]
    # a near call overturned: "Statements of Cash Flows" in its title zone beats "cash" said thrice
    assert order[0] == "c2"
    assert order.index("c3") > order.index("c1")  # same coverage as c2, but nothing in its title zone
    assert order.index("c2b") > order.index("c1")  # a good page's weak chunk does not pass another's best
    assert sorted(order) == sorted(cid for cid, _ in ranked)  # nothing lost, nothing added
    scores = [score for _, score in out]
    assert scores == sorted(scores, reverse=True)


def test_no_informative_word_keeps_the_first_stage_order() -> None:
    ranked = [("c1", 0.9), ("c3", 0.5), ("c2", 0.4)]
    assert _rescore("what is the", ranked) == ranked
    assert rescore("cash flow", [], CHUNKS.__getitem__, lambda k: PageWords.of(PAGES[k]), lambda w: 1.0) == []


def test_pages_beyond_the_rescored_head_keep_their_order_below_it() -> None:
    chunks = {f"c{i}": ("b.pdf", i) for i in range(RESCORE_PAGES + 5)}
    ranked = [(cid, 1.0 - i / 100) for i, cid in enumerate(chunks)]
    out = rescore(
        "flow statement",
        ranked,
        chunks.__getitem__,
        lambda key: PageWords.of("cash flow statement" if key[1] == 3 else "nothing here"),
        lambda w: 1.0,
    )
    order = [cid for cid, _ in out]
    assert order.index("c3") < 3  # the matching page rose (from 4th)
    assert order[RESCORE_PAGES:] == [f"c{i}" for i in range(RESCORE_PAGES, RESCORE_PAGES + 5)]
    assert min(s for _, s in out[:RESCORE_PAGES]) > max(s for _, s in out[RESCORE_PAGES:])


def test_query_terms_and_idf() -> None:
    assert query_terms("What were the Cash Flows in FY2022?") == {
        "cash": "cash",
        "flow": "flows",
        "fy2022": "fy2022",
    }
    idf = idf_from({"cash": 5, "flow": 1}.get, 10)  # type: ignore[arg-type]
    assert idf("flow") > idf("cash") > 0
    assert math.isclose(idf("flow"), math.log(11))
    assert idf_from(lambda _w: 0, 10)("absent") == 0.0


def test_document_frequency_and_both_keyword_paths_agree(sample_home: tuple[Home, CompileReport]) -> None:
    home, _ = sample_home
    reader = VersionReader.live(home.find("acme"))
    index = open_index(reader.root / "index")
    assert index is not None
    try:
        holding = [c for c in reader.chunks.values() if "hotel" in c.text.lower()]
        assert index.document_frequency("hotel") == len(holding) > 0
        assert index.document_frequency("Hotels") == index.document_frequency("hotel")  # stemmed
        assert index.document_frequency("?!") == 0
        # the corpus-wide query ranks first and joins after; restricted to every source it must agree
        everywhere = index.search_chunks("hotel limit per night", 20)
        every_source = sorted({c.source_path for c in reader.chunks.values()})
        restricted = index.search_chunks("hotel limit per night", 20, every_source)
        assert [h.id for h in everywhere] == [h.id for h in restricted]
    finally:
        index.close()


def test_search_rescoring_keeps_the_sample_answers(sample_home: tuple[Home, CompileReport]) -> None:
    home, _ = sample_home
    reader = VersionReader.live(home.find("acme"))
    hits = reader.search("What is the hotel limit per night?", top_k=5)
    assert Path(hits[0].source_path).name == "travel-policy.md"
    ahead = reader.keyword_candidates("What is the hotel limit per night?", 5)
    assert [h.id for h in reader.search("What is the hotel limit per night?", top_k=5, keyword=ahead)] == [
        h.id for h in hits
    ]
    started = reader.start_keyword("What is the hotel limit per night?", 5)  # as a hybrid search in a turn
    assert [h.id for h in reader.search("What is the hotel limit per night?", top_k=5, keyword=started)] == [
        h.id for h in hits
    ]


def test_a_page_whose_title_names_the_question_joins_the_rescoring() -> None:
    """A statement whose rows never reached the first stage's best pages is rescored when its title
    zone matches, and rises above pages that only share a word with the question."""
    chunks = {f"c{i}": ("b.pdf", i) for i in range(RESCORE_PAGES + 5)}
    text = {key: "Discussion of the quarter" for key in chunks.values()}
    statement = ("b.pdf", RESCORE_PAGES + 3)
    text[statement] = "Consolidated Statements of Cash Flows\n(1,577) 262 13"
    keys = list(text)
    words = lambda key: PageWords.of(text[key])  # noqa: E731
    index = TitleIndex.build(keys, words)
    also = title_pages("cash flow statement, capital spending", [index], lambda w: 1.0)
    assert also == [statement]
    ranked = [(cid, 1.0 - i / 100) for i, cid in enumerate(chunks) if chunks[cid] != statement]
    ranked.append((f"c{RESCORE_PAGES + 3}", 0.0))  # as `VersionReader.search` adds its first chunk
    without = rescore("cash flow statement", ranked, chunks.__getitem__, words, lambda w: 1.0)
    with_title = rescore("cash flow statement", ranked, chunks.__getitem__, words, lambda w: 1.0, also)

    def rank(out: list[tuple[str, float]]) -> int:
        return [cid for cid, _ in out].index(f"c{RESCORE_PAGES + 3}")

    assert rank(without) == len(ranked) - 1 and rank(with_title) <= 10  # from last to 11th
    assert title_pages("what is the", [index], lambda w: 1.0) == []  # nothing to go on


def test_a_page_holds_a_word_only_whole_and_as_its_words_are_split() -> None:
    """`overlap` looks for a question's word forms in the page's text; it must agree with splitting
    the page into `text.words`, so that "flow" is not found in "overflow" nor "cash" in "cashier"."""
    from sleuth.store.text import words
    from sleuth.store.version.rescore import forms, holds_term, holds_word

    text = "overflow_cash — cashier's flows; net-income (2018) café flow companies policyes taxes"
    lowered, split = text.lower(), set(words(text))
    for word in ("flow", "cash", "cashier", "s", "flows", "net", "income", "2018", "201", "caf"):
        assert holds_word(lowered, word) == (word in split), word
    for term in ("flow", "cash", "company", "policy", "tax", "taxe", "cashi", "overflow", "income"):
        assert holds_term(lowered, term) == any(form in split for form in forms(term)), term
    page = PageWords.of("Consolidated Statements of Cash Flows\n" + "1,577\n" * 100 + "Goodwill")
    assert holds_word(page.title, "flows") and not holds_word(page.title, "goodwill")
    assert holds_word(page.body, "goodwill")


def test_one_scan_of_a_page_scores_its_title_zone_and_its_text_as_two_would() -> None:
    """`page_overlaps` derives the title zone's overlap from the whole text's first matches; it must
    give what `overlap` gives on each, also where the zone's end cuts a word ("revenues" to "revenue")
    and where a term appears only below the zone."""
    from sleuth.store.version.rescore import TITLE_CHARS, overlap, page_overlaps, term_weights

    cut = "x" * (TITLE_CHARS - len("Total revenue")) + "Total revenues by segment\n"
    pages = [
        "Consolidated Statements of Cash Flows\n" + "1,577\n" * 100 + "Goodwill and companies",
        cut + "Revenue recognition policy",
        cut,
        "Companies we own\nRevenue " * 40,
        "short page: policies",
    ]
    for query in ("cash flow goodwill", "total revenue", "company policy", "segment revenue companies"):
        weight = term_weights(query, lambda w: 1.0 + len(w) / 10)
        for text in pages:
            page = PageWords.of(text)
            assert page_overlaps(weight, page) == (overlap(weight, page.title), overlap(weight, page.body)), (
                query,
                text[:40],
            )


def test_the_compile_writes_each_documents_title_index_as_the_reader_would_build_it(
    sample_home: tuple[Home, CompileReport],
) -> None:
    """`index/titles/` saves a cold reader from splitting a named document's title zones; what it
    holds must be what the reader builds from the chunks, page order included."""
    from sleuth.format import titles

    home, _ = sample_home
    reader = VersionReader.live(home.find("acme"))
    pdfs = [s for s in reader._pages_of_source if s.endswith(".pdf") and len(reader._pages_of_source[s]) > 1]
    assert pdfs
    for source in reader._pages_of_source:
        stored = titles.read(reader.root / "index", source)
        assert stored is not None, source
        built = TitleIndex.build(reader._pages_of_source[source], reader._page_words)
        assert [(source, page) for page in stored[0]] == built.pages
        assert stored[1] == built.by_word
        assert (source in pdfs) == bool(stored[1])  # a one-page document has no page titles
        assert reader._title_index(source).by_word == built.by_word
    assert titles.read(reader.root / "index", "../../version") is None  # never leaves the directory


def test_title_indexes_are_read_in_either_format_and_refused_when_malformed(tmp_path: Path) -> None:
    """Format 2 keeps a document's words and positions as two strings and parses a word's positions
    when it is looked up; a version written in format 1 (stop 33) is still read; anything else is
    refused (the reader then builds the index from the chunks)."""
    from sleuth.format import titles

    by_word = {"cash": [0, 2], "flows": [2], "revenue": [1]}
    titles.write(tmp_path, "docs/a.pdf", [3, 5, 9], by_word)
    stored = titles.read(tmp_path, "docs/a.pdf")
    assert stored is not None and stored[0] == [3, 5, 9] and stored[1] == by_word
    assert stored[1]["cash"] == [0, 2] and "goodwill" not in stored[1]
    index = TitleIndex([("docs/a.pdf", p) for p in stored[0]], stored[1])
    assert title_pages("cash flows", [index], lambda _w: 1.0) == [("docs/a.pdf", 9), ("docs/a.pdf", 3)]

    file = tmp_path / "titles" / "docs" / "a.pdf.json"
    file.write_text(json.dumps({"format": 1, "pages": [3, 5, 9], "words": by_word}))
    assert titles.read(tmp_path, "docs/a.pdf") == ([3, 5, 9], by_word)
    for broken in (
        {"format": 2, "pages": [3], "words": "cash\tflows", "positions": "0"},  # fewer position lists
        {"format": 3, "pages": [3], "words": "", "positions": ""},
        {"format": 2, "pages": "3", "words": "", "positions": ""},
        [1, 2],
    ):
        file.write_text(json.dumps(broken))
        assert titles.read(tmp_path, "docs/a.pdf") is None, broken
    for outside in ("/etc/passwd", "../a.pdf", "docs/../../a.pdf", ""):
        assert titles.path_of(tmp_path, outside) is None
    with pytest.raises(ValueError, match="not a source path"):
        titles.write(tmp_path, "../a.pdf", [1], {})
