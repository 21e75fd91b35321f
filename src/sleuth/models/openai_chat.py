"""OpenAI chat completions adapter (spec/runtime.md §12): hosted OpenAI and any OpenAI-compatible server
(llama.cpp's `llama-server`, spec/local-llm.md) share it.

The `openai` SDK is an optional extra, so it is imported lazily: Sleuth imports and runs offline without
it. The SDK's own retries are off (`max_retries=0`) because retry and fallback policy belongs to
`FallbackModel`, which needs every failure reported at once with a `retryable` verdict. Its HTTP
client reads a response body under a byte cap as it arrives (`http_body`), as the Anthropic one does.
"""

from __future__ import annotations

import email.utils
import json
import threading
from collections.abc import Mapping
from datetime import UTC, datetime
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
from sleuth.models.http_body import BodyRefused, capped_http_client
from sleuth.models.keys import resolve_api_key

if TYPE_CHECKING:
    import openai
    from openai.types.chat import (
        ChatCompletion,
        ChatCompletionMessageParam,
        ChatCompletionToolUnionParam,
    )
    from openai.types.shared import ReasoningEffort

_MISSING_EXTRA = "the openai extra is not installed: pip install 'sleuth[openai]'"
_DETAIL_CHARS = 300


def _import_openai() -> Any:
    """The SDK module, or a ModelError that says how to install it."""
    try:
        import openai
    except ImportError as exc:  # pragma: no cover - the dev environment has the extra
        raise ModelError(_MISSING_EXTRA) from exc
    return openai


def scrub(text: str, secret: str | None) -> str:
    """Remove a secret from text that may echo it (a server's error body can quote the key)."""
    if secret and len(secret) >= 4:
        text = text.replace(secret, "***")
    return text


def error_detail(body: object, fallback: str) -> str:
    """A short human message from a provider error body (`{"error": {"message": ...}}` or similar)."""
    data = body
    if isinstance(data, dict) and isinstance(data.get("error"), dict):
        data = data["error"]
    if isinstance(data, dict) and isinstance(data.get("message"), str):
        text = data["message"]
    elif isinstance(data, str) and data:
        text = data
    elif isinstance(data, dict) and isinstance(data.get("error"), str):
        text = data["error"]
    else:
        text = fallback
    text = " ".join(text.split())
    return text if len(text) <= _DETAIL_CHARS else text[: _DETAIL_CHARS - 1] + "…"


def status_retryable(status: int) -> bool:
    """Timeouts (408), rate limits (429) and server errors (5xx) are worth retrying (spec/runtime.md §12)."""
    return status in (408, 429) or status >= 500


def parse_arguments(raw: str | None) -> dict[str, Any]:
    """Tool-call arguments as a dict; invalid JSON is kept under `_raw` so the loop can report it."""
    if raw is None or not raw.strip():
        return {}
    try:
        value = json.loads(raw)
    except ValueError:
        return {"_raw": raw}
    return value if isinstance(value, dict) else {"_raw": raw}


def to_openai_messages(messages: list[Message]) -> list[ChatCompletionMessageParam]:
    """Provider-neutral messages → chat-completions wire messages."""
    out: list[dict[str, Any]] = []
    for message in messages:
        if message.role == "tool":
            if message.tool_call_id is None:
                raise ModelError("a tool message has no tool_call_id; it must answer an assistant tool call")
            out.append({"role": "tool", "tool_call_id": message.tool_call_id, "content": message.content})
        elif message.role == "assistant" and message.tool_calls:
            out.append(
                {
                    "role": "assistant",
                    "content": message.content or None,
                    "tool_calls": [
                        {
                            "id": call.id,
                            "type": "function",
                            "function": {"name": call.name, "arguments": json.dumps(call.arguments)},
                        }
                        for call in message.tool_calls
                    ],
                }
            )
        else:
            out.append({"role": message.role, "content": message.content})
    return cast("list[ChatCompletionMessageParam]", out)


def to_openai_tools(tools: list[ToolSpec]) -> list[ChatCompletionToolUnionParam]:
    """ToolSpecs → function tools."""
    return [
        {
            "type": "function",
            "function": {"name": t.name, "description": t.description, "parameters": t.parameters},
        }
        for t in tools
    ]


def reply_from_completion(completion: ChatCompletion, model_id: str) -> Reply:
    """The first choice's text, tool calls, usage and finish reason."""
    if not completion.choices:
        raise ModelError(f"{model_id}: the server returned no choices")
    choice = completion.choices[0]
    calls: list[ToolCall] = []
    for index, tool_call in enumerate(choice.message.tool_calls or []):
        call_id = tool_call.id or f"call_{index}"
        if tool_call.type == "function":
            fn = tool_call.function
            calls.append(ToolCall(call_id, fn.name, parse_arguments(fn.arguments)))
        else:  # a custom (free-text) tool call: we never offer one, but keep it reportable
            custom = tool_call.custom
            calls.append(ToolCall(call_id, custom.name, {"_raw": custom.input}))
    usage = TokenUsage()
    if completion.usage is not None:
        details = completion.usage.prompt_tokens_details
        usage = TokenUsage(
            input_tokens=completion.usage.prompt_tokens or 0,
            output_tokens=completion.usage.completion_tokens or 0,
            cached_tokens=(details.cached_tokens or 0) if details else 0,
            cache_write_tokens=(details.cache_write_tokens or 0) if details else 0,
        )
    return Reply(
        text=choice.message.content or "",
        tool_calls=calls,
        usage=usage,
        model=model_id,
        finish_reason=choice.finish_reason,
    )


