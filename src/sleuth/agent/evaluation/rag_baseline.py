"""The classic agentic-RAG baseline of `sleuth eval --baseline rag`.

It is what "search as code" is measured against: the same model, the same compiled index and the same
citation builder, but the model only gets one tool, `search(query)`, which returns the top-k raw chunks
in full. Chunks are numbered [1], [2], … across all calls; the answer cites those numbers and Sleuth's
own `build_citations` turns them into verified citations, so citation validity means the same thing for
both systems. When a context has artifacts a model made (summaries, topics, entities, events), a search
shows the verbatim quotes of the two that best match first; without them it is chunks only, as before.
Text-protocol models (no native tools) search by writing a line `SEARCH: <query>`.

With no model (the offline planner's setting) it runs one hybrid search with the question and quotes
the best sentences with the extractive synthesizer, as Sleuth's offline path does.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from sleuth.agent.citations import build_citations
from sleuth.agent.evaluation.questions import EvalQuestion
from sleuth.agent.evaluation.runner import AnswerRecord, PageLookup
from sleuth.agent.extractive import extractive_answer
from sleuth.agent.spans import EvidenceSpan
from sleuth.format.front_matter import read_front_matter
from sleuth.format.spans import Provenance
from sleuth.models.base import CompletionParams, Message, Model, ModelError, Reply, TokenUsage, ToolSpec
from sleuth.store.version.search import VersionReader

__all__ = ["SEARCH_TOOL", "RagBaseline", "format_chunks", "system_prompt"]

SEARCH_TOOL = ToolSpec(
    name="search",
    description=(
        "Hybrid (semantic + keyword) search over the documents. Returns the most relevant passages in "
        "full, each numbered [n] with its file and page; numbers continue across searches."
    ),
    parameters={
        "type": "object",
        "properties": {"query": {"type": "string", "description": "What to look for."}},
        "required": ["query"],
        "additionalProperties": False,
    },
)
_SEARCH_LINE = re.compile(r"^[ \t>*`]*SEARCH:[ \t]*(.+?)[ \t`*]*$", re.IGNORECASE | re.MULTILINE)
_ANSWER_PREFIX = re.compile(r"^\s*(?:\*\*)?(?:final\s+)?answer(?:\*\*)?\s*:\s*", re.IGNORECASE)
LAST_SEARCH = "(That was your last search: answer now from the passages above, citing them as [n].)"


def system_prompt(slugs: Sequence[str], top_k: int, max_searches: int, native: bool) -> str:
    """The baseline's whole instruction: search, then answer citing passage numbers."""
    how = (
        "Use the `search` tool"
        if native
        else "To search, reply with exactly one line `SEARCH: <query>` and nothing else; the passages "
        "come back in the next message. Use it"
    )
    return (
        f"You answer questions about a document collection ({', '.join(slugs)}). You cannot see the "
        f"documents. {how} to find passages: each search returns the {top_k} most relevant passages, "
        "numbered [1], [2], … (numbers continue across searches). You may search up to "
        f"{max_searches} times.\n"
        "Then answer the question concisely from the passages only. Cite every claim with the numbers "
        "of the passages that support it, in brackets, e.g. [2] or [1][3]. For a number, give the figure "
        "with its unit. If the passages do not contain the answer, say so."
    )


def format_chunks(chunks: Sequence[tuple[int, EvidenceSpan, bool]]) -> str:
    """Passages as the model sees them: `[n] source, page p (section)` then the raw chunk text; a chunk
    already shown under its number is referred to, not repeated."""
    if not chunks:
        return "No passages found."
    parts: list[str] = []
    for number, span, repeated in chunks:
        where = f"{span.source_path}, page {span.page}"
        if span.artifact_name:
            where += f", quoted by the artifact {span.artifact_name!r}"
        if span.section_path:
            where += f" ({' > '.join(span.section_path)})"
        parts.append(f"[{number}] {where} (shown above)" if repeated else f"[{number}] {where}\n{span.text}")
    return "\n\n".join(parts)


