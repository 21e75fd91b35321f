"""The turn contract: what a caller may ask of one turn (spec/api.md §8.1), with its bounds and defaults.

The HTTP API, the CLI, MCP, the evaluator and replay all build a `TurnRequest`, and the runtime reads
it. Its fields' bounds are the only statement of them: the API words its range errors from them
(`INT_BOUNDS`), the CLI's options take their ranges from them. The HTTP body (`api.queries.QueryRequest`)
adds only what is HTTP's: `stream`, `background` and `previous_query_id`.

Who asks is not part of the request (`Caller`): a request body must never be able to say that it may
name a provider URL, or on whose behalf its session is opened.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import TYPE_CHECKING, Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from sleuth.agent.shape import MAX_SHAPE_BYTES
from sleuth.settings import TOOL_OUTPUT_CHARS, TURN_CAP_SECONDS, declared_limits
from sleuth.store.records.rows import LOCAL_PRINCIPAL  # not server_db: the CLI starts without SQLAlchemy
from sleuth.store.text import clean

if TYPE_CHECKING:
    from sleuth.agent.retrieval import RetrievalOptions

__all__ = ["INT_BOUNDS", "LOCAL", "Ask", "Caller", "TurnRequest"]


Workflow = Literal["search", "search_cc", "search_rag", "query_search", "query_sac", "query_cc", "query_rag"]
WORKFLOW_ALIASES = {  # the Nexus names of spec/api.md §8.1 → Sleuth's
    "query_search": "search",
    "query_sac": "search",
    "query_cc": "search_cc",
    "query_rag": "search_rag",
}
ThinkingLevel = Literal["minimal", "low", "medium", "high"]
RETRIEVAL_FLAGS = ("retrieval_only", "pointers_only", "chunks_only", "artifacts_only")
Slug = Annotated[str, Field(min_length=1, max_length=200)]
Ask = Annotated[str, Field(min_length=1, max_length=20_000)]  # the question; MCP declares it from here


@dataclass(frozen=True)
class Caller:
    """Who asks, as the runtime needs to know it. `name` is recorded on a session the turn opens (the
    API key's name); `model_specs` lets the caller name `openai:…` specs beside catalog ids (the CLI
    may, an HTTP caller may not: a spec can carry a URL of the caller's choosing)."""

    name: str = LOCAL_PRINCIPAL
    model_specs: bool = True


LOCAL = Caller()  # the CLI, the evaluator and replay: the home's owner, on this machine


class TurnRequest(BaseModel):
    """One turn's question and options. Python callers build it in lax mode; the API validates JSON
    bodies strictly (`"100"` is not an integer there, `1` is not a bool)."""

    model_config = ConfigDict(extra="forbid")

    ask: Ask
    scope: list[Slug] | None = Field(None, min_length=1, max_length=10)
    session_id: str | None = Field(None, max_length=200)
    workflow: Workflow | None = None
    system_prompt: str | None = Field(None, max_length=16_000)
    guardrails: str | None = Field(None, max_length=8_000)
    shape: dict[str, Any] | None = None
    model: str | None = Field(None, max_length=200)
    models: list[Annotated[str, Field(max_length=200)]] | None = Field(None, min_length=1, max_length=5)
    tools: list[Annotated[str, Field(max_length=64)]] | None = Field(None, max_length=64)
    timeout_seconds: int = Field(TURN_CAP_SECONDS, ge=1, le=TURN_CAP_SECONDS)
    max_steps: int | None = Field(None, ge=1, le=50)
    thinking_level: ThinkingLevel | None = None
    compose: bool = True
    retrieval_only: bool = False
    pointers_only: bool = False
    chunks_only: bool = False
    artifacts_only: bool = False
    max_retrieved: int = Field(20, ge=1, le=200)
    max_retrieved_chars: int = Field(2_000, ge=1, le=20_000)
    comparison_group: str | None = Field(None, min_length=1, max_length=128)
    max_tool_output_chars: int | None = Field(
        None,
        ge=1,
        le=100_000,
        description=f"[ext] over HTTP requires X-Pinecone-Api-Version: unstable; unset: {TOOL_OUTPUT_CHARS}",
    )

    @model_validator(mode="before")
    @classmethod
    def _encodable(cls, data: Any) -> Any:
        """Every string made valid UTF-8 (lone surrogates → U+FFFD): a request is text from outside,
        and one unencodable character must not wedge the stored session or query."""
        return clean(data) if isinstance(data, dict) else data

    @property
    def retrieval(self) -> RetrievalOptions | None:
        """A retrieval-only turn's options (hits, no loop, no synthesis), or None for a composed answer."""
        from sleuth.agent.retrieval import retrieval_options  # the SDK: not needed to read a request

        return retrieval_options(
            compose=self.compose,
            retrieval_only=self.retrieval_only,
            pointers_only=self.pointers_only,
            chunks_only=self.chunks_only,
            artifacts_only=self.artifacts_only,
            max_retrieved=self.max_retrieved,
            max_retrieved_chars=self.max_retrieved_chars,
        )

    @property
    def canonical_workflow(self) -> str | None:
        return None if self.workflow is None else WORKFLOW_ALIASES.get(self.workflow, self.workflow)

    @property
    def tool_output_chars(self) -> int:
        return self.max_tool_output_chars or TOOL_OUTPUT_CHARS

    def value_problem(self) -> tuple[str, str] | None:
        """(field, message) of the first value a field's type and range cannot refuse, or None."""
        if not self.ask.strip():
            return "ask", "ask must not be blank"
        if self.shape is not None and len(json.dumps(self.shape).encode()) > MAX_SHAPE_BYTES:
            return "shape", "shape must be at most 32 KiB of JSON"
        return None

    def conflict(self) -> tuple[str, str] | None:
        """(field, message) of the first pair of options that exclude each other, or None."""
        if self.chunks_only and self.artifacts_only:
            return "chunks_only", "chunks_only and artifacts_only exclude each other"
        if self.shape is not None and self.retrieval is not None:
            flags = ["compose"] if not self.compose else []
            flags += [name for name in RETRIEVAL_FLAGS if getattr(self, name)]
            return "shape", f"shape cannot be combined with a retrieval-only turn ({flags[0]})"
        return None


def _int_bounds() -> dict[str, tuple[int, int]]:
    found = {}
    for name, info in TurnRequest.model_fields.items():
        limits = declared_limits(info.metadata)
        if "ge" in limits and "le" in limits:
            found[name] = (int(limits["ge"]), int(limits["le"]))
    return found


INT_BOUNDS = _int_bounds()  # the inclusive range of each bounded integer field, read from the declaration
