"""Fallback across models (spec/runtime.md §12): retry retryable errors twice (1 s, 2 s), then move on;
non-retryable errors move on at once; when all fail, say which model failed how."""

from __future__ import annotations

import socket

import pytest

from sleuth.models.base import CompletionParams, Message, ModelConfig, ModelError
from sleuth.models.fallback import MAX_RETRY_AFTER_S, FallbackModel
from sleuth.models.openai_chat import OpenAIChatModel
from sleuth.models.scripted import ScriptedModel

ASK = [Message("user", "q")]


def busy(status: int = 429, retry_after: float | None = None) -> ModelError:
    return ModelError(f"HTTP {status}: busy", retryable=True, status=status, retry_after=retry_after)


def denied() -> ModelError:
    return ModelError("HTTP 400: bad request", retryable=False, status=400)


class Sleeps(list[float]):
    """Records the delays instead of sleeping, so the tests take no time."""

    def __call__(self, seconds: float) -> None:
        self.append(seconds)


def test_first_model_answers() -> None:
    first, second = ScriptedModel(["one"], model_id="m/first"), ScriptedModel(["two"], model_id="m/second")
    sleeps = Sleeps()
    model = FallbackModel([first, second], sleep=sleeps)
    reply = model.complete(ASK, [], CompletionParams())
    assert (reply.text, reply.model) == ("one", "m/first")
    assert sleeps == [] and second.calls == []
    assert model.config is first.config


def test_retryable_errors_are_retried_twice_with_backoff() -> None:
    first = ScriptedModel([busy(), busy(503), "third time lucky"], model_id="m/first")
    sleeps = Sleeps()
    reply = FallbackModel([first, ScriptedModel([], model_id="m/second")], sleep=sleeps).complete(
        ASK, [], CompletionParams()
    )
    assert (reply.text, reply.model) == ("third time lucky", "m/first")
    assert sleeps == [1.0, 2.0]
    assert len(first.calls) == 3


def test_after_three_retryable_failures_the_next_model_answers() -> None:
    first = ScriptedModel([busy(), busy(), busy(), "never reached"], model_id="m/first")
    second = ScriptedModel(["from second"], model_id="m/second")
    sleeps = Sleeps()
    reply = FallbackModel([first, second], sleep=sleeps).complete(ASK, [], CompletionParams())
    assert (reply.text, reply.model) == ("from second", "m/second")
    assert sleeps == [1.0, 2.0]
    assert len(first.calls) == 3 and len(second.calls) == 1


def test_non_retryable_error_moves_on_at_once() -> None:
    first = ScriptedModel([denied()], model_id="m/first")
    second = ScriptedModel(["ok"], model_id="m/second")
    sleeps = Sleeps()
    reply = FallbackModel([first, second], sleep=sleeps).complete(ASK, [], CompletionParams())
    assert reply.model == "m/second" and sleeps == []


def test_reply_model_is_the_answering_models_id() -> None:
    inner = ScriptedModel(["x"], model_id="scripted/inner")
    reply = FallbackModel([inner]).complete(ASK, [], CompletionParams())
    assert reply.model == "scripted/inner"


def test_all_failing_names_each_model_and_its_last_error() -> None:
    first = ScriptedModel([busy(), busy(), busy(500)], model_id="m/first")
    second = ScriptedModel([denied()], model_id="m/second")
    sleeps = Sleeps()
    with pytest.raises(ModelError) as info:
        FallbackModel([first, second], sleep=sleeps).complete(ASK, [], CompletionParams())
    message = str(info.value)
    assert "m/first: HTTP 500: busy" in message
    assert "m/second: HTTP 400: bad request" in message
    assert info.value.retryable is False
    assert sleeps == [1.0, 2.0]


def test_needs_a_model() -> None:
    with pytest.raises(ValueError):
        FallbackModel([])


def test_real_adapter_failure_falls_back(monkeypatch: pytest.MonkeyPatch) -> None:
    """An unreachable local server (connection refused: retryable) is retried, then the next model."""
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy"):
        monkeypatch.delenv(name, raising=False)
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    down = OpenAIChatModel(
        ModelConfig(
            id="local/down", provider="openai-compatible", model="m", base_url=f"http://127.0.0.1:{port}/v1"
        )
    )
    backup = ScriptedModel(["backup answer"], model_id="scripted/backup")
    sleeps = Sleeps()
    reply = FallbackModel([down, backup], sleep=sleeps).complete(ASK, [], CompletionParams(timeout_s=2))
    assert (reply.text, reply.model) == ("backup answer", "scripted/backup")
    assert sleeps == [1.0, 2.0]


def test_the_wait_a_provider_asks_for_is_honoured_up_to_a_limit() -> None:
    first = ScriptedModel([busy(retry_after=5.0), busy(retry_after=0.5), "after waiting"], model_id="m/first")
    sleeps = Sleeps()
    reply = FallbackModel([first], sleep=sleeps).complete(ASK, [], CompletionParams())
    assert reply.text == "after waiting" and sleeps == [5.0, 0.5]
    # asked to wait longer than MAX_RETRY_AFTER_S: the next model answers now
    slow = ScriptedModel([busy(retry_after=MAX_RETRY_AFTER_S + 1), "never"], model_id="m/slow")
    sleeps = Sleeps()
    reply = FallbackModel([slow, ScriptedModel(["now"], model_id="m/next")], sleep=sleeps).complete(
        ASK, [], CompletionParams()
    )
    assert (reply.text, reply.model, sleeps) == ("now", "m/next", [])
