"""The records the server database hands out, as typed rows: sessions, turns (the Query document), the
record a worker runs a turn from, traces and tasks.

They are `TypedDict`s, so at run time they stay the plain JSON-ready dicts the API serves unchanged;
the types only say what each holds. A key that a stored record may lack is `NotRequired`: the turn
store keeps the Query document as its caller gives it (it reads only `id`, `session_id`, `status` and
`created`), and a document written by an older Sleuth has only the fields it knew. The Query's parts
mirror the pydantic records of `agent.records`, which build them (`agent.records.query_document`).
Stream events stay `dict[str, Any]`: each type carries its own fields (spec/api.md §9.3).
"""

from __future__ import annotations

from typing import Any, Literal, NotRequired, TypedDict

LOCAL_PRINCIPAL = "local"  # who opens sessions when no API key is involved (the CLI, --no-auth)

QueryStatus = Literal["in_progress", "completed", "failed", "cancelled"]
StopReason = Literal[
    "final",
    "no_tool_call",
    "max_steps",
    "errors",
    "repeated",
    "timeout",
    "cancelled",
    "failed",
    "retrieval_only",
]


# ---------------------------------------------------------------------------------- sessions
class SessionRow(TypedDict):
    """A session (spec/api.md §10.1) as stored: what its first turn pinned, who opened it, its claim."""

    id: str
    scope: list[str]  # context slugs or ids, as the caller wrote them
    title: str
    system_prompt: str | None
    guardrails: str | None
    models: list[str]
    tools: list[str] | None  # None: every tool
    workflow: str
    last_query_id: str | None
    active_query_id: str | None  # the turn in flight, if any
    created_by: str
    created_at: float  # Unix seconds
    updated_at: float


# ---------------------------------------------------------------------------------- the Query document
class ComparedTurn(TypedDict):
    """Another turn of a comparison group (spec/api.md §8.1), as a Query's `comparison` lists it."""

    workflow: str | None
    query_id: str
    model: str | None


class Feedback(TypedDict):
    """A turn's rating (spec/api.md §10.3)."""

    rating: Literal["up", "down"]
    comment: str | None


class InputMessage(TypedDict):
    role: Literal["user"]
    content: str


class OutputText(TypedDict):
    type: Literal["output_text"]
    text: str


class OutputMessage(TypedDict):
    role: Literal["assistant"]
    content: list[OutputText]


class CitationDocument(TypedDict):
    """A verified citation (spec/api.md §8.4; `agent.records.Citation`)."""

    source: str
    section_paths: list[list[str]]
    pages: list[int]
    score: float
    grounding: str
    kind: str
    sources: list[str]
    artifact_name: str | None
    context: str
    start: int
    end: int
    cell: NotRequired[str | None]  # a table cell's row, period and figure; newer than the rest


class UnsupportedDocument(TypedDict):
    """A sentence of the answer, or a field of its JSON, whose facts its citations do not state
    (spec/api.md §8.4.1; `agent.records.Unsupported`)."""

    reason: Literal["claim_not_in_evidence", "uncited", "field_not_in_evidence"]
    text: str
    start: int | None
    end: int | None
    field: str | None
    missing: list[str]


class TraceCallDocument(TypedDict):
    """One SDK call of a step (spec/api.md §8.5 `TraceCall`)."""

    fn: str
    category: str
    args: str
    result: dict[str, Any]  # a compact summary, its keys the function's own
    duration_ms: float
    ok: bool
    score_space: str | None
    error: str | None


class StrategyDocument(TypedDict):
    kind: str
    fns: list[str]
    label: str
    scope: list[str]


class StepCostDocument(TypedDict):
    tokens_in: int
    tokens_out: int
    decide_ms: int
    execute_ms: int
    tokens_in_cached: int
    tokens_in_cache_write: int
    tokens_in_fresh: int


