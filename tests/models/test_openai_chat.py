"""The OpenAI chat adapter against a real HTTP server on 127.0.0.1 that speaks `/v1/chat/completions`:
what goes on the wire (messages, tools, sampling, JSON mode) and how replies and errors come back."""

from __future__ import annotations

import email.utils
import socket
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from sleuth.models.base import CompletionParams, Message, ModelConfig, ModelError, ToolCall, ToolSpec
from sleuth.models.catalog import Catalog, build_model
from sleuth.models.openai_chat import OpenAIChatModel, retry_after
from tests.models.wire import Canned, WireServer, openai_completion, wire_server

KEY = "sk-test-SECRET-0123456789"


@pytest.fixture(autouse=True)
def _no_proxy(monkeypatch: pytest.MonkeyPatch) -> None:
    """The SDK honours proxy variables; the tests talk to 127.0.0.1 only."""
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)


@pytest.fixture
def server() -> Iterator[WireServer]:
    with wire_server(Canned(500, {"error": {"message": "no canned"}}), "/v1") as wire:
        yield wire


def local(url: str, **overrides: Any) -> ModelConfig:
    fields: dict[str, Any] = {
        "id": "local/qwen",
        "provider": "openai-compatible",
        "model": "qwen2.5-coder-1.5b",
        "base_url": url,
        "api_key": KEY,
        "tool_protocol": "text",
    }
    fields.update(overrides)
    return ModelConfig(**fields)


RUN_PYTHON = ToolSpec(
    "run_python",
    "Run Python code in the sandbox.",
    {"type": "object", "properties": {"code": {"type": "string"}}, "required": ["code"]},
)


def test_text_reply_and_request_shape(server: WireServer) -> None:
    server.responses.append(Canned(body=openai_completion("The answer is 42.")))
    model = OpenAIChatModel(local(server.url, temperature=0.0, seed=1))
    reply = model.complete(
        [Message("system", "You are Sleuth."), Message("user", "What is the answer?")], [], CompletionParams()
    )

    assert reply.text == "The answer is 42."
    assert reply.tool_calls == []
    assert reply.model == "local/qwen"
    assert reply.finish_reason == "stop"
    assert (reply.usage.input_tokens, reply.usage.output_tokens, reply.usage.cached_tokens) == (12, 3, 0)

    [request] = server.requests
    assert request.path == "/v1/chat/completions"
    assert request.headers["authorization"] == f"Bearer {KEY}"
    body = request.body
    assert body["model"] == "qwen2.5-coder-1.5b"
    assert body["messages"] == [
        {"role": "system", "content": "You are Sleuth."},
        {"role": "user", "content": "What is the answer?"},
    ]
    assert "tools" not in body  # text-protocol models get no tools
    assert body["temperature"] == 0.0 and body["seed"] == 1  # config values when params give none
    assert body["max_tokens"] == 2048  # local servers: max_tokens
    assert "max_completion_tokens" not in body
    assert "response_format" not in body and "reasoning_effort" not in body


