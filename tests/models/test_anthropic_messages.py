"""The Anthropic adapter against a real HTTP server on 127.0.0.1 that speaks `/v1/messages`: system
placement and caching, tool_use / tool_result translation, usage accounting and error mapping."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from sleuth.models.anthropic_messages import JSON_INSTRUCTION, AnthropicModel
from sleuth.models.base import CompletionParams, Message, ModelConfig, ModelError, ToolCall, ToolSpec
from tests.models.wire import Canned, WireServer, wire_server

KEY = "sk-ant-test-SECRET-987654321"


@pytest.fixture(autouse=True)
def _no_proxy(monkeypatch: pytest.MonkeyPatch) -> None:
    """The SDK honours proxy and credential variables; the tests talk to 127.0.0.1 with their own key."""
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy"):
        monkeypatch.delenv(name, raising=False)
    for name in ("ANTHROPIC_BASE_URL", "ANTHROPIC_AUTH_TOKEN"):
        monkeypatch.delenv(name, raising=False)


@pytest.fixture
def server() -> Iterator[WireServer]:
    with wire_server(Canned(500, error_body("api_error", "none")), "") as wire:
        yield wire


def error_body(kind: str, message: str) -> dict[str, Any]:
    return {"type": "error", "error": {"type": kind, "message": message}}


def message_body(
    content: list[dict[str, Any]], stop_reason: str = "end_turn", usage: dict[str, Any] | None = None
) -> dict[str, Any]:
    return {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "model": "claude-test",
        "content": content,
        "stop_reason": stop_reason,
        "stop_sequence": None,
        "usage": usage or {"input_tokens": 10, "output_tokens": 2},
    }


def config(url: str, **overrides: Any) -> ModelConfig:
    fields: dict[str, Any] = {
        "id": "anthropic:claude-test",
        "provider": "anthropic",
        "model": "claude-test",
        "base_url": url,
        "api_key": KEY,
        "temperature": 0.0,
        "seed": 3,
    }
    fields.update(overrides)
    return ModelConfig(**fields)


RUN_PYTHON = ToolSpec(
    "run_python",
    "Run Python code in the sandbox.",
    {"type": "object", "properties": {"code": {"type": "string"}}, "required": ["code"]},
)


def test_translation_of_a_tool_conversation(server: WireServer) -> None:
    server.responses.append(
        Canned(
            body=message_body(
                [
                    {"type": "text", "text": "Let me look."},
                    {
                        "type": "tool_use",
                        "id": "toolu_9",
                        "name": "run_python",
                        "input": {"code": "print(2)"},
                    },
                ],
                stop_reason="tool_use",
                usage={
                    "input_tokens": 10,
                    "output_tokens": 5,
                    "cache_read_input_tokens": 100,
                    "cache_creation_input_tokens": 20,
                },
            )
        )
    )
    history = [
        Message("system", "Rules."),
        Message("system", "Context descriptions."),
        Message("user", "How much?"),
        Message(
            "assistant",
            "Two things at once.",
            tool_calls=[
                ToolCall("toolu_1", "run_python", {"code": "a()"}),
                ToolCall("toolu_2", "run_python", {"code": "b()"}),
            ],
        ),
        Message("tool", "result a", tool_call_id="toolu_1"),
        Message("tool", "result b", tool_call_id="toolu_2"),
    ]
    reply = AnthropicModel(config(server.url)).complete(
        history, [RUN_PYTHON], CompletionParams(max_tokens=512)
    )

    assert reply.text == "Let me look."
    assert [(c.id, c.name, c.arguments) for c in reply.tool_calls] == [
        ("toolu_9", "run_python", {"code": "print(2)"})
    ]
    assert reply.finish_reason == "tool_use"
    assert reply.model == "anthropic:claude-test"
    # input_tokens is the total input, as for OpenAI; the cache split is kept beside it.
    assert (reply.usage.input_tokens, reply.usage.output_tokens) == (130, 5)
    assert (reply.usage.cached_tokens, reply.usage.cache_write_tokens, reply.usage.fresh_tokens) == (
        100,
        20,
        10,
    )

    [request] = server.requests
    assert request.path == "/v1/messages"
    assert KEY in (request.headers.get("x-api-key", "") + request.headers.get("authorization", ""))
    body = request.body
    assert body["model"] == "claude-test" and body["max_tokens"] == 512
    assert body["system"] == [
        {"type": "text", "text": "Rules.\n\nContext descriptions.", "cache_control": {"type": "ephemeral"}}
    ]
    assert body["tools"] == [
        {
            "name": "run_python",
            "description": "Run Python code in the sandbox.",
            "input_schema": RUN_PYTHON.parameters,
        }
    ]
    user, assistant, results = body["messages"]
    assert user == {"role": "user", "content": [{"type": "text", "text": "How much?"}]}
    assert assistant == {
        "role": "assistant",
        "content": [
            {"type": "text", "text": "Two things at once."},
            {"type": "tool_use", "id": "toolu_1", "name": "run_python", "input": {"code": "a()"}},
            {"type": "tool_use", "id": "toolu_2", "name": "run_python", "input": {"code": "b()"}},
        ],
    }
    # Consecutive tool results travel in one user message; the newest block carries a cache breakpoint.
    assert results == {
        "role": "user",
        "content": [
            {"type": "tool_result", "tool_use_id": "toolu_1", "content": "result a"},
            {
                "type": "tool_result",
                "tool_use_id": "toolu_2",
                "content": "result b",
                "cache_control": {"type": "ephemeral"},
            },
        ],
    }
    # The API version the SDK speaks rejects sampling settings, so none are sent.
    assert "temperature" not in body and "seed" not in body
    assert "output_config" not in body


def test_no_tools_json_mode_and_effort(server: WireServer) -> None:
    server.responses.append(Canned(body=message_body([{"type": "text", "text": '{"ok": true}'}])))
    reply = AnthropicModel(config(server.url)).complete(
        [Message("system", "Rules."), Message("user", "Give JSON.")],
        [],
        CompletionParams(json_mode=True, reasoning_effort="minimal"),
    )
    assert reply.text == '{"ok": true}'
    assert (reply.usage.input_tokens, reply.usage.cached_tokens) == (10, 0)
    body = server.requests[0].body
    assert "tools" not in body
    # The cached system block stays byte-identical; the JSON instruction follows it, uncached.
    assert body["system"] == [
        {"type": "text", "text": "Rules.", "cache_control": {"type": "ephemeral"}},
        {"type": "text", "text": JSON_INSTRUCTION},
    ]
    assert body["output_config"] == {"effort": "low"}


def test_without_system_messages_no_system_is_sent(server: WireServer) -> None:
    server.responses.append(Canned(body=message_body([{"type": "text", "text": "hi"}])))
    AnthropicModel(config(server.url)).complete([Message("user", "hello")], [], CompletionParams())
    assert "system" not in server.requests[0].body


@pytest.mark.parametrize(
    ("status", "kind", "retryable"),
    [
        (429, "rate_limit_error", True),
        (500, "api_error", True),
        (529, "overloaded_error", True),
        (400, "invalid_request_error", False),
        (403, "permission_error", False),
    ],
)
def test_http_errors_map_to_model_error(server: WireServer, status: int, kind: str, retryable: bool) -> None:
    server.responses.append(Canned(status, error_body(kind, f"failure {status}")))
    with pytest.raises(ModelError) as info:
        AnthropicModel(config(server.url)).complete([Message("user", "q")], [], CompletionParams())
    assert info.value.retryable is retryable
    assert info.value.status == status
    assert f"HTTP {status}: failure {status}" in str(info.value)
    assert len(server.requests) == 1  # the SDK does not retry by itself


def test_a_rate_limit_carries_retry_after(server: WireServer) -> None:
    server.responses.append(Canned(429, error_body("rate_limit_error", "slow"), headers={"retry-after": "4"}))
    with pytest.raises(ModelError) as info:
        AnthropicModel(config(server.url)).complete([Message("user", "q")], [], CompletionParams())
    assert info.value.retryable and info.value.retry_after == 4.0
    assert len(server.requests) == 1  # waiting is the fallback's call, not the SDK's


def test_error_never_leaks_the_key(server: WireServer) -> None:
    server.responses.append(Canned(401, error_body("authentication_error", f"invalid x-api-key {KEY}")))
    with pytest.raises(ModelError) as info:
        AnthropicModel(config(server.url)).complete([Message("user", "q")], [], CompletionParams())
    assert KEY not in str(info.value)
    assert info.value.retryable is False and info.value.status == 401


def test_timeout_is_retryable(server: WireServer) -> None:
    server.responses.append(Canned(body=message_body([{"type": "text", "text": "late"}]), delay_s=1.0))
    with pytest.raises(ModelError) as info:
        AnthropicModel(config(server.url)).complete(
            [Message("user", "q")], [], CompletionParams(timeout_s=0.2)
        )
    assert info.value.retryable is True and "timed out" in str(info.value)


def test_missing_key_fails_the_call(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("SLEUTH_TEST_NO_SUCH_KEY", raising=False)
    model = AnthropicModel(config("http://127.0.0.1:9", api_key=None, api_key_env="SLEUTH_TEST_NO_SUCH_KEY"))
    with pytest.raises(ModelError, match="no API key") as info:
        model.complete([Message("user", "q")], [], CompletionParams())
    assert info.value.retryable is False
