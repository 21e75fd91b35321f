"""Index search results on the sample corpus: keyword (FTS5 BM25), semantic (MiniLM) and hybrid."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from sleuth.compile.pipeline import CompileReport, compile_context
from sleuth.models.embedder import MiniLMEmbedder, StaticEmbedder, get_embedder
from sleuth.settings import current
from sleuth.store.contexts.home import Home
from sleuth.store.version.fusion import keep_exact, rrf
from sleuth.store.version.keyword import match_expression, open_index
from sleuth.store.version.search import VersionReader


@pytest.fixture(scope="module")
def reader(sample_home: tuple[Home, CompileReport]) -> VersionReader:
    home, _ = sample_home
    return VersionReader.live(home.find("acme"))


def test_match_expression_quotes_terms_and_keeps_identifiers_whole() -> None:
    assert match_expression("What does ERR-4012 mean?") == '"err 4012" OR "mean"'
    assert match_expression("parse_config failed") == '"parse config" OR "failed"'
    # a quoted phrase must match; the rest is OR-ed; no query syntax passes through
    assert match_expression('drop table "x" OR 1=1; --') == '"x" AND ("drop" OR "table" OR "1")'
    assert match_expression("the of") == '"the" OR "of"'  # only stop words: keep them
    assert match_expression("?!") is None
    assert match_expression("FY2018 capex") == '"fy2018" OR "2018" OR "capex"'


def test_keyword_finds_exact_identifiers(reader: VersionReader) -> None:
    hits = reader.search("ERR-4012", top_k=10, mode="keyword")
    assert hits
    assert all("ERR-4012" in h.text or "ERR-4012" in " ".join(h.section_path) for h in hits[:3])
    firmware = reader.search("FW-3.2.1", mode="keyword")
    assert firmware and "FW-3.2.1" in firmware[0].text


def test_semantic_finds_paraphrases(reader: VersionReader) -> None:
    hits = reader.search("How many days per week may staff work from home?", top_k=3, mode="semantic")
    assert any(h.source_path.endswith("remote-work-policy.md") for h in hits)
    assert "travel-policy.md" not in {h.source_path.rsplit("/", 1)[-1] for h in hits}
    assert all(0.0 < h.score <= 1.0 for h in hits)  # cosine similarity, in the second stage's order


def test_hybrid_fuses_both(reader: VersionReader) -> None:
    hits = reader.search("What was Acme's revenue in 2025?", top_k=5, mode="hybrid")
    assert any(h.source_path.endswith("annual-report-2025.pdf") and "48.2" in h.text for h in hits)
    scores = [h.score for h in hits]
    assert scores == sorted(scores, reverse=True)


def test_hits_carry_what_a_citation_needs(
    reader: VersionReader, sample_home: tuple[Home, CompileReport]
) -> None:
    for hit in reader.search("incident root cause configuration outage", top_k=5):
        lines = (reader.root / "knowledge" / "pages" / f"{hit.source_path}.jsonl").read_text().splitlines()
        page = next(json.loads(x) for x in lines if json.loads(x)["page"] == hit.page)
        assert page["text"][hit.start : hit.end] == hit.text
        assert hit.id.startswith("chk_")


def test_search_can_be_restricted_to_sources(reader: VersionReader) -> None:
    only = ["uploads/acme-corpus/policies/travel-policy.md"]
    for mode in ("keyword", "semantic", "hybrid"):
        hits = reader.search("remote work approval", top_k=5, mode=mode, sources=only)
        assert hits and {h.source_path for h in hits} == set(only)


def test_artifact_namespace_is_searchable(reader: VersionReader) -> None:
    index = open_index(reader.root / "index")
    assert index is not None
    try:
        hits = index.search_artifacts("MTBF", kind="glossary")
        assert hits
        assert index.search_artifacts("MTBF", kind="doc", type="Nope") == []
    finally:
        index.close()
    ids = json.loads((reader.root / "index" / "dense" / "artifacts.ids.json").read_text())
    matrix = np.load(reader.root / "index" / "dense" / "artifacts.npy")
    assert matrix.shape == (len(ids), 384)


def test_hybrid_weights_favour_bm25_only_for_identifiers() -> None:
    from sleuth.store.version.search import DENSE_WEIGHT, hybrid_weights

    for query in ("What does ERR-4012 mean?", "FW-3.2.1 release", "why does parse_config fail"):
        assert hybrid_weights(query) == (1.0, 1.0), query
    for query in ("FY2018 capital expenditure for 3M", "the 10-K of 3M", "version 2.4 notes"):
        assert hybrid_weights(query) == (DENSE_WEIGHT, 1.0), query
    fused = rrf([["a", "b"], ["b", "c"]], weights=[3.0, 1.0])
    assert [i for i, _ in fused] == ["b", "a", "c"]  # agreement still wins; then the dense list


def test_rrf_rewards_agreement() -> None:
    fused = rrf([["a", "b", "c"], ["b", "a", "d"]])
    assert [i for i, _ in fused][:2] in (["a", "b"], ["b", "a"])
    assert fused[-1][0] in {"c", "d"}


def test_embedder_is_offline_pinned_and_normalized() -> None:
    embedder = get_embedder("default", threads=None)
    assert isinstance(embedder, MiniLMEmbedder)
    vectors = embedder.embed(["remote work three days", "work from home up to three days", "pressure sensor"])
    assert vectors.shape == (3, 384)
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-3)
    assert vectors[0] @ vectors[1] > vectors[0] @ vectors[2]
    long_text = "word " * 2000  # truncated to 256 word pieces, never an error
    assert embedder.embed([long_text]).shape == (1, 384)


def test_lite_static_embedder_compiles_and_searches(home: Home, corpus: Path, tmp_path: Path) -> None:
    manifest = tmp_path / "lite.json"
    manifest.write_text(json.dumps({"curate": {"chunks": {"embedding_model": "minilm-l6-v2-static"}}}))
    compile_context("lite", [corpus], manifest, home=home, settings=current())
    reader = VersionReader.live(home.find("lite"))
    assert reader.info.embedder.id == "minilm-l6-v2-static"
    assert np.load(reader.root / "index" / "dense" / "chunks.npy").shape[1] == 256
    hits = reader.search("when are refunds paid", top_k=2, mode="semantic")
    assert hits[0].source_path.endswith("web.html")
    vectors = StaticEmbedder().embed(["refund", ""])
    assert np.isclose(np.linalg.norm(vectors[0]), 1.0) and not vectors[1].any()


def test_chunks_holding_the_query_word_for_word_survive_hybrid_fusion(reader: VersionReader) -> None:
    """A short query copied from a chunk: the chunks that hold it verbatim stay in a hybrid top 3,
    whatever the dense side thinks of them (they were lost in fusion before)."""
    checked = 0
    for chunk in list(reader.chunks.values())[::7]:
        words = chunk.text.split()
        if len(words) < 8:
            continue
        phrase = " ".join(w.strip(".,;:()\"'") for w in words[3:6])
        exact = [cid for cid, _ in reader.exact(phrase, 50)]
        if not exact:
            continue
        checked += 1
        hybrid = [h.id for h in reader.search(phrase, top_k=3, mode="hybrid")]
        assert set(exact[:3]) <= set(hybrid), phrase
        assert chunk.id in exact  # the phrase's own chunk is among the exact hits
    assert checked >= 5


def test_keep_exact_puts_missing_exact_hits_inside_top_k() -> None:
    ranked = [(f"c{i}", 1.0 - i / 10) for i in range(8)]
    kept = keep_exact(ranked, ["c6", "c1"], top_k=4)
    assert [cid for cid, _ in kept[:4]] == ["c0", "c1", "c2", "c6"]
    assert [cid for cid, _ in kept] == ["c0", "c1", "c2", "c6", "c3", "c4", "c5", "c7"]
    scores = [score for _, score in kept]
    assert scores == sorted(scores, reverse=True)  # never rising down the list
    assert keep_exact(ranked, ["c0"], top_k=4) == ranked


def test_each_mode_scores_on_its_documented_scale(reader: VersionReader) -> None:
    query = "How many days per week may staff work from home?"
    vector = reader.embed_query(query)
    dense = reader._dense
    assert dense is not None
    semantic = reader.search(query, top_k=5, mode="semantic", vector=vector)
    for hit in semantic:  # the cosine similarity of the chunk's best window
        expected = float(dense.scores(vector, dense.positions([hit.id]))[0])
        assert hit.score == pytest.approx(expected, abs=1e-5) and -1.0 <= hit.score <= 1.0
    bm25 = dict(reader.keyword(query, 50))
    for hit in reader.search(query, top_k=5, mode="keyword"):  # the engine's BM25
        assert hit.score == pytest.approx(bm25[hit.id])
    hybrid = [h.score for h in reader.search(query, top_k=5, mode="hybrid", vector=vector)]
    assert all(0.0 < s <= 1.0 for s in hybrid) and hybrid == sorted(hybrid, reverse=True)
    assert hybrid[0] > 0.3  # a clear first: near the top of the scale, not 1/61
