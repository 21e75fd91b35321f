"""How ranked lists become one: reciprocal-rank fusion, and the rules that keep a fused list useful
(exact matches stay in, near-repeats go out).

Search (`store.search`), the second stage (`store.rescore`), the SDK's own fusions and the offline
planner all fuse with the same `RRF_K`, so the scores they report stay on one scale.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Sequence
from typing import TypeVar

#: Reciprocal-rank fusion's k: an item ranked r-th in a list adds weight / (RRF_K + r).
RRF_K = 60
#: A chunk that shares at least this share of the shorter of the two with one ranked above it, on the
#: same page, repeats it: it is left out of the results (issue 25, item 6).
OVERLAP_SHARE = 0.5

T = TypeVar("T")


def rrf(
    rankings: Sequence[Sequence[str]], k: int = RRF_K, weights: Sequence[float] | None = None
) -> list[tuple[str, float]]:
    """Reciprocal-rank fusion: each list contributes weight / (k + rank) per id."""
    scores: dict[str, float] = {}
    for index, ranking in enumerate(rankings):
        weight = 1.0 if weights is None else weights[index]
        for rank, item in enumerate(ranking, 1):
            scores[item] = scores.get(item, 0.0) + weight / (k + rank)
    return sorted(scores.items(), key=lambda kv: (-kv[1], kv[0]))


def merge(*lists: Sequence[tuple[str, float]]) -> list[tuple[str, float]]:
    """Scored candidate lists of one kind as one, best score per id, best first."""
    best: dict[str, float] = {}
    for ranked in lists:
        for cid, score in ranked:
            if cid not in best or score > best[cid]:
                best[cid] = score
    return sorted(best.items(), key=lambda kv: (-kv[1], kv[0]))


def keep_exact(ranked: list[tuple[str, float]], exact: Sequence[str], top_k: int) -> list[tuple[str, float]]:
    """`ranked` with every chunk of `exact` inside its first `top_k`: one that fell below takes the
    place of the last chunk above it that is not in `exact`, and each place keeps its score (scores
    never rise down the list)."""
    head = [cid for cid, _ in ranked[:top_k]]
    missing = [cid for cid in dict.fromkeys(exact) if cid not in head]
    sure = set(exact)
    movable = [cid for cid in head if cid not in sure]
    dropped = set(movable[len(movable) - min(len(missing), len(movable)) :]) if missing else set()
    missing = missing[: len(dropped)]
    if not missing:
        return ranked
    order = [cid for cid in head if cid not in dropped] + missing
    order += [cid for cid, _ in ranked if cid not in set(order)]
    scores = [score for _, score in ranked]
    out: list[tuple[str, float]] = []
    for position, cid in enumerate(order):
        score = scores[position] if position < len(scores) else 0.0
        out.append((cid, min(score, out[-1][1]) if out else score))
    return out


def distinct(
    ranked: Sequence[T],
    span_of: Callable[[T], tuple[Hashable, int, int]],
    limit: int | None = None,
    keep: Callable[[T], bool] | None = None,
) -> list[T]:
    """`ranked` (best first) without the items that mostly repeat one ranked above them: the same
    page (`span_of`'s key) and a span overlapping it by `OVERLAP_SHARE` of the shorter one. Chunks
    that overlap (a page's chunks cut with overlap, several lists fused) would otherwise print the
    same text twice. Items `keep` says to keep (exact matches) never are; stops at `limit` items."""
    kept: dict[Hashable, list[tuple[int, int]]] = {}
    out: list[T] = []
    for item in ranked:
        key, start, end = span_of(item)
        spans = kept.setdefault(key, [])
        repeats = any(
            min(end, e) - max(start, s) >= OVERLAP_SHARE * max(1, min(end - start, e - s)) for s, e in spans
        )
        if repeats and (keep is None or not keep(item)):
            continue
        spans.append((start, end))
        out.append(item)
        if limit is not None and len(out) >= limit:
            break
    return out
