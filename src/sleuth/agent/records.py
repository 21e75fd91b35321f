"""The records a turn produces (spec/api.md §8.2–8.6): Query, QueryStep, TraceCall, Rollup, Synthesis.

They are pydantic models because they cross boundaries: the CLI prints them with `--json`, the
store keeps them as JSON, and the HTTP API serves them unchanged. As JSON they are the store's typed
documents (`store.records.rows`): `query_document` is the one place a Query becomes one.
"""

from __future__ import annotations

from typing import Any, Literal, cast

from pydantic import BaseModel, Field

from sleuth.models.base import ModelConfig, TokenUsage
from sleuth.store.records.rows import QueryDocument
from sleuth.store.records.rows import QueryStatus as QueryStatus
from sleuth.store.records.rows import StopReason as StopReason


class TraceCall(BaseModel):
    fn: str
    category: str
    args: str
    result: dict[str, Any] = Field(default_factory=dict)
    duration_ms: float = 0.0
    ok: bool = True
    score_space: str | None = None
    error: str | None = None


class Strategy(BaseModel):
    kind: str = "none"
    fns: list[str] = Field(default_factory=list)
    label: str = ""
    scope: list[str] = Field(default_factory=list)


class StepCost(BaseModel):
    tokens_in: int = 0
    tokens_out: int = 0
    decide_ms: int = 0
    execute_ms: int = 0
    tokens_in_cached: int = 0
    tokens_in_cache_write: int = 0
    tokens_in_fresh: int = 0


class QueryStep(BaseModel):
    step_id: str
    status: Literal["running", "completed", "failed"]
    commentary: str = ""
    fns: list[str] = Field(default_factory=list)
    strategy: Strategy = Field(default_factory=Strategy)
    tool_calls: list[TraceCall] = Field(default_factory=list)
    code: dict[str, str] = Field(default_factory=dict)
    trace_truncated: dict[str, Any] = Field(
        default_factory=lambda: {"truncated": False, "dropped_documents": 0, "dropped_tool_calls": 0}
    )
    cost: StepCost = Field(default_factory=StepCost)
    input_tokens: int = 0
    output_tokens: int = 0
    total_tokens: int = 0
    cum_input_tokens: int = 0
    cum_output_tokens: int = 0
    output: str | None = None
    output_chars: int | None = None
    output_truncated: bool | None = None
    error: dict[str, str] | None = None
    model: str | None = None


class Rollup(BaseModel):
    n_steps: int = 0
    n_tool_calls: int = 0
    by_category: dict[str, int] = Field(default_factory=dict)
    total_hits: int = 0
    duration_ms: int = 0
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0
    stop_reason: StopReason = "final"
    evidence_seen: int = 0
    citations_dropped: int = 0


Assurance = Literal["matched", "computed", "section", "nearest", "none"]


class Synthesis(BaseModel):
    status: Literal["completed", "degraded", "failed"] = "completed"
    tokens_in: int = 0
    tokens_out: int = 0
    ms: int = 0
    answer_preview: str = ""
    tokens_in_cached: int = 0
    tokens_in_cache_write: int = 0
    tokens_in_fresh: int = 0
    method: Literal["model", "extractive"] = "model"
    #: How sure an answer without a model is (spec/runtime.md §10): a figure stated from the cell whose
    #: row and period are the asked ones (`matched`), worked out from cited figures (`computed`), the
    #: outline of the section the question names (`section`), the nearest evidence, which is not the
    #: asked figure or says it only in passing (`nearest`), or nothing found (`none`). None where a
    #: model answered.
    assurance: Assurance | None = None


class Citation(BaseModel):
    """One verified citation (spec/api.md §8.4): the verbatim quote (`grounding`), the file, page and
    character offsets where it is, and how the turn came by it (`kind`: chunk, artifact, table …)."""

    source: str
    section_paths: list[list[str]] = Field(default_factory=list)
    pages: list[int]
    score: float = 0.0
    grounding: str
    kind: str = "chunk"
    sources: list[str] = Field(default_factory=list)  # an artifact's own sources
    artifact_name: str | None = None
    context: str = ""
    start: int = 0
    end: int = 0
    #: A table cell's citation as its row, period and figure ("Revenue, 2025: 48.2"), where the quote
    #: alone would be "48.2" (issue 39, item 5); absent for prose.
    cell: str | None = None


class Unsupported(BaseModel):
    """A sentence of the answer (its text and offsets in it) or a field of its JSON document (`field`, a
    JSON pointer) whose facts what it cites does not state (spec/api.md §8.4.1, `agent.claims`): a
    sentence that cited spans lacking them (`claim_not_in_evidence`: its markers were dropped), one that
    cites nothing (`uncited`), or a shaped answer's leaf not in its grounding (`field_not_in_evidence`).
    `missing` holds the facts not found, as the answer wrote them."""

    reason: Literal["claim_not_in_evidence", "uncited", "field_not_in_evidence"]
    text: str = ""
    start: int | None = None
    end: int | None = None
    field: str | None = None
    missing: list[str] = Field(default_factory=list)


class Usage(BaseModel):
    input_tokens: int = 0
    output_tokens: int = 0
    total_tokens: int = 0
    cost_usd: float | None = None


class Query(BaseModel):
    id: str
    object: Literal["query"] = "query"
    session_id: str
    model: str | None = None
    created: int
    status: QueryStatus = "in_progress"
    error: str | None = None
    previous_query_id: str | None = None
    comparison: list[dict[str, Any]] | None = None
    feedback: dict[str, Any] | None = None
    input: list[dict[str, str]] = Field(default_factory=list)
    output: list[dict[str, Any]] = Field(default_factory=list)
    output_json: dict[str, Any] | None = None
    output_grounding: dict[str, list[int]] | None = None
    citations: list[Citation] = Field(default_factory=list)
    unsupported: list[Unsupported] = Field(default_factory=list)
    max_steps: int | None = None
    max_tool_output_chars: int | None = None
    thinking_level: str | None = None
    steps: list[QueryStep] = Field(default_factory=list)
    rollup: Rollup | None = None
    synthesis: Synthesis | None = None
    trace_ref: str | None = None
    usage: Usage = Field(default_factory=Usage)
    runtime_ms: int = 0

    @property
    def answer(self) -> str:
        """The answer text: the concatenation of all `output_text` parts (Sleuth writes one)."""
        return "".join(
            part.get("text", "")
            for message in self.output
            for part in message.get("content", [])
            if part.get("type") == "output_text"
        )


def query_document(query: Query) -> QueryDocument:
    """The Query as the store keeps it and the API serves it. Its JSON has every field of the document
    (a test holds the two to the same keys), which pydantic cannot say of `model_dump`: hence the cast."""
    return cast(QueryDocument, query.model_dump(mode="json"))


def turn_usage(loop: TokenUsage | None, synthesis: Synthesis | None, config: ModelConfig | None) -> Usage:
    """A turn's `usage` (spec/api.md §8.2): the loop's tokens and the synthesis call's, priced when the
    first model's catalog entry has prices."""
    tokens_in = (loop.input_tokens if loop else 0) + (synthesis.tokens_in if synthesis else 0)
    tokens_out = (loop.output_tokens if loop else 0) + (synthesis.tokens_out if synthesis else 0)
    cost = None
    if (
        config is not None
        and config.price_input_per_token is not None
        and config.price_output_per_token is not None
    ):
        cost = tokens_in * config.price_input_per_token + tokens_out * config.price_output_per_token
    return Usage(
        input_tokens=tokens_in, output_tokens=tokens_out, total_tokens=tokens_in + tokens_out, cost_usd=cost
    )
