"""The retrieval primitives over one pinned version per scoped context (spec/runtime.md §5).

`Knowledge` is what the REPL binds: each method marked `@primitive` is one primitive, declared there
once (its signature, bounds and docstring; see `sdk/primitives.py`). Searches are coroutines
(blocking index work runs in a thread, so `asyncio.gather` overlaps them); reads are plain calls
whose results may also be awaited. Every span returned gets a per-turn evidence label (`E1`, `E2`,
…) that stays the same when the span comes back again.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import NoReturn

from sleuth.sdk.base import QueryEmbedder
from sleuth.sdk.comparisons import Comparisons
from sleuth.sdk.errors import LimitError
from sleuth.sdk.orientation import Orienting
from sleuth.sdk.passages import Passages
from sleuth.sdk.primitives import (
    primitives,
)
from sleuth.sdk.reads import Reads
from sleuth.sdk.scoped import Evidence, ScopedContext
from sleuth.sdk.searches import Searches
from sleuth.sdk.tables import Tables
from sleuth.sdk.types import (
    Hit,
    Span,
)

__all__ = ["PRIMITIVES", "Evidence", "FinalAnswer", "Knowledge", "QueryEmbedder", "ScopedContext"]


class FinalAnswer(BaseException):
    """Raised by `final()`; a BaseException so `except Exception` in model code cannot swallow it."""

    def __init__(self, answer: str | None, evidence: list[str]) -> None:
        super().__init__(answer)
        self.answer = answer
        self.evidence = evidence


class Knowledge(Reads, Searches, Passages, Comparisons, Tables, Orienting):
    """The SDK bound into one turn's REPL, over 1-10 scoped contexts: the reads, the searches, the
    reads around evidence, the comparison of a section across documents, the database primitives
    and the orientation (each module declares its own), and `final`, which ends the loop."""

    def final(
        self, answer: str | None = None, evidence: Iterable[Hit | Span | str] | None = None
    ) -> NoReturn:
        """End the loop. `answer` is a draft for synthesis; `evidence` lists hits, spans or labels
        ("E7") to cite first. Raises a BaseException so `except Exception` cannot swallow it."""
        labels: list[str] = []
        for item in evidence or []:
            label = item if isinstance(item, str) else item.ref
            if label is None or self.evidence.get(label) is None:
                known = [s.ref for s in self.evidence.all()]
                hint = (
                    f"labels so far: {', '.join(known[:30])}{' …' if len(known) > 30 else ''}"
                    if known
                    else "no spans have been returned yet (query_db counts carry none)"
                )
                raise LimitError(
                    f"{item!r} is not an evidence label of this turn; {hint}. "
                    "Call final() with known labels, or with no evidence to answer from the printed results."
                )
            labels.append(label)
        raise FinalAnswer(answer, labels)


PRIMITIVES = tuple(item.name for item in primitives())
"""The SDK's public calls, in the order of spec/runtime.md §5.2 (declared by `@primitive`)."""
