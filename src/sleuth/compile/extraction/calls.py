"""What every model-built kind of `ModelExtractor` shares: its state for one compile run, and the calls'
plumbing. A per-source call reads its text windows (`_inputs`); each call is one checkpoint for a
cancel and one progress tick (`_ask`); calls run in parallel, at most `SLEUTH_CURATE_CONCURRENCY` at
once, a failed one recorded for its source (`_each`); quotes are located on their pages (`_locate`) and
each type keeps its counts (`_stats`).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

from sleuth.compile.artifacts import Artifact
from sleuth.compile.extraction.cache import ExtractionCache
from sleuth.compile.extraction.client import BudgetExhausted, ExtractionClient
from sleuth.compile.extraction.inputs import (
    Step,
    call_key_parts,
    fingerprint_of,
    per_source_system,
    windows,
)
from sleuth.compile.extraction.outcomes import SourceError, TypeStats
from sleuth.compile.extraction.quotes import QuoteLocator
from sleuth.compile.extraction.schemas import EdgeClaim
from sleuth.compile.manifest import ArtifactType, Manifest
from sleuth.compile.pages import Page
from sleuth.compile.report import NullProgress, Progress
from sleuth.format.spans import Provenance
from sleuth.models.base import Model, ModelError
from sleuth.settings import Settings

T = TypeVar("T")


def transient(exc: ModelError) -> bool:
    """A failure a later run may not meet again: a timeout, a 429 or a 5xx (a 4xx would repeat)."""
    return exc.status is None or exc.status == 429 or exc.status >= 500


class ExtractionCalls:
    """The state of one compile run's extraction and how its model calls are made: `settings` are the
    process's, for how many calls run at once and how long each may take."""

    # ------------------------------------------------------------------------------ state
    def __init__(
        self,
        model: Model,
        manifest: Manifest,
        cache: ExtractionCache | None,
        *,
        settings: Settings,
        token_budget: int | None = None,
        fingerprint: str | None = None,
    ) -> None:
        self.name = model.config.id
        #: What the replies depend on besides the prompts: the id and what it resolves to. It keys the
        #: cache and the ledger's extractor leg, so pointing an id at another model redoes the work.
        self.fingerprint = fingerprint or fingerprint_of(model.config)
        self.manifest = manifest
        self.config = manifest.curate.artifacts
        self.client = ExtractionClient(
            model,
            cache,
            concurrency=settings.curate_concurrency,
            timeout_s=settings.curate_timeout_s,
            token_budget=token_budget,
        )
        self.stats: dict[str, TypeStats] = {}
        self.errors: list[SourceError] = []
        self._claims: list[tuple[str, EdgeClaim]] = []  # (source, claim) from every corpus map
        self._truncated: set[str] = set()  # sources some type read only the head of
        self._groups: list[dict[str, Any]] = []  # the corpus groups kept, for the ledger (§5.4)
        self._pointers: dict[str, list[dict[str, Any]]] = {}  # source → the subjects it mentions (§6)
        self._progress: Progress = NullProgress()
        self._report_lock = threading.Lock()
        self._workers = settings.curate_concurrency

    # ------------------------------------------------------------------------------ plumbing
    def _inputs(
        self, step: Step, art_type: ArtifactType, source: str, pages: list[Page]
    ) -> tuple[list[str], str, tuple[str, ...]]:
        """What a per-source call reads (its text windows, counting a source read only in part), its
        system prompt and its cache key parts."""
        texts, truncated = windows(pages, self.config.max_doc_chars, self.config.extraction_window_chars)
        if truncated:
            self._stats(art_type.name).count("truncated_sources", 1)
            with self._report_lock:
                self._truncated.add(source)
        system = per_source_system(step, art_type, self.manifest)
        return texts, system, call_key_parts(self.fingerprint, art_type, self.manifest, source, pages)

    def _ask(
        self, reply_type: type[Any], system: str, user: str, type_name: str, key: str, max_tokens: int = 0
    ) -> Any:
        """One call; the output cap is the manifest's `max_tokens` plus room for the JSON around it."""
        cap = max_tokens or self.config.max_tokens + 512
        self._progress.advance("extract", 0)  # a checkpoint: a cancel stops here, before a paid call
        reply = self.client.ask(reply_type, system, user, type_name=type_name, key=key, max_tokens=cap)
        with self._report_lock:  # one writer at a time, so a slower thread never writes an older total
            self._progress.advance("extract")
            self._progress.tokens(*self.client.totals())
        return reply

    def _each(
        self,
        art_type: ArtifactType,
        sources: Sequence[str],
        one: Callable[[str], T] | None,
        *,
        items: Sequence[Any] | None = None,
        work: Callable[[Any], T] | None = None,
    ) -> list[T | None]:
        """`one(source)` for every source (or `work(item)`), in parallel; a failed call is recorded for
        its source and gives None; once the budget is spent the rest give None."""
        targets: Sequence[Any] = items if items is not None else sources
        call: Callable[[Any], T] = work if work is not None else one  # type: ignore[assignment]

        def guarded(index: int) -> T | None:
            # No short cut once the budget is spent: replies already in the cache still cost nothing,
            # and only a call that would be paid raises `BudgetExhausted`.
            try:
                return call(targets[index])
            except BudgetExhausted:
                self._stats(art_type.name).screen("not extracted: the token budget was spent")
                return None
            except ModelError as exc:
                self.client.count_error(art_type.name)
                with self._report_lock:
                    self.errors.append(
                        SourceError(str(sources[index]), art_type.name, str(exc)[:500], transient(exc))
                    )
                return None

        with ThreadPoolExecutor(max_workers=max(1, min(self._workers, len(targets) or 1))) as pool:
            return list(pool.map(guarded, range(len(targets))))

    def _locate(self, stats: TypeStats, locator: QuoteLocator, quotes: Iterable[str]) -> list[Provenance]:
        found, missed = locator.locate_all(list(quotes))
        stats.count("quotes_verified", len(found))
        stats.count("quotes_rejected", missed)
        return found

    def _stats(self, name: str) -> TypeStats:
        return self.stats.setdefault(name, TypeStats())

    @staticmethod
    def _drop_duplicates(artifacts: list[Artifact], stats: TypeStats) -> list[Artifact]:
        """The quality screen's exact-duplicate rule: a body already seen in this type is dropped."""
        seen: set[str] = set()
        out: list[Artifact] = []
        for art in artifacts:
            digest = art.content_sha()
            if digest in seen:
                stats.screen("duplicate body")
                stats.count("built", -1)
                continue
            seen.add(digest)
            out.append(art)
        return out