#: Model-made artifacts a search shows first, and the quotes (provenance spans) shown of each.
ARTIFACT_HITS = 2
QUOTES_PER_ARTIFACT = 2
MODEL_KINDS = frozenset({"summary", "topic", "entity", "event"})


def _artifact_quotes(slug: str, reader: VersionReader, query: str) -> list[EvidenceSpan]:
    """The verbatim quotes of the model-made artifacts that best match `query`, as evidence."""
    by_id = {a["id"]: a for a in reader.outline if a.get("kind") in MODEL_KINDS}
    if not by_id:
        return []
    found = [(i, score) for i, score in reader.search_artifacts(query, top_k=10) if i in by_id]
    out: list[EvidenceSpan] = []
    for art_id, score in found[:ARTIFACT_HITS]:
        entry = by_id[art_id]
        front = read_front_matter((reader.root / "knowledge" / str(entry["file"])).read_text("utf-8"))
        for raw in (front.get("provenance") or [])[:QUOTES_PER_ARTIFACT]:
            at = Provenance.from_json(raw)
            page = reader.page_text(at.source_path, at.page) or ""
            if page[at.start : at.end] != at.quote or not at.quote:
                continue
            out.append(
                EvidenceSpan(
                    ref="",
                    context=slug,
                    source_path=at.source_path,
                    page=at.page,
                    start=at.start,
                    end=at.end,
                    text=at.quote,
                    via="artifact",
                    artifact_name=str(entry["name"]),
                    score=score,
                )
            )
    return out


@dataclass
class _Run:
    """One question's state: the numbered passages, usage and what tool results showed the model."""

    question: str = ""
    spans: list[EvidenceSpan] = field(default_factory=list)
    numbers: dict[tuple[str, str, int, int, int], int] = field(default_factory=dict)
    usage: TokenUsage = field(default_factory=TokenUsage)
    searches: int = 0
    evidence_chars: int = 0


