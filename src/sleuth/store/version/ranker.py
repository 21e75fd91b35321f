"""The learned page ranker: how sure the second stage is that a page answers the question.

The second stage (`store.rescore`) looks at the first stage's best pages. Each page is described by
what Sleuth already computes for it — how high its best chunk ranked and how many of its chunks did
(a page's windows add up instead of competing), how much of the question's weighted vocabulary its
title zone and its text hold, how much of it is figures, whether it holds the years the question
names, whether its title brought it in, how sure the dense and BM25 halves each were, whether its
document is the one the question names — and a linear model over those features scores the page. It
is trained listwise (within each question, the softmax of the pages' scores is the chance each is the
evidence), so what it knows is the order of one question's pages. The model is a kilobyte of JSON
shipped with the package (`page_ranker.json`) and scored in plain Python: no training dependency at
run time.

`benchmarks/train_ranker.py` trains it on questions with evidence pages (FinanceBench's dev set here,
anyone's own `sleuth eval` questions elsewhere), with cross-validation grouped by company, and writes
the report of what the grouped folds measured next to the model. Without a model the second stage
falls back to the fixed reciprocal-rank fusion it had before (`rescore.fuse`), which stays the
baseline the report compares against.
"""

from __future__ import annotations

import functools
import json
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from importlib import resources

#: What describes one page for one question, in the model's order.
FEATURES = (
    "first_stage",  # -log of the best first-stage position of the page's chunks (1-based)
    "pooled",  # sum over the page's chunks in the first stage of K / (K + position): windows add up
    "chunks",  # log(1 + how many of the page's chunks the first stage brought)
    "title",  # share of the question's weighted terms in the page's title zone
    "coverage",  # share of the question's weighted terms anywhere on the page
    "title_rank",  # -log of the page's rank by `title` among the rescored pages
    "coverage_rank",  # -log of the page's rank by `coverage`
    "figures",  # share of the page's non-space characters that are digits (a table page)
    "figures_asked",  # `figures` when the question asks for a quantity, else 0
    "years",  # share of the years the question names that the page holds (0 when it names none)
    "title_candidate",  # 1 for the searched documents' best title-zone matches (`rescore.title_pages`)
    "dense",  # the best cosine similarity of the page's chunks to the question (dense half)
    "dense_rank",  # -log of the page's best position in the dense half's list
    "keyword",  # the best BM25 score of the page's chunks, over the query's best
    "keyword_rank",  # -log of the page's best position in the BM25 half's list
    "named",  # 1 when the page is in a document the question names (`resolve_documents`)
    "boilerplate",  # the page's chunks' mean boilerplate share (0 when the question asks for such text)
)

_BOILERPLATE = FEATURES.index("boilerplate")
#: How many of a page's feature contributions a hit carries as its reasons (`PageRanker.reasons`).
REASONS = 3
_YEAR = re.compile(r"\b(?:19|20)\d\d\b")

#: A question that asks for a quantity: a figure, a count, a ratio, or a year's value.
_ASKS_QUANTITY = re.compile(
    r"\b(?:how much|how many|amount|total|ratio|margin|percent(?:age)?|rate|growth|change|"
    r"(?:19|20)\d\d)\b|%|\$",
    re.IGNORECASE,
)


#: How far a chunk that is all boilerplate falls: its score is scaled by 1 - this × its share.
BOILERPLATE_PENALTY = 0.7
#: Only a chunk at least this much boilerplate is demoted. Fused scores are flat (1 / (60 + rank)), so
#: even a factor of 0.9 moves a chunk down tens of places; a page's first chunk carrying its running
#: header is content. Measured on FinanceBench: within-filing R@10 0.760 (every share) -> 0.783.
DEMOTE_FROM_SHARE = 0.5


def demotion(share: float) -> float:
    """The factor a chunk's (or page's) score is scaled by for its boilerplate `share`: a rule, not
    learned, because the dev set's evidence is almost never boilerplate, so a model trained on it
    cannot learn how far a certification or a contents page should fall (it weighs the share -0.12)."""
    return 1.0 - BOILERPLATE_PENALTY * share if share >= DEMOTE_FROM_SHARE else 1.0


@dataclass(frozen=True)
class QuestionCues:
    """What a question says that the page features compare with, worked out once per question."""

    years: frozenset[str]
    asks_quantity: bool

    @classmethod
    def of(cls, query: str) -> QuestionCues:
        return cls(frozenset(_YEAR.findall(query)), bool(_ASKS_QUANTITY.search(query)))


