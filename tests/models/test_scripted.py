"""The scripted model: replies in order, native or text actions, recorded calls, deterministic usage,
scripted failures, and replay of recorded replies."""

from __future__ import annotations

import math

import pytest

from sleuth.models.base import CompletionParams, Message, ModelError, Reply, TokenUsage, ToolCall, ToolSpec
from sleuth.models.scripted import ScriptedModel, code, final_call

PARAMS = CompletionParams()
TOOLS = [ToolSpec("run_python", "Run code.", {"type": "object"})]


def ask(model: ScriptedModel, text: str = "question") -> Reply:
    return model.complete([Message("system", "rules"), Message("user", text)], TOOLS, PARAMS)


def test_native_actions_and_text_in_order() -> None:
    model = ScriptedModel(
        [code("print(1)", "look first"), "just text", final_call("42", ["S1"]), final_call()]
    )
    first = ask(model)
    assert first.text == ""
    assert first.tool_calls == [
        ToolCall("call_1", "run_python", {"code": "print(1)", "commentary": "look first"})
    ]
    assert first.finish_reason == "tool_calls"
    assert ask(model).text == "just text"
    assert ask(model).tool_calls == [ToolCall("call_3", "final", {"answer": "42", "evidence": ["S1"]})]
    assert ask(model).tool_calls == [ToolCall("call_4", "final", {})]
    assert model.remaining == 0


def test_plain_dict_items() -> None:
    model = ScriptedModel([{"code": "x = 1"}, {"final": {"answer": "done"}}])
    assert ask(model).tool_calls[0].arguments == {"code": "x = 1"}  # no empty commentary
    assert ask(model).tool_calls[0].arguments == {"answer": "done"}


def test_text_protocol_writes_fenced_code() -> None:
    model = ScriptedModel(
        [code("print(1)\n", "Check the table."), code("x = 2"), final_call("42", ["S1"])],
        tool_protocol="text",
    )
    assert model.config.tool_protocol == "text"
    first = ask(model)
    assert first.tool_calls == []
    assert first.text == "Check the table.\n\n```python\nprint(1)\n```"
    assert ask(model).text == "```python\nx = 2\n```"
    assert ask(model).text == "```python\nfinal(answer='42', evidence=['S1'])\n```"


def test_usage_is_deterministic_and_nonzero() -> None:
    model = ScriptedModel(["abcdefghij"], model_id="scripted/x")
    reply = model.complete([Message("user", "12345")], [], PARAMS)
    assert reply.usage == TokenUsage(input_tokens=math.ceil(5 / 4), output_tokens=math.ceil(10 / 4))
    assert reply.model == "scripted/x"
    empty = ScriptedModel([""]).complete([Message("user", "")], [], PARAMS)
    assert empty.usage.input_tokens == 1 and empty.usage.output_tokens == 1


def test_calls_are_recorded_as_copies() -> None:
    model = ScriptedModel(["a"])
    conversation = [Message("user", "first")]
    params = CompletionParams(max_tokens=99, json_mode=True)
    model.complete(conversation, TOOLS, params)
    conversation.append(Message("assistant", "later"))
    conversation[0].content = "changed"
    [call] = model.calls
    assert [m.content for m in call.messages] == ["first"]
    assert call.tools == TOOLS and call.params is params


def test_exhaustion_and_scripted_errors() -> None:
    boom = ModelError("HTTP 503: busy", retryable=True, status=503)
    model = ScriptedModel([boom, "after the error"])
    with pytest.raises(ModelError) as info:
        ask(model)
    assert info.value is boom
    assert ask(model).text == "after the error"
    with pytest.raises(ModelError, match="scripted model has no more replies") as exhausted:
        ask(model)
    assert exhausted.value.retryable is False
    assert len(model.calls) == 3  # even the failing calls are recorded


def test_replay_of_recorded_replies() -> None:
    recorded = [
        Reply(
            text="",
            tool_calls=[ToolCall("call_x", "run_python", {"code": "search('q')"})],
            usage=TokenUsage(100, 10, 50, 0),
            model="openai:gpt-4.1",
            finish_reason="tool_calls",
        ),
        Reply(
            text="The answer [S1].", usage=TokenUsage(200, 20), model="openai:gpt-4.1", finish_reason="stop"
        ),
    ]
    model = ScriptedModel([r.to_json() for r in recorded])
    replayed = [ask(model), ask(model)]
    assert replayed == recorded  # usage and answering model kept as recorded


def test_reply_items_are_copied_so_a_script_can_run_twice() -> None:
    item = Reply(text="same")
    script = [item, item]
    model = ScriptedModel(script, model_id="scripted/a")
    first, second = ask(model), ask(model)
    assert first == second and first is not item
    assert item.model == "" and item.usage == TokenUsage()  # the script item is untouched


def test_unknown_item_is_an_error() -> None:
    with pytest.raises(ValueError, match="unknown script item"):
        ask(ScriptedModel([{"nonsense": 1}]))
