"""Running a system over a question set: `run_eval` takes any `AnswerFn` (question → `AnswerRecord`),
scores each answer, and checks its citations against the stored page text itself (a system's own claim
that its citations verify is not trusted). `sleuth_answer_fn` is the Sleuth loop as an `AnswerFn`."""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

from sleuth.agent.evaluation.matching import judge, score_answer
from sleuth.agent.evaluation.questions import EvalQuestion, EvidencePage, doc_key
from sleuth.format.text import comparable
from sleuth.models.base import Model
from sleuth.settings import TURN_CAP_SECONDS

if TYPE_CHECKING:
    from sleuth.agent.records import Query
    from sleuth.agent.turn import Runtime
    from sleuth.store.version.search import VersionReader

__all__ = [
    "AnswerFn",
    "AnswerRecord",
    "PageLookup",
    "PageText",
    "QuestionResult",
    "citation_verifies",
    "record_from_query",
    "run_eval",
    "sleuth_answer_fn",
]

CHARS_PER_TOKEN = 4


@dataclass
class AnswerRecord:
    """What a system returns for one question; `run_eval` scores it."""

    answer: str
    citations: list[dict[str, Any]] = field(default_factory=list)
    steps: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    evidence_chars: int = 0  # the characters tool results showed the model
    status: str = "completed"
    error: str | None = None
    query_id: str | None = None
    unsupported: int = 0  # sentences and fields whose facts their citations lack (agent.claims)


AnswerFn = Callable[[EvalQuestion], AnswerRecord]
PageText = Callable[[str | None, str, int], str | None]


@dataclass
class QuestionResult:
    """One scored answer: the unit of `records.jsonl` and the per-question report."""

    system: str
    id: str
    question: str
    gold: str
    answer: str
    status: str
    error: str | None
    correct: bool
    match: bool
    numeric: bool | None
    text: bool | None
    judge: bool | None
    steps: int
    input_tokens: int
    output_tokens: int
    evidence_tokens: int
    latency_s: float
    citations: int
    citations_valid: int
    citation_validity: float | None
    evidence_page_hit: bool | None
    cited_pages: list[list[Any]] = field(default_factory=list)
    query_id: str | None = None
    unsupported: int = 0

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


class PageLookup:
    """Stored page text by (context, source, page) over pinned version readers; a citation without a
    context is looked up in every reader (a baseline over one context may not say which)."""

    def __init__(self, readers: Mapping[str, VersionReader]) -> None:
        self.readers = dict(readers)

    def __call__(self, context: str | None, source: str, page: int) -> str | None:
        reader = self.readers.get(context) if context else None
        if reader is not None:
            return reader.page_text(source, page)
        for candidate in self.readers.values():
            text = candidate.page_text(source, page)
            if text is not None:
                return text
        return None


def citation_verifies(citation: Mapping[str, Any], page_text: PageText) -> bool:
    """Recheck a citation ourselves: a non-empty grounding that is a verbatim slice of its page at
    `start:end` (whitespace-collapsed), or, without offsets, a verbatim part of the page."""
    grounding = comparable(str(citation.get("grounding") or ""))
    pages = citation.get("pages") or []
    source = citation.get("source")
    if not grounding or not pages or not isinstance(pages[0], int) or not isinstance(source, str):
        return False
    context = citation.get("context")
    page = page_text(context if isinstance(context, str) else None, source, pages[0])
    if page is None or grounding not in comparable(page):
        return False
    start, end = citation.get("start"), citation.get("end")
    if isinstance(start, int) and isinstance(end, int):
        return 0 <= start <= end <= len(page) and comparable(page[start:end]) == grounding
    return True


def _cited_pages(citations: Sequence[Mapping[str, Any]]) -> list[tuple[str, int]]:
    out: list[tuple[str, int]] = []
    for c in citations:
        for page in c.get("pages") or []:
            if isinstance(page, int) and (str(c.get("source")), page) not in out:
                out.append((str(c.get("source")), page))
    return out


def _page_hit(cited: Sequence[tuple[str, int]], gold: Sequence[EvidencePage]) -> bool | None:
    if not gold:
        return None
    wanted = {(doc_key(e.source), e.page) for e in gold}
    return any((doc_key(source), page) in wanted for source, page in cited)


def run_eval(
    questions: Sequence[EvalQuestion],
    answer_fn: AnswerFn,
    *,
    system: str,
    page_text: PageText | None = None,
    judge_model: Model | None = None,
    on_result: Callable[[QuestionResult], None] | None = None,
) -> list[QuestionResult]:
    """Answer and score every question with one system. A system that raises fails that question
    (scored wrong, its error kept); the run goes on."""
    results: list[QuestionResult] = []
    for q in questions:
        began = time.monotonic()
        try:
            record = answer_fn(q)
        except Exception as exc:  # one broken question must not lose a long run
            record = AnswerRecord(answer="", status="failed", error=f"{type(exc).__name__}: {exc}")
        latency = time.monotonic() - began
        cited_paths = [str(c.get("source")) for c in record.citations if c.get("source")]
        match = score_answer(record.answer, q.answer, cited_paths)
        verdict = judge(judge_model, q.question, q.answer, record.answer) if judge_model else None
        valid = sum(1 for c in record.citations if page_text and citation_verifies(c, page_text))
        cited = _cited_pages(record.citations)
        result = QuestionResult(
            system=system,
            id=q.id,
            question=q.question,
            gold=q.answer,
            answer=record.answer,
            status=record.status,
            error=record.error,
            correct=verdict if verdict is not None else match.correct,
            match=match.correct,
            numeric=match.numeric,
            text=match.text,
            judge=verdict,
            steps=record.steps,
            input_tokens=record.input_tokens,
            output_tokens=record.output_tokens,
            evidence_tokens=math.ceil(record.evidence_chars / CHARS_PER_TOKEN),
            latency_s=round(latency, 3),
            citations=len(record.citations),
            citations_valid=valid,
            citation_validity=(valid / len(record.citations)) if record.citations and page_text else None,
            evidence_page_hit=_page_hit(cited, q.evidence),
            cited_pages=[[s, p] for s, p in cited],
            query_id=record.query_id,
            unsupported=record.unsupported,
        )
        results.append(result)
        if on_result is not None:
            on_result(result)
    return results


# ==================================================================================== Sleuth


def record_from_query(query: Query) -> AnswerRecord:
    """A finished turn as an `AnswerRecord`: evidence = every observation the loop showed the model."""
    steps = [s for s in query.steps if s.status != "running"]
    return AnswerRecord(
        answer=query.answer,
        citations=[c.model_dump() for c in query.citations],
        steps=len(steps),
        input_tokens=query.usage.input_tokens,
        output_tokens=query.usage.output_tokens,
        evidence_chars=sum(len(s.output or "") for s in steps),
        status=query.status,
        error=query.error,
        query_id=query.id,
        unsupported=len(query.unsupported),
    )


def sleuth_answer_fn(
    runtime: Runtime,
    scope: Sequence[str],
    model: str | None = None,
    max_steps: int | None = None,
    timeout_seconds: int = TURN_CAP_SECONDS,
) -> AnswerFn:
    """Each question as one fresh Sleuth turn (its own session), exactly as `sleuth ask` runs it."""
    from sleuth.agent.turn import TurnRequest

    def answer(q: EvalQuestion) -> AnswerRecord:
        request = TurnRequest(
            ask=q.question,
            scope=list(scope),
            model=model,
            max_steps=max_steps,
            timeout_seconds=timeout_seconds,
        )
        return record_from_query(runtime.ask(request))

    return answer