class StepDocument(TypedDict):
    """A QueryStep (spec/api.md §8.5; `agent.records.QueryStep`)."""

    step_id: str
    status: Literal["running", "completed", "failed"]
    commentary: str
    fns: list[str]
    strategy: StrategyDocument
    tool_calls: list[TraceCallDocument]
    code: dict[str, str]  # {language, source}
    trace_truncated: dict[str, Any]  # {truncated, dropped_documents, dropped_tool_calls}
    cost: StepCostDocument
    input_tokens: int
    output_tokens: int
    total_tokens: int
    cum_input_tokens: int
    cum_output_tokens: int
    output: str | None
    output_chars: int | None
    output_truncated: bool | None
    error: dict[str, str] | None  # {type, message}
    model: str | None


class RollupDocument(TypedDict):
    """A turn's `Rollup` (spec/api.md §8.5)."""

    n_steps: int
    n_tool_calls: int
    by_category: dict[str, int]
    total_hits: int
    duration_ms: int
    cache_read_tokens: int
    cache_write_tokens: int
    stop_reason: StopReason
    evidence_seen: int
    citations_dropped: int


class SynthesisDocument(TypedDict):
    """A turn's `Synthesis` (spec/api.md §8.5)."""

    status: Literal["completed", "degraded", "failed"]
    tokens_in: int
    tokens_out: int
    ms: int
    answer_preview: str
    tokens_in_cached: int
    tokens_in_cache_write: int
    tokens_in_fresh: int
    method: Literal["model", "extractive"]
    assurance: Literal["matched", "computed", "section", "nearest", "none"] | None


class UsageDocument(TypedDict):
    input_tokens: int
    output_tokens: int
    total_tokens: int
    cost_usd: float | None


class QueryDocument(TypedDict):
    """The Query object (spec/api.md §8.2) as stored and served. `id`, `session_id` and `status` are what
    the store needs; the rest is the caller's, present in every document `agent.records.Query` wrote.
    Read back, `feedback` is always there (the store overlays its own column)."""

    id: str
    object: NotRequired[Literal["query"]]
    session_id: str
    model: NotRequired[str | None]
    created: NotRequired[int]  # Unix seconds; the store stamps a document without one
    status: QueryStatus
    error: NotRequired[str | None]
    previous_query_id: NotRequired[str | None]
    comparison: NotRequired[list[ComparedTurn] | None]  # stored `[]` for a grouped turn, filled when read
    feedback: NotRequired[Feedback | None]
    input: NotRequired[list[InputMessage]]
    output: NotRequired[list[OutputMessage]]
    output_json: NotRequired[dict[str, Any] | None]
    output_grounding: NotRequired[dict[str, list[int]] | None]
    citations: NotRequired[list[CitationDocument]]
    unsupported: NotRequired[list[UnsupportedDocument]]
    max_steps: NotRequired[int | None]
    max_tool_output_chars: NotRequired[int | None]
    thinking_level: NotRequired[str | None]
    steps: NotRequired[list[StepDocument]]
    rollup: NotRequired[RollupDocument | None]
    synthesis: NotRequired[SynthesisDocument | None]
    trace_ref: NotRequired[str | None]
    usage: NotRequired[UsageDocument]
    runtime_ms: NotRequired[int]


class TurnRecord(TypedDict):
    """What `admit_turn` stores for the process that runs the turn (`agent.turn.Runtime.restore`)."""

    request: dict[str, Any]  # the `agent.request.TurnRequest`, as JSON
    contexts: list[list[str]]  # [slug, pinned version] of each scoped context
    models: list[str]  # the catalog ids, in fallback order
    workflow: str
    ignored: list[str]  # the pinned fields the request sent in vain


# ---------------------------------------------------------------------------------- the trace
class ReplayNote(TypedDict):
    available: bool
    error: NotRequired[str]  # why there is no replay log


class OrientationNote(TypedDict):
    chars: int
    sha256: str


class ModelAccount(TypedDict):
    id: str
    calls: int
    input_tokens: int
    output_tokens: int
    ms: float


class UsageSeam(TypedDict):
    kind: Literal["embed", "rerank"]
    model: str
    tokens: int
    requests: int


