"""Anthropic messages adapter (spec/runtime.md §12).

Translation rules, each forced by the messages API:
- system messages are joined into the top-level `system`, which carries a prompt-cache breakpoint: the
  orientation prompt is byte-identical across questions (spec/runtime.md §3), so later calls read it from the
  cache; a second breakpoint on the newest message lets each loop step reuse the previous step's prefix;
- assistant tool calls become `tool_use` blocks; `tool` messages become `tool_result` blocks in a user
  message, consecutive results merged into one (the API wants all results of a turn together);
- there is no JSON mode, so `json_mode` adds an instruction in a second, uncached system block;
- sampling settings (`temperature`, `seed`) are not sent: the 2.x SDK's API version rejects them.

`TokenUsage.input_tokens` is reported as the total input (fresh + cache read + cache write) so it means the
same as OpenAI's `prompt_tokens`.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Any, cast

from sleuth.models.base import (
    CompletionParams,
    Message,
    ModelConfig,
    ModelError,
    Reply,
    TokenUsage,
    ToolCall,
    ToolSpec,
)
from sleuth.models.http_body import capped_http_client
from sleuth.models.keys import resolve_api_key
from sleuth.models.openai_chat import map_sdk_error

if TYPE_CHECKING:
    import anthropic
    from anthropic.types import Message as AnthropicMessage
    from anthropic.types import MessageParam, TextBlockParam, ToolUnionParam

_MISSING_EXTRA = "the anthropic extra is not installed: pip install 'sleuth[anthropic]'"
JSON_INSTRUCTION = (
    "Reply with exactly one JSON object and nothing else: no prose before or after it, no code fences."
)
# Sleuth's thinking levels (spec/api.md §8.1) → the API's `output_config.effort` values.
_EFFORT = {"minimal": "low", "low": "low", "medium": "medium", "high": "high", "xhigh": "xhigh", "max": "max"}
_EPHEMERAL: dict[str, str] = {"type": "ephemeral"}


def _import_anthropic() -> Any:
    """The SDK module, or a ModelError that says how to install it."""
    try:
        import anthropic
    except ImportError as exc:  # pragma: no cover - the dev environment has the extra
        raise ModelError(_MISSING_EXTRA) from exc
    return anthropic


def to_anthropic_system(messages: list[Message], json_mode: bool) -> list[TextBlockParam]:
    """All system messages as one cached text block, plus the JSON instruction when asked for."""
    text = "\n\n".join(m.content for m in messages if m.role == "system" and m.content)
    blocks: list[dict[str, Any]] = []
    if text:
        blocks.append({"type": "text", "text": text, "cache_control": dict(_EPHEMERAL)})
    if json_mode:
        blocks.append({"type": "text", "text": JSON_INSTRUCTION})
    return cast("list[TextBlockParam]", blocks)


def to_anthropic_messages(messages: list[Message]) -> list[MessageParam]:
    """Conversation (system messages excluded) → alternating user/assistant messages of blocks."""
    out: list[dict[str, Any]] = []

    def add(role: str, blocks: list[dict[str, Any]]) -> None:
        if not blocks:
            return  # the API rejects empty content; an empty turn carries nothing anyway
        if out and out[-1]["role"] == role:
            out[-1]["content"].extend(blocks)  # consecutive same-role entries form one message
        else:
            out.append({"role": role, "content": blocks})

    for message in messages:
        if message.role == "system":
            continue
        if message.role == "tool":
            if message.tool_call_id is None:
                raise ModelError("a tool message has no tool_call_id; it must answer an assistant tool call")
            add(
                "user",
                [{"type": "tool_result", "tool_use_id": message.tool_call_id, "content": message.content}],
            )
            continue
        blocks: list[dict[str, Any]] = []
        if message.content:
            blocks.append({"type": "text", "text": message.content})
        if message.role == "assistant":
            blocks.extend(
                {"type": "tool_use", "id": c.id, "name": c.name, "input": c.arguments}
                for c in message.tool_calls
            )
        add(message.role, blocks)
    if out:
        # Cache the conversation so far: the next step resends it unchanged plus one more exchange.
        out[-1]["content"][-1]["cache_control"] = dict(_EPHEMERAL)
    return cast("list[MessageParam]", out)


def to_anthropic_tools(tools: list[ToolSpec]) -> list[ToolUnionParam]:
    """ToolSpecs → custom tools with an input schema."""
    return [{"name": t.name, "description": t.description, "input_schema": t.parameters} for t in tools]


def reply_from_message(message: AnthropicMessage, model_id: str) -> Reply:
    """Text blocks joined, tool_use blocks as calls; thinking and server-tool blocks are not ours."""
    texts: list[str] = []
    calls: list[ToolCall] = []
    for block in message.content:
        if block.type == "text":
            texts.append(block.text)
        elif block.type == "tool_use":
            arguments = block.input if isinstance(block.input, dict) else {"_raw": str(block.input)}
            calls.append(ToolCall(block.id, block.name, dict(arguments)))
    u = message.usage
    read = u.cache_read_input_tokens or 0
    write = u.cache_creation_input_tokens or 0
    usage = TokenUsage(
        input_tokens=(u.input_tokens or 0) + read + write,
        output_tokens=u.output_tokens or 0,
        cached_tokens=read,
        cache_write_tokens=write,
    )
    return Reply(
        text="".join(texts), tool_calls=calls, usage=usage, model=model_id, finish_reason=message.stop_reason
    )


class AnthropicModel:
    """`Model` over the Anthropic messages API."""

    def __init__(self, config: ModelConfig, api_key: str | None = None) -> None:
        """`api_key` overrides the config's key (build_model passes the resolved one), kept out of
        `config` so that printing a config never shows it."""
        self.config = config
        self._api_key = api_key
        self._anthropic = _import_anthropic()
        self._client: anthropic.Anthropic | None = None
        self._lock = threading.Lock()

    def _get_client(self) -> anthropic.Anthropic:
        """One pooled client, made on first use so a missing key fails the call (fallback moves on)."""
        with self._lock:
            if self._client is None:
                key = self._api_key = self._api_key or resolve_api_key(self.config)
                if not key:
                    env = self.config.api_key_env or "ANTHROPIC_API_KEY"
                    raise ModelError(f"{self.config.id}: no API key: set {env} or api_key in config.toml")
                self._client = cast(
                    "anthropic.Anthropic",
                    self._anthropic.Anthropic(
                        api_key=key,
                        base_url=self.config.base_url,
                        max_retries=0,
                        http_client=capped_http_client(self._anthropic.DefaultHttpxClient, self.config.id),
                    ),
                )
            return self._client

    def _request(
        self, messages: list[Message], tools: list[ToolSpec], params: CompletionParams
    ) -> dict[str, Any]:
        """Keyword arguments for `messages.create`; absent settings are not sent at all."""
        kwargs: dict[str, Any] = {
            "model": self.config.model,
            "max_tokens": params.max_tokens,
            "messages": to_anthropic_messages(messages),
            "timeout": params.timeout_s,
        }
        system = to_anthropic_system(messages, params.json_mode)
        if system:
            kwargs["system"] = system
        if tools:
            kwargs["tools"] = to_anthropic_tools(tools)
        if params.reasoning_effort is not None:
            kwargs["output_config"] = {
                "effort": _EFFORT.get(params.reasoning_effort, params.reasoning_effort)
            }
        return kwargs

    def complete(self, messages: list[Message], tools: list[ToolSpec], params: CompletionParams) -> Reply:
        client = self._get_client()
        kwargs = self._request(messages, tools, params)
        try:
            message = client.messages.create(**kwargs)
        except self._anthropic.AnthropicError as exc:
            # `from None`: the SDK error's own text can quote the key; ours is scrubbed.
            raise self._map_error(exc, params) from None
        try:
            return reply_from_message(message, self.config.id)
        except (AttributeError, TypeError, ValueError) as exc:  # a proxy that speaks the format loosely
            raise ModelError(f"{self.config.id}: malformed response: {exc}") from exc

    def _map_error(self, exc: Exception, params: CompletionParams) -> ModelError:
        return map_sdk_error(self._anthropic, exc, self.config, params, self._api_key, "api.anthropic.com")
