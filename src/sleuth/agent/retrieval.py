"""Retrieval-only turns (spec/api.md §8.7): one deterministic hybrid retrieval over the turn's scope, no
model, no sandbox, no synthesis.

The retrieval runs in the host process with the same SDK the sandbox binds (`Knowledge`), so its
hits are exactly what `search_source` and `search_knowledge` would return to a model. The SDK caps
`top_k` at 100, so each kind contributes at most 100 hits; with both kinds a turn can still fill
`max_retrieved` = 200. The two lists are fused by reciprocal-rank fusion (the SDK's `rrf`, as it fuses
contexts), then cut to `max_hits`.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from sleuth.agent.loop import strategy_of
from sleuth.agent.records import QueryStep, StepCost, TraceCall
from sleuth.sandbox.host import HostFunction
from sleuth.sdk.errors import SleuthError
from sleuth.sdk.knowledge import Knowledge, QueryEmbedder, ScopedContext
from sleuth.sdk.types import Hit, traced_hits
from sleuth.store.version.fusion import rrf

KINDS = ("chunk", "artifact")
SDK_TOP_K = 100  # the SDK's own cap on `top_k`
MAX_QUERY_CHARS = 2_000  # the SDK's cap on a query; an ask may be longer (20,000)


@dataclass(frozen=True)
class RetrievalOptions:
    """How a retrieval-only turn retrieves: which kinds, how many hits, how much text per hit."""

    pointers_only: bool = False
    kinds: tuple[str, ...] = KINDS
    max_hits: int = 20
    max_chars: int = 2_000


def retrieval_options(
    *,
    compose: bool = True,
    retrieval_only: bool = False,
    pointers_only: bool = False,
    chunks_only: bool = False,
    artifacts_only: bool = False,
    max_retrieved: int = 20,
    max_retrieved_chars: int = 2_000,
) -> RetrievalOptions | None:
    """The retrieval options a request's flags (spec/api.md §8.1) ask for, or None for a composed answer.

    `compose: false` is `retrieval_only: true`. `pointers_only`, `chunks_only` and `artifacts_only`
    each imply retrieval-only too: they only mean something for hits, and a composed answer that
    silently ignored them would surprise more than a turn that returns hits. Both `chunks_only` and
    `artifacts_only` exclude each other; the caller rejects that (`conflicting_options`) first.
    """
    if compose and not (retrieval_only or pointers_only or chunks_only or artifacts_only):
        return None
    kinds = ("chunk",) if chunks_only else ("artifact",) if artifacts_only else KINDS
    return RetrievalOptions(pointers_only, kinds, max_retrieved, max_retrieved_chars)


@dataclass
class Retrieved:
    """The outcome: the hits kept (the turn's `output_json["hits"]`) and how many came back before
    the cut (`rollup.total_hits`)."""

    hits: list[dict[str, Any]]
    total_hits: int
    chunks: int = 0
    artifacts: int = 0


@dataclass
class Retrieval:
    """One retrieval over `contexts` (slug → pinned version directory). `calls` records every SDK call
    as it happens, so a retrieval that fails midway still shows what it did."""

    contexts: Mapping[str, Path]
    ask: str
    options: RetrievalOptions
    embed: HostFunction | None = None  # the host's `embed`, so embedding is recorded like a turn's
    calls: list[TraceCall] = field(default_factory=list)
    _vectors: dict[tuple[str, str], npt.NDArray[np.float32]] = field(
        default_factory=dict, init=False, repr=False
    )

    @property
    def query(self) -> str:
        return self.ask[:MAX_QUERY_CHARS]

    @property
    def top_k(self) -> int:
        return min(SDK_TOP_K, self.options.max_hits)

    @property
    def commentary(self) -> str:
        what = " and ".join(f"{kind}s" for kind in self.options.kinds)
        n = len(self.contexts)
        where = f"{n} context{'s' if n != 1 else ''} ({', '.join(self.contexts)})"
        return f"retrieval only: hybrid search of {what} over {where}"[:200]

    @property
    def code(self) -> str:
        """The retrieval as the SDK calls it makes, for the step's `code` (known before it runs)."""
        o = self.options
        lines = [f"query = {self.query!r}"]
        if "chunk" in o.kinds:
            lines.append(f"chunks = await search_source(query, top_k={self.top_k})")
        if "artifact" in o.kinds:
            lines.append(f"artifacts = await search_knowledge(query, top_k={self.top_k})")
        if len(o.kinds) > 1:
            lines.append(f"# reciprocal-rank fusion of chunks and artifacts; the first {o.max_hits} kept")
        else:
            lines.append(f"# the first {o.max_hits} kept")
        if "artifact" in o.kinds and not o.pointers_only:
            lines += [
                "for hit in (h for h in kept if h.kind == 'artifact'):",
                f"    text = read_artifact(hit.name, context=hit.context).body[:{o.max_chars}]",
            ]
        return "\n".join(lines)

    def step(self, step: QueryStep, began: float, **update: Any) -> QueryStep:
        """The retrieval's one step as it ended: its calls, what they imply, its time, and `update`."""
        return step.model_copy(
            update={
                "fns": list(dict.fromkeys(c.fn for c in self.calls)),
                "strategy": strategy_of(self.calls, list(self.contexts)),
                "tool_calls": list(self.calls),
                "cost": StepCost(execute_ms=round((time.monotonic() - began) * 1000)),
                "output_truncated": False,
                **update,
            }
        )

    def run(self) -> Retrieved:
        """Search, fuse, cut, and read the text of what was kept. Raises what the SDK raises."""
        knowledge = Knowledge(
            [ScopedContext(slug, Path(d)) for slug, d in self.contexts.items()],
            embed=self._embedder(self.embed) if self.embed is not None else None,
        )
        try:
            lists = asyncio.run(self._search(knowledge))
            total = sum(len(hits) for hits in lists)
            kept = _fuse(lists)[: self.options.max_hits]
            hits = [self._hit(knowledge, hit, score) for hit, score in kept]
        finally:
            knowledge.close()
        return Retrieved(
            hits,
            total,
            chunks=sum(1 for h in hits if h["kind"] == "chunk"),
            artifacts=sum(1 for h in hits if h["kind"] == "artifact"),
        )

    async def _search(self, knowledge: Knowledge) -> list[list[Hit]]:
        """One hit list per kind, chunks first. Sequential, so the calls (and their trace) always
        come in the same order."""
        lists = []
        if "chunk" in self.options.kinds:
            lists.append(await self._traced_search("search_source", knowledge.search_source))
        if "artifact" in self.options.kinds:
            lists.append(await self._traced_search("search_knowledge", knowledge.search_knowledge))
        return lists

    async def _traced_search(self, fn: str, search: Callable[..., Awaitable[list[Hit]]]) -> list[Hit]:
        began = time.perf_counter()
        args = f"{self.query[:200]!r}, top_k={self.top_k}"
        try:
            hits: list[Hit] = list(await search(self.query, top_k=self.top_k))
        except Exception as exc:
            self._record(fn, "search", args, began, error=exc)
            raise
        result: dict[str, Any] = {"hits": len(hits)} | traced_hits(hits)
        self._record(fn, "search", args, began, result=result, score_space="hybrid_rrf")
        return hits

    def _hit(self, knowledge: Knowledge, hit: Hit, score: float) -> dict[str, Any]:
        """A fused SDK hit as an spec/api.md §8.7 hit."""
        out: dict[str, Any] = {"kind": hit.kind, "context": hit.context}
        if hit.kind == "artifact":
            out.update(source=hit.sources[0] if hit.sources else None, pages=[], section_path=[], score=score)
            text = None if self.options.pointers_only else self._artifact_text(knowledge, hit)
            name, type_ = hit.name, hit.type
        else:
            out.update(
                source=hit.source_path,
                pages=[hit.page] if hit.page is not None else [],
                section_path=list(hit.section_path),
                score=score,
            )
            text, name, type_ = hit.chunk_text, None, None
        if not self.options.pointers_only:
            out["text"] = (text or "")[: self.options.max_chars]
        out.update(name=name, type=type_)
        return out

    def _artifact_text(self, knowledge: Knowledge, hit: Hit) -> str:
        """The artifact's body; its snippet when the name no longer reads back (ambiguous names)."""
        began = time.perf_counter()
        args = f"{hit.name[:200]!r}, context={hit.context!r}"
        try:
            body = knowledge.read_artifact(hit.name, context=hit.context).body
        except SleuthError as exc:
            self._record("read_artifact", "read", args, began, error=exc)
            return hit.snippet or ""
        self._record("read_artifact", "read", args, began, result={"chars": len(body)})
        return body

    def _record(
        self,
        fn: str,
        category: str,
        args: str,
        began: float,
        *,
        result: dict[str, Any] | None = None,
        score_space: str | None = None,
        error: BaseException | None = None,
    ) -> None:
        self.calls.append(
            TraceCall(
                fn=fn,
                category=category,
                args=args,
                result=result or {},
                duration_ms=round((time.perf_counter() - began) * 1000, 2),
                ok=error is None,
                score_space=score_space,
                error=None if error is None else f"{type(error).__name__}: {str(error)[:300]}",
            )
        )

    def _embedder(self, embed: HostFunction) -> QueryEmbedder:
        """The SDK's query embedder over the host's `embed`, once per (model, query): both searches
        embed the same query in every context."""

        async def vector(model: str, text: str) -> npt.NDArray[np.float32]:
            key = (model, text)
            if key not in self._vectors:
                result = await asyncio.to_thread(embed, {"texts": [text], "model": model})
                self._vectors[key] = np.asarray(result[0], dtype=np.float32)
            return self._vectors[key]

        return vector


def _fuse(lists: list[list[Hit]]) -> list[tuple[Hit, float]]:
    """Reciprocal-rank fusion of the per-kind lists (each already fused across contexts), best
    first, each hit with its own score (its search's scale, as the SDK reports it). Keys start with
    the list's position, so a tie goes to chunks (what the documents say)."""
    if len(lists) == 1:
        return [(hit, hit.score) for hit in lists[0]]
    by_key = {f"{i}\x1f{h.context}\x1f{h.id}": h for i, hits in enumerate(lists) for h in hits}
    rankings = [[f"{i}\x1f{h.context}\x1f{h.id}" for h in hits] for i, hits in enumerate(lists)]
    return [(by_key[key], by_key[key].score) for key, _score in rrf(rankings)]