class EvidenceEntry(TypedDict):
    ref: str
    context: str
    source: str
    page: int
    start: int
    end: int
    kind: str
    seen: bool
    cited: bool


class TraceVersions(TypedDict):
    sleuth: str
    prompt: str
    contexts: dict[str, str]  # slug → the live version the turn pinned
    manifests: dict[str, str]  # slug → sha256 of its manifest


class RepairNote(TypedDict):
    """A prose answer sent back to its model once for the sentences its citations do not support
    (spec/runtime.md §8.4.1): how many were flagged before and after, and which answer was kept."""

    flagged: int
    flagged_after: int | None  # None when the repair call failed
    kept: Literal["first", "repair"]
    error: NotRequired[str]


class TraceDocument(TypedDict, total=False):
    """A turn's trace (spec/api.md §8.6). It is built in stages, so every key may be missing on the way:
    a stage leaves its notes (`orientation`, `synthesis_error`, `internal_error`, …) and the end adds
    the rest (`agent.trace.build_trace`); a trace stored by a turn has them all but the notes. Its
    steps stay loose dicts: a step's dump with `calls` and `full_output`, cut field by field to fit."""

    query_id: str
    steps: list[dict[str, Any]]
    rollup: RollupDocument | None
    orientation: OrientationNote
    sandbox: dict[str, Any] | None  # the sandbox's own report; None when none was started
    models: list[ModelAccount]
    usage_seams: list[UsageSeam]
    evidence: list[EvidenceEntry]
    citations_dropped: list[dict[str, Any]]  # {marker, source, page, reason}
    ungrounded_fields: list[str]
    unsupported: NotRequired[list[UnsupportedDocument]]  # api.md §8.4.1; newer than the rest
    synthesis_repair: RepairNote  # only where a repair was asked for
    synthesis: SynthesisDocument | None
    synthesis_error: str
    internal_error: str
    ignored_fields: list[str]
    versions: TraceVersions
    replay: ReplayNote
    host_budget: dict[str, Any]  # `limits.BudgetMeter.to_json()`: {name: {used, limit}}
    spans_rejected: int
    full_outputs_dropped: str
    trimmed: str


# ---------------------------------------------------------------------------------- tasks
class TaskProgress(TypedDict):
    """A task's `progress` (spec/api.md §7.1); `eta_seconds` once a job has reported."""

    phase: str | None
    phases: list[str]
    label: str | None
    pct: float
    eta_seconds: NotRequired[float | None]


class TaskStep(TypedDict):
    """One phase of a task's work, as `GET /tasks/{id}` lists it."""

    step_id: str
    status: str
    type: str
    commentary: str
    path: str | None


class TaskJob(TypedDict):
    """What a worker runs a queued task from (`TaskStore.set_job`)."""

    kind: str
    args: dict[str, Any]
    phases: list[str]


class TaskRow(TypedDict):
    """A task (spec/api.md §7.1) as stored: its state, progress, output and who holds it."""

    id: str
    context_id: str | None
    context_slug: str | None
    workflow: str
    state: str
    created_by: str | None
    error: str | None
    input: dict[str, Any]  # the job's arguments, bounded (`task_output.bound_output`)
    output: Any  # the job's JSON result, bounded; None until it ends
    steps: list[TaskStep]
    progress: TaskProgress
    tokens_prompt: int
    tokens_completion: int
    timeout_seconds: int | None
    created_at: float  # Unix seconds
    running_from: float | None
    finished_at: float | None
    last_activity_at: float
    worker: str | None  # the worker that holds it, until `lease_until`
    lease_until: float | None
    job: TaskJob | None  # None for a job run in-process
    attempts: int  # runs begun


class ContextStats(TypedDict):
    """A Context's `stats` over its tasks (spec/api.md §6.1)."""

    tasks_total: int
    tasks_active: int
    tasks_completed: int
    tasks_failed: int
    tasks_cancelled: int
    tokens_total: int
    runtime_seconds: float
