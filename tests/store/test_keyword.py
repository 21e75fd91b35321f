"""The keyword index (`store/version/keyword.py`): tantivy's BM25 with the query built here. Phrases, filters
inside the engine, identifiers kept whole, a rebuild that ranks the same, a read-only mount, and the
FTS5 index of versions compiled before tantivy still read."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from sleuth.compile.pipeline import compile_context
from sleuth.settings import current
from sleuth.store.contexts.home import Home
from sleuth.store.version.keyword import (
    Fts5Index,
    TantivyIndex,
    build,
    build_fts5,
    exact_phrases,
    open_index,
    query_terms,
    word_prefix,
)

CHUNKS = [
    ("c1", "a.pdf", 1, "Annual report", "People", "As of December 31, 2015, we had 3,700 total employees."),
    ("c2", "a.pdf", 2, "Annual report", "Errors", "Error ERR-4012 means the parse_config step failed."),
    ("c3", "b.pdf", 1, "Policy", "Refunds", "Refunds are paid within 30 days. Employees total 40."),
    ("c4", "b.pdf", 2, "Policy", "Staff", "Total headcount: employees of the group, in total."),
    ("c5", "c.md", 1, "Notes", "", "Employees employees employees, a page about employees."),
]  # fmt: skip
ARTIFACTS = [
    ("a1", "Glossary", "glossary", "MTBF", "Mean time between failures."),
    ("a2", "Person", "doc", "Dana Reyes", "Head of refunds and returns."),
]


@pytest.fixture
def index(tmp_path: Path) -> TantivyIndex:
    build(tmp_path / "keyword", CHUNKS, ARTIFACTS)
    return TantivyIndex(tmp_path / "keyword")


def _ids(hits: list) -> list[str]:  # type: ignore[type-arg]
    return [h.id for h in hits]


def test_a_quoted_phrase_must_match_as_a_phrase(index: TantivyIndex) -> None:
    assert query_terms('"total employees" 2015') == (["total employees"], ["2015"])
    assert _ids(index.search_chunks('"total employees"')) == ["c1"]  # c3 and c4 hold both words apart
    assert set(_ids(index.search_chunks("total employees"))) >= {"c1", "c3", "c4", "c5"}
    assert index.search_chunks('"employees total headcount"') == []


def test_identifiers_match_as_one_unit(index: TantivyIndex) -> None:
    assert _ids(index.search_chunks("What does ERR-4012 mean?"))[0] == "c2"
    assert _ids(index.search_chunks("parse_config")) == ["c2"]
    assert index.search_chunks("4012-ERR") == []  # the parts in another order are another identifier


def test_filters_run_inside_the_engine_and_still_fill_top_k(index: TantivyIndex) -> None:
    everywhere = _ids(index.search_chunks("employees", top_k=2))
    assert "c5" in everywhere  # the page that repeats the word ranks high corpus-wide
    only_b = _ids(index.search_chunks("employees", top_k=2, sources=["b.pdf"]))
    assert sorted(only_b) == ["c3", "c4"]  # the best 2 of b.pdf, not the best 2 overall then cut
    assert index.search_chunks("employees", sources=[]) == []
    assert _ids(index.search_artifacts("MTBF", kind="glossary")) == ["a1"]
    assert _ids(index.search_artifacts("refunds", type="person")) == ["a2"]  # type matched without case
    assert index.search_artifacts("MTBF", kind="doc") == []


def test_stemming_and_stop_words_are_the_same_for_text_and_query(index: TantivyIndex) -> None:
    assert index.document_frequency("employee") == index.document_frequency("Employees") == 4
    assert index.document_frequency("?!") == 0
    assert _ids(index.search_chunks("the refund"))[0] == "c3"
    assert index.search_chunks("?!") == []


def test_a_rebuild_ranks_the_same(tmp_path: Path, index: TantivyIndex) -> None:
    build(tmp_path / "again", CHUNKS, ARTIFACTS)
    again = TantivyIndex(tmp_path / "again")
    for query in ("employees", "total employees 2015", "refund returns", "ERR-4012"):
        first = [(h.id, round(h.score, 6)) for h in index.search_chunks(query, top_k=5)]
        assert first == [(h.id, round(h.score, 6)) for h in again.search_chunks(query, top_k=5)]


def test_hits_are_named_by_the_id_map_and_without_it_by_the_stored_documents(tmp_path: Path) -> None:
    """A search maps its hits to ids through `ids.npy` and the fast `row` column; an index written
    before the map existed (here: the map removed) still answers the same, from stored documents."""
    build(tmp_path / "keyword", CHUNKS, ARTIFACTS)
    mapped = TantivyIndex(tmp_path / "keyword")
    assert mapped._chunk_ids.ids is not None and mapped._artifact_ids.ids is not None
    queries = ("employees", "total employees 2015", "refund returns", "ERR-4012")
    expected = {q: [(h.id, h.score) for h in mapped.search_chunks(q, top_k=5)] for q in queries}
    assert expected["ERR-4012"][0][0] == "c2" and len(expected["employees"]) == 4
    for name in ("chunks", "artifacts"):
        (tmp_path / "keyword" / name / "ids.npy").unlink()
    stored = TantivyIndex(tmp_path / "keyword")
    assert stored._chunk_ids.ids is None
    assert {q: [(h.id, h.score) for h in stored.search_chunks(q, top_k=5)] for q in queries} == expected
    assert _ids(stored.search_artifacts("MTBF")) == _ids(mapped.search_artifacts("MTBF")) == ["a1"]


def test_an_index_on_a_read_only_directory_opens(tmp_path: Path) -> None:
    """A turn's sandbox mounts its version read-only, and tantivy takes a lock file when it opens."""
    build(tmp_path / "keyword", CHUNKS, ARTIFACTS)
    for path in (tmp_path / "keyword").rglob("*"):
        mode = path.stat().st_mode
        assert mode & stat.S_IROTH, path  # another uid (the sandbox's) can read every file
    if os.geteuid() == 0:
        pytest.skip("root writes through permissions; the sandbox's read-only mount is tested in tests/sdk")
    for path in [*(tmp_path / "keyword").rglob("*"), tmp_path / "keyword"]:
        path.chmod(0o555 if path.is_dir() else 0o444)
    assert _ids(TantivyIndex(tmp_path / "keyword").search_chunks("ERR-4012")) == ["c2"]