class RagBaseline:
    """Agentic RAG over pinned version readers (`slug → reader`). Call it with an `EvalQuestion`."""

    def __init__(
        self,
        model: Model | None,
        readers: Mapping[str, VersionReader],
        top_k: int = 5,
        max_searches: int = 4,
        max_tokens: int = 2048,
    ) -> None:
        if not readers:
            raise ValueError("the RAG baseline needs at least one context")
        self.model = model
        self.readers = dict(readers)
        self.top_k = max(1, top_k)
        self.max_searches = max(1, max_searches)
        self.max_tokens = max_tokens
        self.pages = PageLookup(self.readers)

    def __call__(self, question: EvalQuestion) -> AnswerRecord:
        return self.answer(question.question)

    # ------------------------------------------------------------------------------ retrieval
    def search(self, query: str) -> list[EvidenceSpan]:
        """The quotes of the best model-made artifacts first (a summary or an entity is a better first
        read than three chunks; a context without them is searched exactly as before), then the top-k
        hybrid chunk hits over every context, best fused score first."""
        first: list[EvidenceSpan] = []
        for slug, reader in self.readers.items():
            first.extend(_artifact_quotes(slug, reader, query))
        first.sort(key=lambda s: -(s.score or 0.0))
        return first[: ARTIFACT_HITS * QUOTES_PER_ARTIFACT] + self._chunks(query)

    def _chunks(self, query: str) -> list[EvidenceSpan]:
        hits: list[EvidenceSpan] = []
        for slug, reader in self.readers.items():
            for hit in reader.search(query, top_k=self.top_k, mode="hybrid"):
                hits.append(
                    EvidenceSpan(
                        ref="",
                        context=slug,
                        source_path=hit.source_path,
                        page=hit.page,
                        start=hit.start,
                        end=hit.end,
                        text=hit.text,
                        section_path=list(hit.section_path),
                        score=hit.score,
                    )
                )
        hits.sort(key=lambda s: -(s.score or 0.0))
        return hits[: self.top_k]

    def _search_round(self, run: _Run, query: str) -> str:
        """Run one search, number its chunks (continuing), and return the tool result text."""
        run.searches += 1
        shown: list[tuple[int, EvidenceSpan, bool]] = []
        for span in self.search(query):
            key = (span.context, span.source_path, span.page, span.start, span.end)
            number = run.numbers.get(key)
            if number is None:
                number = len(run.spans) + 1
                span = dataclasses.replace(span, ref=f"E{number}")
                run.numbers[key] = number
                run.spans.append(span)
                shown.append((number, span, False))
            else:
                shown.append((number, run.spans[number - 1], True))
        text = format_chunks(shown)
        run.evidence_chars += len(text)
        return text

    # ------------------------------------------------------------------------------ answering
    def answer(self, question: str) -> AnswerRecord:
        run = _Run(question=question)
        if self.model is None:
            return self._offline(question, run)
        try:
            text = self._loop(self.model, question, run)
        except ModelError as exc:
            return self._record("", run, status="failed", error=f"model error: {exc}")
        return self._record(text, run)

    def _offline(self, question: str, run: _Run) -> AnswerRecord:
        run.searches = 1
        for number, span in enumerate(self.search(question), 1):
            run.spans.append(dataclasses.replace(span, ref=f"E{number}"))
        run.evidence_chars = sum(len(s.text) for s in run.spans)
        text = extractive_answer(question, run.spans, None, list(self.readers))
        return self._record(text, run)

    def _record(
        self, text: str, run: _Run, status: str = "completed", error: str | None = None
    ) -> AnswerRecord:
        cited = build_citations(text, run.spans, self.pages, question=run.question) if text else None
        citations = [c.model_dump() for c in cited.citations] if cited else []
        for c in citations:
            c.pop("_ref", None)
        return AnswerRecord(
            answer=cited.text if cited else text,
            citations=citations,
            steps=run.searches,
            input_tokens=run.usage.input_tokens,
            output_tokens=run.usage.output_tokens,
            evidence_chars=run.evidence_chars,
            status=status,
            error=error,
            unsupported=len(cited.unsupported) if cited else 0,
        )

    def _complete(self, model: Model, messages: list[Message], tools: list[ToolSpec], run: _Run) -> Reply:
        params = CompletionParams(
            max_tokens=self.max_tokens, temperature=model.config.temperature, seed=model.config.seed
        )
        reply = model.complete(messages, tools, params)
        run.usage = run.usage + reply.usage
        return reply

    def _loop(self, model: Model, question: str, run: _Run) -> str:
        """Search rounds until the model answers; after the last allowed search it must answer."""
        native = model.config.tool_protocol == "native"
        slugs = list(self.readers)
        messages = [
            Message("system", system_prompt(slugs, self.top_k, self.max_searches, native)),
            Message("user", question),
        ]
        reply = Reply(text="")
        for _ in range(self.max_searches + 1):
            budget = run.searches < self.max_searches
            reply = self._complete(model, messages, [SEARCH_TOOL] if native and budget else [], run)
            if native and reply.tool_calls and budget:
                messages.append(Message("assistant", reply.text, tool_calls=list(reply.tool_calls)))
                for call in reply.tool_calls:
                    query = call.arguments.get("query")
                    if call.name != "search" or not isinstance(query, str) or not query.strip():
                        content = "Error: call search with a non-empty `query` string."
                    elif run.searches >= self.max_searches:
                        content = "No searches left."
                    else:
                        content = self._search_round(run, query.strip())
                    messages.append(Message("tool", content, tool_call_id=call.id))
                if run.searches >= self.max_searches:
                    messages[-1].content += "\n\n" + LAST_SEARCH
                continue
            found = _SEARCH_LINE.search(reply.text) if not native and budget else None
            if found is not None:
                content = self._search_round(run, found.group(1).strip())
                if run.searches >= self.max_searches:
                    content += "\n\n" + LAST_SEARCH
                messages += [Message("assistant", reply.text), Message("user", f"Passages:\n{content}")]
                continue
            break
        return _ANSWER_PREFIX.sub("", _SEARCH_LINE.sub("", reply.text)).strip()
