"""Search over one compiled version: dense, keyword (BM25) and hybrid (reciprocal-rank fusion).

This is the read side of the indexes that the compiler writes; the retrieval SDK builds its
primitives on it. Everything is opened read-only, as the sandbox will mount it.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any, Literal

from sleuth.compile.chunking import Chunk
from sleuth.models.embedder import Embedder, get_embedder
from sleuth.store.dense import DenseIndex
from sleuth.store.home import ContextDir
from sleuth.store.keyword import KeywordIndex

RRF_K = 60
Mode = Literal["semantic", "keyword", "hybrid"]


@dataclass(frozen=True)
class SearchHit:
    """A chunk hit with everything a citation needs."""

    id: str
    score: float
    source_path: str
    page: int
    start: int
    end: int
    text: str
    section_path: list[str]


def rrf(rankings: Sequence[Sequence[str]], k: int = RRF_K) -> list[tuple[str, float]]:
    """Reciprocal-rank fusion: each list contributes 1 / (k + rank) per id."""
    scores: dict[str, float] = {}
    for ranking in rankings:
        for rank, item in enumerate(ranking, 1):
            scores[item] = scores.get(item, 0.0) + 1.0 / (k + rank)
    return sorted(scores.items(), key=lambda kv: (-kv[1], kv[0]))


class VersionReader:
    """One version of one context, read-only."""

    def __init__(self, version_dir: Path, embedder: Embedder | None = None) -> None:
        self.root = version_dir
        self.meta: dict[str, Any] = json.loads((version_dir / "version.json").read_text("utf-8"))
        self._embedder = embedder

    @classmethod
    def live(cls, ctx: ContextDir) -> VersionReader:
        version = ctx.live_version()
        if version is None:
            raise LookupError("context has no live version yet: compile it first")
        return cls(ctx.version_dir(version))

    @cached_property
    def embedder(self) -> Embedder:
        return self._embedder or get_embedder(self.meta["embedder"]["id"])

    @cached_property
    def chunks(self) -> dict[str, Chunk]:
        out: dict[str, Chunk] = {}
        for path in sorted((self.root / "knowledge" / "chunks").rglob("*.jsonl")):
            with path.open(encoding="utf-8") as fh:
                for line in fh:
                    chunk = Chunk.from_json(json.loads(line))
                    out[chunk.id] = chunk
        return out

    @cached_property
    def _dense(self) -> DenseIndex | None:
        directory = self.root / "index" / "dense"
        return DenseIndex(directory, "chunks") if (directory / "chunks.npy").exists() else None

    @cached_property
    def _keyword(self) -> KeywordIndex | None:
        path = self.root / "index" / "keyword.sqlite"
        return KeywordIndex(path) if path.exists() else None

    def _allowed(self, sources: Sequence[str] | None) -> list[str] | None:
        if sources is None:
            return None
        wanted = set(sources)
        return [cid for cid, c in self.chunks.items() if c.source_path in wanted]

    def semantic(
        self, query: str, top_k: int = 10, sources: Sequence[str] | None = None
    ) -> list[tuple[str, float]]:
        if self._dense is None:
            return []
        vector = self.embedder.embed([query])[0]
        return [(h.id, h.score) for h in self._dense.search(vector, top_k, self._allowed(sources))]

    def keyword(
        self, query: str, top_k: int = 10, sources: Sequence[str] | None = None
    ) -> list[tuple[str, float]]:
        if self._keyword is None:
            return []
        return [(h.id, h.score) for h in self._keyword.search_chunks(query, top_k, sources)]

    def search(
        self, query: str, top_k: int = 10, mode: Mode = "hybrid", sources: Sequence[str] | None = None
    ) -> list[SearchHit]:
        if mode == "semantic":
            ranked = self.semantic(query, top_k, sources)
        elif mode == "keyword":
            ranked = self.keyword(query, top_k, sources)
        else:
            depth = max(top_k * 5, 50)
            lists = [
                [i for i, _ in self.semantic(query, depth, sources)],
                [i for i, _ in self.keyword(query, depth, sources)],
            ]
            ranked = rrf([r for r in lists if r])[:top_k]
        return [self._hit(cid, score) for cid, score in ranked]

    def _hit(self, cid: str, score: float) -> SearchHit:
        c = self.chunks[cid]
        return SearchHit(cid, score, c.source_path, c.page, c.start, c.end, c.text, c.section_path)