def test_tool_calls_round_trip(server: WireServer) -> None:
    server.responses.append(
        Canned(
            body=openai_completion(
                None,
                tool_calls=[
                    {
                        "id": "call_a",
                        "type": "function",
                        "function": {
                            "name": "run_python",
                            "arguments": '{"code": "print(1)", "commentary": "x"}',
                        },
                    },
                    {
                        "id": "call_b",
                        "type": "function",
                        "function": {"name": "final", "arguments": "{not json"},
                    },
                    {"id": "call_c", "type": "function", "function": {"name": "final", "arguments": ""}},
                ],
                finish_reason="tool_calls",
                usage={
                    "prompt_tokens": 100,
                    "completion_tokens": 20,
                    "total_tokens": 120,
                    "prompt_tokens_details": {"cached_tokens": 64},
                },
            )
        )
    )
    model = OpenAIChatModel(local(server.url, tool_protocol="native"))
    history = [
        Message("system", "rules"),
        Message("user", "q"),
        Message("assistant", "", tool_calls=[ToolCall("call_0", "run_python", {"code": "x = 1"})]),
        Message("tool", "ok", tool_call_id="call_0"),
    ]
    reply = model.complete(history, [RUN_PYTHON], CompletionParams(temperature=0.5, seed=7))

    assert reply.text == ""
    assert reply.finish_reason == "tool_calls"
    assert [(c.id, c.name, c.arguments) for c in reply.tool_calls] == [
        ("call_a", "run_python", {"code": "print(1)", "commentary": "x"}),
        ("call_b", "final", {"_raw": "{not json"}),
        ("call_c", "final", {}),
    ]
    assert (reply.usage.input_tokens, reply.usage.cached_tokens, reply.usage.fresh_tokens) == (100, 64, 36)

    body = server.requests[0].body
    assert body["tools"] == [
        {
            "type": "function",
            "function": {
                "name": "run_python",
                "description": "Run Python code in the sandbox.",
                "parameters": RUN_PYTHON.parameters,
            },
        }
    ]
    assistant, tool = body["messages"][2], body["messages"][3]
    assert assistant["role"] == "assistant" and not assistant.get("content")
    assert assistant["tool_calls"] == [
        {
            "id": "call_0",
            "type": "function",
            "function": {"name": "run_python", "arguments": '{"code": "x = 1"}'},
        }
    ]
    assert tool == {"role": "tool", "tool_call_id": "call_0", "content": "ok"}
    assert body["temperature"] == 0.5 and body["seed"] == 7  # params win over config


def test_json_mode_reasoning_effort_and_hosted_token_limit(server: WireServer) -> None:
    server.responses.append(Canned(body=openai_completion('{"a": 1}')))
    config = ModelConfig(
        id="openai:gpt-x", provider="openai", model="gpt-x", base_url=server.url, api_key=KEY
    )
    reply = OpenAIChatModel(config).complete(
        [Message("user", "JSON please")],
        [],
        CompletionParams(max_tokens=300, json_mode=True, reasoning_effort="low"),
    )
    assert reply.text == '{"a": 1}'
    body = server.requests[0].body
    assert body["response_format"] == {"type": "json_object"}
    assert body["reasoning_effort"] == "low"
    assert body["max_completion_tokens"] == 300 and "max_tokens" not in body
    assert "temperature" not in body and "seed" not in body  # nothing configured, nothing sent


@pytest.mark.parametrize(
    ("status", "retryable"),
    [(429, True), (500, True), (503, True), (400, False), (404, False)],
)
def test_http_errors_map_to_model_error(server: WireServer, status: int, retryable: bool) -> None:
    server.responses.append(Canned(status, {"error": {"message": f"boom {status}", "type": "x"}}))
    with pytest.raises(ModelError) as info:
        OpenAIChatModel(local(server.url)).complete([Message("user", "q")], [], CompletionParams())
    assert info.value.retryable is retryable
    assert info.value.status == status
    assert f"HTTP {status}" in str(info.value) and f"boom {status}" in str(info.value)
    assert "local/qwen" in str(info.value)
    assert len(server.requests) == 1  # the SDK does not retry by itself: fallback owns that


@pytest.mark.parametrize(
    ("headers", "wait"),
    [({"retry-after": "7"}, 7.0), ({"retry-after-ms": "1500", "retry-after": "9"}, 1.5), ({}, None),
     ({"retry-after": "soon"}, None)],
)  # fmt: skip
def test_a_rate_limit_says_how_long_to_wait(
    server: WireServer, headers: dict[str, str], wait: float | None
) -> None:
    server.responses.append(Canned(429, {"error": {"message": "slow down", "type": "x"}}, headers=headers))
    with pytest.raises(ModelError) as info:
        OpenAIChatModel(local(server.url)).complete([Message("user", "q")], [], CompletionParams())
    assert info.value.retryable and info.value.retry_after == wait