class OpenAIChatModel:
    """`Model` over chat completions for providers `openai` and `openai-compatible`."""

    def __init__(self, config: ModelConfig, api_key: str | None = None) -> None:
        """`api_key` overrides the config's key (build_model passes the resolved one), kept out of
        `config` so that printing a config never shows it."""
        self.config = config
        self._api_key = api_key
        self._openai = _import_openai()
        self._client: openai.OpenAI | None = None
        self._lock = threading.Lock()

    def _get_client(self) -> openai.OpenAI:
        """One client per model (thread-safe, pooled connections), made on first use so a missing key
        fails the call, where fallback can move on, rather than the catalog build."""
        with self._lock:
            if self._client is None:
                key = self._api_key = self._api_key or resolve_api_key(self.config)
                if not key:
                    env = self.config.api_key_env or "OPENAI_API_KEY"
                    raise ModelError(f"{self.config.id}: no API key: set {env} or api_key in config.toml")
                self._client = cast(
                    "openai.OpenAI",
                    self._openai.OpenAI(
                        base_url=self.config.base_url,
                        api_key=key,
                        max_retries=0,
                        http_client=capped_http_client(self._openai.DefaultHttpxClient, self.config.id),
                    ),
                )
            return self._client

    def _request(
        self, messages: list[Message], tools: list[ToolSpec], params: CompletionParams
    ) -> dict[str, Any]:
        """Keyword arguments for `chat.completions.create`; absent settings are not sent at all."""
        kwargs: dict[str, Any] = {
            "model": self.config.model,
            "messages": to_openai_messages(messages),
            "timeout": params.timeout_s,
        }
        # Hosted OpenAI reasoning models reject `max_tokens`; local servers know `max_tokens` best.
        if self.config.provider == "openai":
            kwargs["max_completion_tokens"] = params.max_tokens
        else:
            kwargs["max_tokens"] = params.max_tokens
        if tools:
            kwargs["tools"] = to_openai_tools(tools)
        temperature = params.temperature if params.temperature is not None else self.config.temperature
        if temperature is not None:
            kwargs["temperature"] = temperature
        seed = params.seed if params.seed is not None else self.config.seed
        if seed is not None:
            kwargs["seed"] = seed
        if params.json_mode:
            kwargs["response_format"] = {"type": "json_object"}
        if params.reasoning_effort is not None:
            kwargs["reasoning_effort"] = cast("ReasoningEffort", params.reasoning_effort)
        return kwargs

    def complete(self, messages: list[Message], tools: list[ToolSpec], params: CompletionParams) -> Reply:
        client = self._get_client()
        kwargs = self._request(messages, tools, params)
        try:
            completion = client.chat.completions.create(**kwargs)
        except self._openai.OpenAIError as exc:
            # `from None`: the SDK error's own text can quote the key; ours is scrubbed.
            raise self._map_error(exc, params) from None
        try:
            return reply_from_completion(completion, self.config.id)
        except (AttributeError, TypeError, ValueError) as exc:  # a server that speaks the format loosely
            raise ModelError(f"{self.config.id}: malformed response: {exc}") from exc

    def _map_error(self, exc: Exception, params: CompletionParams) -> ModelError:
        return map_sdk_error(self._openai, exc, self.config, params, self._api_key, "api.openai.com")


def map_sdk_error(
    sdk: Any, exc: Exception, config: ModelConfig, params: CompletionParams, api_key: str | None, host: str
) -> ModelError:
    """SDK exception → ModelError with a retry verdict; the key never appears in the message. The
    `openai` and `anthropic` SDKs share this exception hierarchy, so both adapters use it."""
    where = config.base_url or host
    status: int | None = None
    if isinstance(exc.__cause__, BodyRefused):  # an SDK that wraps what its client raised
        return exc.__cause__
    if isinstance(exc, sdk.APITimeoutError):
        message, retryable = f"timed out after {params.timeout_s:g} s ({where})", True
    elif isinstance(exc, sdk.APIConnectionError):
        cause = f" ({exc.__cause__})" if exc.__cause__ else ""
        message, retryable = f"could not connect to {where}{cause}", True
    elif isinstance(exc, sdk.APIStatusError):
        status = int(exc.status_code)
        detail = error_detail(exc.body, str(exc))
        message, retryable = f"HTTP {status}: {detail}", status_retryable(status)
    else:
        message, retryable = f"{type(exc).__name__}: {exc}", False
    response = getattr(exc, "response", None)
    wait = retry_after(response.headers) if response is not None else None
    return ModelError(
        scrub(f"{config.id}: {message}", api_key), retryable=retryable, status=status, retry_after=wait
    )


def retry_after(headers: Mapping[str, str]) -> float | None:
    """The wait a provider asks for: `retry-after-ms` (OpenAI), else `Retry-After` in seconds or as
    an HTTP date; None when it does not say or says nonsense."""
    try:
        if "retry-after-ms" in headers:
            return max(float(headers["retry-after-ms"]) / 1000, 0.0)
        value = headers.get("retry-after")
        if value is None:
            return None
        if value.strip().replace(".", "", 1).isdigit():
            return float(value)
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max((when - datetime.now(UTC)).total_seconds(), 0.0)