def test_a_version_compiled_before_tantivy_is_still_read(tmp_path: Path) -> None:
    (tmp_path / "index").mkdir()
    build_fts5(tmp_path / "index" / "keyword.sqlite", CHUNKS, ARTIFACTS)
    legacy = open_index(tmp_path / "index")
    assert isinstance(legacy, Fts5Index)
    assert _ids(legacy.search_chunks('"total employees"')) == ["c1"]
    build(tmp_path / "index" / "keyword", CHUNKS, ARTIFACTS)
    assert isinstance(open_index(tmp_path / "index"), TantivyIndex)  # the new one wins when both exist
    assert open_index(tmp_path / "nothing") is None


def test_exact_phrases_are_the_quoted_the_identifiers_and_a_short_query_whole(index: TantivyIndex) -> None:
    assert exact_phrases("total employees") == ["total employees"]
    assert exact_phrases('What does "parse config" do for ERR-4012?') == [
        "parse config",
        "what does do for err 4012",
        "err 4012",
    ]
    # A question of many words is never looked up whole (no chunk says it verbatim).
    assert exact_phrases("How many employees did the company have at the end of its fiscal year?") == []
    # "total employees" is a phrase in c1 only (c3 says "Employees total", c4 "employees ... total").
    assert _ids(index.search_phrases(exact_phrases("total employees"))) == ["c1"]
    assert _ids(index.search_phrases(["err 4012"], sources=["b.pdf"])) == []
    assert _ids(index.search_phrases(["err 4012"], sources=["a.pdf"])) == ["c2"]


def test_each_version_has_its_own_index(tmp_path: Path, home: Home) -> None:
    """A recompile writes a new index for the new version; the old version's index is untouched."""
    corpus = tmp_path / "docs"
    corpus.mkdir()
    (corpus / "keep.md").write_text("# Keep\n\nThe calibration drift stays under 0.2 percent.\n")
    (corpus / "gone.md").write_text("# Gone\n\nThe zephyr turbine is decommissioned.\n")
    compile_context("kw", [corpus], None, home=home, settings=current())
    ctx = home.find("kw")
    first = ctx.live_version()
    (corpus / "gone.md").unlink()
    (corpus / "new.md").write_text("# New\n\nThe quokka sensor replaces the turbine.\n")
    compile_context("kw", [corpus], None, home=home, settings=current())
    second = ctx.live_version()
    assert first is not None and second is not None and first != second
    old, now = (open_index(ctx.version_dir(v) / "index") for v in (first, second))
    assert old is not None and now is not None
    assert now.search_chunks("zephyr") == [] and len(now.search_chunks("quokka")) == 1
    assert len(now.search_chunks("calibration drift")) == 1
    assert len(old.search_chunks("zephyr")) == 1 and old.search_chunks("quokka") == []


def test_chunks_holding_a_word_that_starts_with_a_prefix(tmp_path: Path, index: TantivyIndex) -> None:
    """What a `must_contain` fragment may have meant (issue 43, item 3): the index's terms are stemmed,
    and a stem may be shorter than the fragment ("employees" → "employe"), so the fragment's last
    letters are left off before the lookup (`word_prefix`)."""
    assert word_prefix("employees") == "employ" and word_prefix("refu") == "refu"
    assert word_prefix("emp") is None and word_prefix("two words") is None and word_prefix("a-b") is None
    build_fts5(tmp_path / "keyword.sqlite", CHUNKS, ARTIFACTS)
    for engine in (index, Fts5Index(tmp_path / "keyword.sqlite")):
        assert sorted(_ids(engine.search_prefix("employ"))) == ["c1", "c3", "c4", "c5"]
        assert sorted(_ids(engine.search_prefix("employ", sources=["b.pdf"]))) == ["c3", "c4"]
        assert _ids(engine.search_prefix("refu")) == ["c3"]
        assert engine.search_prefix('x" OR "y') == []  # only a word reaches the engine
