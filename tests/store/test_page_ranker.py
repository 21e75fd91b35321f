"""The learned page ranker (issue 44): pages are the unit the second stage ranks, a page's chunks pool
their evidence, and the shipped model loads and ranks with nothing but the standard library."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from sleuth.compile.pipeline import CompileReport
from sleuth.store.contexts.home import Home
from sleuth.store.version.ranker import FEATURES, PageRanker, QuestionCues, figure_share, shipped
from sleuth.store.version.rescore import RESCORE_PAGES, PageWords, page_features, rescore
from sleuth.store.version.search import VersionReader


def _only(feature: str, weight: float = 1.0) -> PageRanker:
    """A ranker that weighs one feature alone (standardised as is)."""
    weights = tuple(weight if name == feature else 0.0 for name in FEATURES)
    return PageRanker(FEATURES, (0.0,) * len(FEATURES), (1.0,) * len(FEATURES), weights, 0.0)


def test_the_shipped_model_loads_and_ranks_without_numpy_or_any_training_dependency() -> None:
    script = (
        "import sys\n"
        "for name in ('numpy', 'sklearn', 'scipy'):\n"
        "    sys.modules[name] = None  # importing any of them now fails\n"
        "from sleuth.store.version.ranker import shipped, FEATURES\n"
        "model = shipped()\n"
        "assert model is not None and model.features == FEATURES\n"
        "print(model.score([0.0] * len(FEATURES)))\n"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert 0.0 < float(done.stdout) < 1.0


def test_a_model_that_weighs_other_features_is_refused() -> None:
    data = shipped()
    assert data is not None
    bad = {**data.to_json(), "features": ["first_stage"]}
    with pytest.raises(ValueError, match="must weigh exactly"):
        PageRanker.from_json(bad)
    assert PageRanker.from_json(json.loads(json.dumps(data.to_json()))) == data


CHUNKS = {"a1": ("f.pdf", 1), "b1": ("f.pdf", 2), "b2": ("f.pdf", 2), "b3": ("f.pdf", 2), "c1": ("f.pdf", 3)}
TEXT = {1: "Revenue was discussed.", 2: "Revenue by segment and revenue by region.", 3: "Revenue."}


def _ranked(ranker: PageRanker | None) -> list[tuple[str, float]]:
    return rescore(
        "segment revenue",
        [("a1", 0.9), ("b1", 0.8), ("c1", 0.7), ("b2", 0.6), ("b3", 0.5)],
        CHUNKS.__getitem__,
        lambda key: PageWords.of(TEXT[key[1]]),
        lambda word: 1.0,
        ranker=ranker,
    )


def test_a_page_is_the_unit_its_chunks_pool_and_its_next_chunks_follow_at_half() -> None:
    out = _ranked(_only("pooled"))
    order = [cid for cid, _ in out]
    # page 2's three chunks add up past page 1's single better one
    assert order[0] == "b1"
    scores = dict(out)
    assert scores["b2"] < scores["b1"] and scores["b3"] < scores["b2"]
    assert [s for _, s in out] == sorted((s for _, s in out), reverse=True)
    assert sorted(order) == sorted(CHUNKS)
    # without a model, the fixed fusion: each chunk keeps its own first-stage rank in the sum
    assert next(cid for cid, _ in _ranked(None)) == "b1"


def test_rescored_pages_stay_above_the_pages_it_did_not_look_at() -> None:
    chunks = {f"c{i}": ("g.pdf", i) for i in range(RESCORE_PAGES + 5)}
    out = rescore(
        "flow statement",
        [(cid, 1.0 - i / 100) for i, cid in enumerate(chunks)],
        chunks.__getitem__,
        lambda key: PageWords.of("cash flow statement" if key[1] == 7 else "nothing here"),
        lambda w: 1.0,
        ranker=_only("coverage", -5.0),  # even a model that dislikes every rescored page
    )
    order = [cid for cid, _ in out]
    assert order[RESCORE_PAGES:] == [f"c{i}" for i in range(RESCORE_PAGES, RESCORE_PAGES + 5)]
    assert min(s for _, s in out[:RESCORE_PAGES]) > max(s for _, s in out[RESCORE_PAGES:])


def test_features_say_what_the_page_holds() -> None:
    cues = QuestionCues.of("What was revenue in 2022 and 2021?")
    assert cues.asks_quantity and cues.years == {"2021", "2022"}
    assert not QuestionCues.of("Who is the chief executive?").asks_quantity
    table = "Revenue 2022 2021\nProducts 1,200 1,100\nServices 300 250"
    row = dict(
        zip(
            FEATURES,
            page_features(
                [2, 5],
                (1.0, 2.0),
                2.0,
                3,
                1,
                PageWords.of(table),
                cues,
                False,
                (0.7, 0.0, 0.5, -1.0),
                True,
                0.25,
            ),
            strict=True,
        )
    )
    assert row["years"] == 1.0 and row["title"] == 0.5 and row["coverage"] == 1.0
    assert row["figures"] == row["figures_asked"] == figure_share(table) > 0.4
    assert figure_share("Revenue by segment") == 0.0 and figure_share(" \n") == 0.0
    assert row["chunks"] > 0 and row["first_stage"] < 0 and row["coverage_rank"] == 0.0
    assert (row["dense"], row["keyword"], row["named"], row["title_candidate"]) == (0.7, 0.5, 1.0, 0.0)
    assert row["boilerplate"] == 0.25


def test_every_search_ranks_with_the_shipped_model_and_scores_stay_in_range(
    sample_home: tuple[Home, CompileReport],
) -> None:
    home, _ = sample_home
    reader = VersionReader.live(home.find("acme"))
    assert reader.page_ranker is not None and reader.page_ranker == shipped()
    seen: list[tuple[str, int]] = []
    reader.page_seen = lambda key, row: seen.append(key)
    hits = reader.search("How many days a week can employees work remotely?", top_k=5)
    assert hits and seen
    assert all(0.0 <= h.score <= 1.0 for h in hits)
    assert [h.score for h in hits] == sorted((h.score for h in hits), reverse=True)
    assert any("remote" in h.text.lower() for h in hits[:3])


def test_a_hybrid_hit_says_which_features_of_its_page_ranked_it(
    sample_home: tuple[Home, CompileReport],
) -> None:
    """Issue 44: the features behind a rank travel with the hit, into the SDK, the trace and
    `ask --verbose`; a reader on the fixed fusion has none to give."""
    home, _ = sample_home
    ask = "How many days a week can employees work remotely?"
    reader = VersionReader.live(home.find("acme"))
    rows: dict[tuple[str, int], list[float]] = {}
    reader.page_seen = lambda key, row: rows.__setitem__(key, row)
    hits = reader.search(ask, top_k=5)
    model = shipped()
    assert model is not None
    for hit in hits:
        row = rows.get((hit.source_path, hit.page))
        if row is None:  # a page below the rescored head keeps its first-stage place
            assert hit.why == {}
            continue
        everything = model.contributions(row)
        assert 0 < len(hit.why) <= 3 and set(hit.why) <= set(FEATURES)
        largest = sorted(everything.values(), key=abs, reverse=True)[: len(hit.why)]
        assert sorted(hit.why.values(), key=abs, reverse=True) == [round(v, 2) for v in largest]
    assert any(hit.why for hit in hits)
    reader.page_ranker = None
    assert all(hit.why == {} for hit in reader.search(ask, top_k=5))


def test_the_training_script_reads_questions_in_the_eval_format(tmp_path: Path) -> None:
    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
    try:
        from train_ranker import load_questions  # type: ignore[import-not-found]
    finally:
        sys.path.pop(0)
    path = tmp_path / "q.jsonl"
    rows = [
        {"question": "q1", "doc_name": "ACME_2022_10K", "evidence": [{"evidence_page_num": 4}]},
        {"question": "q2", "doc_name": "OTHER_2022_10K", "evidence": [{"evidence_page_num": 1}]},
    ]
    path.write_text("\n".join(json.dumps(r) for r in rows), encoding="utf-8")
    found = load_questions(path, {"ACME_2022_10K": "filings/ACME_2022_10K.pdf"})
    assert found == [("q1", "filings/ACME_2022_10K.pdf", "ACME", {("filings/ACME_2022_10K.pdf", 5)})]
