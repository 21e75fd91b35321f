"""The one seam every language model sits behind (spec/runtime.md §12): `Model.complete(messages, tools,
params) -> Reply`. Providers, the scripted test model and the offline planner each implement it, so
the agent loop never knows which one it talks to.

Messages are provider-neutral; each adapter translates them to its wire format. Tool calls are the
native protocol; text-protocol models get no tools and answer with fenced code (agent/actions.py).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, Literal, Protocol

from pydantic import TypeAdapter

from sleuth.errors import Unavailable

Role = Literal["system", "user", "assistant", "tool"]
ToolProtocol = Literal["native", "text"]
PromptProfile = Literal["standard", "small"]
Provider = Literal["openai", "anthropic", "openai-compatible", "offline", "scripted"]


@dataclass
class ToolCall:
    id: str
    name: str
    arguments: dict[str, Any]


@dataclass
class Message:
    """One conversation entry. `tool` messages answer the assistant tool call `tool_call_id`."""

    role: Role
    content: str
    tool_calls: list[ToolCall] = field(default_factory=list)
    tool_call_id: str | None = None

    def to_json(self) -> dict[str, Any]:
        """Role and content, and the tool fields only when set (what providers and the trace expect)."""
        data: dict[str, Any] = _MESSAGE.dump_python(self, mode="json", exclude_defaults=True)
        return data

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Message:
        return cls(
            role=data["role"],
            content=data.get("content") or "",
            tool_calls=[
                ToolCall(c["id"], c["name"], dict(c["arguments"])) for c in data.get("tool_calls", [])
            ],
            tool_call_id=data.get("tool_call_id"),
        )


@dataclass(frozen=True)
class ToolSpec:
    """A native tool: name, description and a JSON Schema for its arguments."""

    name: str
    description: str
    parameters: dict[str, Any]


@dataclass
class TokenUsage:
    """The tokens of model calls, as providers count them. A turn's `usage` (spec/api.md §8.2, with its
    total and cost) is `agent.records.Usage`, summed from these."""

    input_tokens: int = 0
    output_tokens: int = 0
    cached_tokens: int = 0  # input tokens read from the provider's prompt cache
    cache_write_tokens: int = 0  # input tokens written to it

    def __add__(self, other: TokenUsage) -> TokenUsage:
        return TokenUsage(
            self.input_tokens + other.input_tokens,
            self.output_tokens + other.output_tokens,
            self.cached_tokens + other.cached_tokens,
            self.cache_write_tokens + other.cache_write_tokens,
        )

    @property
    def fresh_tokens(self) -> int:
        return max(0, self.input_tokens - self.cached_tokens - self.cache_write_tokens)

    def to_json(self) -> dict[str, int]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> TokenUsage:
        return cls(
            **{
                k: int(data.get(k, 0))
                for k in ("input_tokens", "output_tokens", "cached_tokens", "cache_write_tokens")
            }
        )


@dataclass
class Reply:
    """What a model answered: text, native tool calls (possibly several), usage, and who answered."""

    text: str
    tool_calls: list[ToolCall] = field(default_factory=list)
    usage: TokenUsage = field(default_factory=TokenUsage)
    model: str = ""
    finish_reason: str | None = None

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Reply:
        return cls(
            text=data.get("text") or "",
            tool_calls=[
                ToolCall(c["id"], c["name"], dict(c["arguments"])) for c in data.get("tool_calls", [])
            ],
            usage=TokenUsage.from_json(data.get("usage") or {}),
            model=data.get("model") or "",
            finish_reason=data.get("finish_reason"),
        )


_MESSAGE = TypeAdapter(Message)


@dataclass(frozen=True)
class CompletionParams:
    max_tokens: int = 2048
    temperature: float | None = None
    seed: int | None = None
    json_mode: bool = False  # ask for one JSON object when the provider supports it
    reasoning_effort: str | None = None  # thinking_level, for models that expose one
    timeout_s: float = 120.0


@dataclass(frozen=True)
class ModelConfig:
    """One catalog entry (`[models."<id>"]` in config.toml). `api_key` never leaves the host process."""

    id: str
    provider: Provider
    model: str
    base_url: str | None = None
    api_key: str | None = field(default=None, repr=False)  # never printed, never in a trace
    api_key_env: str | None = None
    tool_protocol: ToolProtocol = "native"
    prompt_profile: PromptProfile = "standard"
    context_window: int = 128_000
    temperature: float | None = None
    seed: int | None = None
    price_input_per_token: float | None = None
    price_output_per_token: float | None = None
    label: str | None = None

    def public(self) -> dict[str, Any]:
        """The catalog view: never the key. Prices only where the operator configured them, so a
        client (the console's trace view) can price a turn's steps the way `usage.cost_usd` is priced."""
        data: dict[str, Any] = {
            "id": self.id,
            "label": self.label or self.id,
            "provider": self.provider,
            "tool_protocol": self.tool_protocol,
            "context_window": self.context_window,
        }
        if self.price_input_per_token is not None and self.price_output_per_token is not None:
            data["pricing"] = {
                "input_per_token": self.price_input_per_token,
                "output_per_token": self.price_output_per_token,
            }
        return data


class ModelError(Unavailable):
    """A provider call failed. `retryable` for timeouts, 429 and 5xx (spec/runtime.md §12 fallback);
    `retry_after`: the seconds the provider asked to wait (its `Retry-After` header), if it said."""

    def __init__(
        self,
        message: str,
        *,
        retryable: bool = False,
        status: int | None = None,
        retry_after: float | None = None,
    ) -> None:
        super().__init__(message)
        self.retryable = retryable
        self.status = status
        self.retry_after = retry_after


class Model(Protocol):
    """A chat model. `complete` is synchronous: each turn runs on its own worker thread."""

    config: ModelConfig

    def complete(self, messages: list[Message], tools: list[ToolSpec], params: CompletionParams) -> Reply: ...