def test_retry_after_as_an_http_date() -> None:
    when = email.utils.format_datetime(datetime.now(UTC) + timedelta(seconds=20), usegmt=True)
    wait = retry_after({"retry-after": when})
    assert wait is not None and 15 < wait <= 20
    assert retry_after({"retry-after": "Mon, 01 Jan 2001 00:00:00 GMT"}) == 0.0  # already past


def test_error_never_leaks_the_key(server: WireServer) -> None:
    server.responses.append(Canned(401, {"error": {"message": f"Incorrect API key provided: {KEY}"}}))
    with pytest.raises(ModelError) as info:
        OpenAIChatModel(local(server.url)).complete([Message("user", "q")], [], CompletionParams())
    assert KEY not in str(info.value)
    assert "***" in str(info.value)
    assert info.value.retryable is False and info.value.status == 401


def test_timeout_is_retryable(server: WireServer) -> None:
    server.responses.append(Canned(body=openai_completion(), delay_s=4.0))
    started = time.monotonic()
    with pytest.raises(ModelError) as info:
        OpenAIChatModel(local(server.url)).complete(
            [Message("user", "q")], [], CompletionParams(timeout_s=0.2)
        )
    assert time.monotonic() - started < 3.5  # gave up at 0.2 s, not after the 4 s reply (generous)
    assert info.value.retryable is True and info.value.status is None
    assert "timed out" in str(info.value)


def test_connection_refused_is_retryable() -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]  # closed when the block ends: nothing listens there
    with pytest.raises(ModelError) as info:
        OpenAIChatModel(local(f"http://127.0.0.1:{port}/v1")).complete(
            [Message("user", "q")], [], CompletionParams(timeout_s=2)
        )
    assert info.value.retryable is True
    assert "could not connect" in str(info.value)


def test_missing_key_fails_the_call_not_the_build(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("SLEUTH_TEST_NO_SUCH_KEY", raising=False)
    config = ModelConfig(
        id="openai:gpt-x", provider="openai", model="gpt-x", api_key_env="SLEUTH_TEST_NO_SUCH_KEY"
    )
    model = OpenAIChatModel(config)
    with pytest.raises(ModelError, match="SLEUTH_TEST_NO_SUCH_KEY") as info:
        model.complete([Message("user", "q")], [], CompletionParams())
    assert info.value.retryable is False


def test_key_from_environment(server: WireServer, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SLEUTH_TEST_KEY", "env-key-123")
    server.responses.append(Canned(body=openai_completion()))
    config = local(server.url, api_key=None, api_key_env="SLEUTH_TEST_KEY")
    OpenAIChatModel(config).complete([Message("user", "q")], [], CompletionParams())
    assert server.requests[0].headers["authorization"] == "Bearer env-key-123"


def test_tool_message_needs_its_call_id(server: WireServer) -> None:
    with pytest.raises(ModelError, match="tool_call_id"):
        OpenAIChatModel(local(server.url)).complete([Message("tool", "orphan")], [], CompletionParams())
    assert server.requests == []


def test_build_model_sends_the_key_resolved_from_env(server: WireServer, tmp_path: Path) -> None:
    """A catalog entry naming `api_key_env` reaches the server with that variable's value."""
    (tmp_path / "config.toml").write_text(
        f'[models."hosted"]\nprovider = "openai"\nmodel = "gpt-x"\nbase_url = "{server.url}"\n'
        'api_key_env = "TEAM_OPENAI_KEY"\n',
        encoding="utf-8",
    )
    env = {"TEAM_OPENAI_KEY": "team-key-456"}
    catalog = Catalog.load(tmp_path, env=env)
    server.responses.append(Canned(body=openai_completion("hi")))
    reply = build_model(catalog.resolve("hosted"), env=env).complete(
        [Message("user", "q")], [], CompletionParams()
    )
    assert reply.text == "hi" and reply.model == "hosted"
    assert server.requests[0].headers["authorization"] == "Bearer team-key-456"