def figure_share(text: str) -> float:
    """How much of a page is figures: the share of its non-space characters that are digits (a table
    page is mostly digits). Worked out by C string methods — dropping the digits and the spaces — where
    a regular expression or a loop over the page's words cost a millisecond a query at 100k chunks."""
    dense = len(text) - sum(text.count(space) for space in " \n\t")
    if dense <= 0:
        return 0.0
    return (len(text) - len(text.translate(_NO_DIGITS))) / dense


_NO_DIGITS = str.maketrans("", "", "0123456789")


def year_share(cues: QuestionCues, text: str) -> float:
    if not cues.years:
        return 0.0
    return sum(1 for year in cues.years if year in text) / len(cues.years)


@dataclass(frozen=True)
class Signals:
    """What each half of the first stage said of its candidates (chunk id -> its own score, best
    first), and the documents the question names: the fused order alone hides how sure each was."""

    dense: dict[str, float]
    keyword: dict[str, float]
    named: frozenset[str]
    boilerplate: Mapping[str, float]  # chunk id -> its boilerplate share, empty when the question asks

    @classmethod
    def none(cls) -> Signals:
        return cls({}, {}, frozenset(), {})


@dataclass(frozen=True)
class PageRanker:
    """A linear model over `FEATURES`, standardised by the training set's mean and spread."""

    features: tuple[str, ...]
    mean: tuple[float, ...]
    scale: tuple[float, ...]
    weights: tuple[float, ...]
    bias: float

    def __post_init__(self) -> None:
        sizes = {len(self.features), len(self.mean), len(self.scale), len(self.weights)}
        if sizes != {len(FEATURES)} or tuple(self.features) != FEATURES:
            raise ValueError(f"a page ranker must weigh exactly {FEATURES}, got {self.features}")

    def score(self, row: Sequence[float]) -> float:
        """How sure the model is that the page described by `row` is evidence for the question, squashed
        to 0..1 (a logistic of the linear score): comparable between the pages of one question."""
        z = self.bias
        for value, mean, scale, weight in zip(row, self.mean, self.scale, self.weights, strict=True):
            z += weight * (value - mean) / scale
        return 1.0 / (1.0 + math.exp(-max(-60.0, min(60.0, z))))

    def page_score(self, row: Sequence[float]) -> float:
        """What the second stage ranks a page by: `score`, a page mostly boilerplate demoted by the
        factor its chunks were (`demotion`). The training script scores its folds with it too."""
        return self.score(row) * demotion(row[_BOILERPLATE])

    def contributions(self, row: Sequence[float]) -> dict[str, float]:
        """Each feature's share of the page's linear score (weight × standardised value): what lifted
        or sank the page, for `sleuth search --why`."""
        return {
            name: weight * (value - mean) / scale
            for name, value, mean, scale, weight in zip(
                self.features, row, self.mean, self.scale, self.weights, strict=True
            )
        }

    def reasons(self, row: Sequence[float], n: int = REASONS) -> dict[str, float]:
        """The `n` features that moved the page most (by size, either way), rounded: why a hit ranks
        where it does, carried on each hybrid hit (`SearchHit.why`) into the trace and `--verbose`."""
        parts = sorted(self.contributions(row).items(), key=lambda item: -abs(item[1]))[:n]
        return {name: round(value, 2) for name, value in parts}

    def to_json(self) -> dict[str, object]:
        return {
            "features": list(self.features),
            "mean": list(self.mean),
            "scale": list(self.scale),
            "weights": list(self.weights),
            "bias": self.bias,
        }

    @classmethod
    def from_json(cls, data: dict[str, object]) -> PageRanker:
        def floats(key: str) -> tuple[float, ...]:
            value = data[key]
            assert isinstance(value, list)
            return tuple(float(x) for x in value)

        features = data["features"]
        assert isinstance(features, list)
        bias = data["bias"]
        assert isinstance(bias, int | float)
        return cls(tuple(str(f) for f in features), floats("mean"), floats("scale"), floats("weights"), bias)


@functools.cache
def shipped() -> PageRanker | None:
    """The model that ships with the package, or None when none does (the fixed fusion then ranks)."""
    path = resources.files("sleuth.store.version").joinpath("page_ranker.json")
    if not path.is_file():
        return None
    return PageRanker.from_json(json.loads(path.read_text(encoding="utf-8")))
