"""A scripted model: returns given replies in order. Tests drive the agent loop with it, and
deterministic replay (spec/runtime.md §11) feeds it a turn's recorded replies (`Reply.to_json` dicts).

Script items:
- a `Reply`, returned as is (usage computed when it has none, `model` filled when empty);
- a `str`: a plain text reply;
- `code(src, commentary)` / `{"code": ..., "commentary": ...}`: a `run_python` action;
- `final_call(answer, evidence)` / `{"final": {...}}`: a `final` action;
- a recorded reply dict (`{"text": ..., "tool_calls": [...], ...}`): `Reply.from_json`;
- an exception (normally a `ModelError`): raised at that position, e.g. to exercise fallback.

Actions follow the model's `tool_protocol`: native tool calls, or for `text` the fenced code a
text-protocol model would write (spec/runtime.md §4.1).
"""

from __future__ import annotations

import copy
import json
import math
import threading
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, TypeAlias

from sleuth.models.base import (
    CompletionParams,
    Message,
    ModelConfig,
    ModelError,
    Reply,
    TokenUsage,
    ToolCall,
    ToolProtocol,
    ToolSpec,
)

ScriptItem: TypeAlias = Reply | str | dict[str, Any] | BaseException


def code(src: str, commentary: str = "") -> dict[str, Any]:
    """A `run_python` action for a script."""
    return {"code": src, "commentary": commentary}


def final_call(answer: str | None = None, evidence: list[str] | None = None) -> dict[str, Any]:
    """A `final` action for a script; absent arguments are left out, as a model would."""
    arguments: dict[str, Any] = {}
    if answer is not None:
        arguments["answer"] = answer
    if evidence is not None:
        arguments["evidence"] = list(evidence)
    return {"final": arguments}


@dataclass(frozen=True)
class ScriptedCall:
    """What one `complete` call received (deep copies: the loop mutates its conversation later)."""

    messages: list[Message]
    tools: list[ToolSpec]
    params: CompletionParams


def _tokens(chars: int) -> int:
    """ceil(chars / 4), at least 1: deterministic and never zero, so cost accounting is exercised."""
    return max(1, math.ceil(chars / 4))


def _prompt_chars(messages: list[Message]) -> int:
    total = 0
    for message in messages:
        total += len(message.content)
        total += sum(len(json.dumps(c.arguments)) for c in message.tool_calls)
    return total


def _reply_chars(reply: Reply) -> int:
    return len(reply.text) + sum(len(json.dumps(c.arguments)) for c in reply.tool_calls)


class ScriptedModel:
    """`Model` whose replies are fixed in advance; records every call in `.calls`."""

    def __init__(
        self,
        replies: Iterable[ScriptItem],
        model_id: str = "scripted/test",
        tool_protocol: ToolProtocol = "native",
    ) -> None:
        self.config = ModelConfig(
            id=model_id, provider="scripted", model=model_id, tool_protocol=tool_protocol
        )
        self.replies: list[ScriptItem] = list(replies)
        self.calls: list[ScriptedCall] = []
        self._next = 0
        self._lock = threading.Lock()

    @property
    def remaining(self) -> int:
        """Script items not yet used."""
        return len(self.replies) - self._next

    def complete(self, messages: list[Message], tools: list[ToolSpec], params: CompletionParams) -> Reply:
        with self._lock:
            self.calls.append(ScriptedCall(copy.deepcopy(messages), list(tools), params))
            if self._next >= len(self.replies):
                raise ModelError("scripted model has no more replies")
            item = self.replies[self._next]
            self._next += 1
            number = self._next
        if isinstance(item, BaseException):
            raise item
        reply = self._to_reply(item, number)
        if reply.usage == TokenUsage():
            reply.usage = TokenUsage(
                input_tokens=_tokens(_prompt_chars(messages)), output_tokens=_tokens(_reply_chars(reply))
            )
        if not reply.model:
            reply.model = self.config.id
        return reply

    def _to_reply(self, item: Reply | str | dict[str, Any], number: int) -> Reply:
        """One script item as a fresh Reply (copied, so a script can be replayed twice)."""
        if isinstance(item, Reply):
            return copy.deepcopy(item)
        if isinstance(item, str):
            return Reply(text=item, finish_reason="stop")
        if "code" in item:
            return self._action("run_python", _code_arguments(item), number)
        if "final" in item:
            return self._action("final", dict(item["final"] or {}), number)
        if "text" in item or "tool_calls" in item:
            return Reply.from_json(item)
        raise ValueError(f"unknown script item: {item!r}")

    def _action(self, name: str, arguments: dict[str, Any], number: int) -> Reply:
        if self.config.tool_protocol == "native":
            return Reply(
                text="", tool_calls=[ToolCall(f"call_{number}", name, arguments)], finish_reason="tool_calls"
            )
        return Reply(text=_as_text(name, arguments), finish_reason="stop")


def _code_arguments(item: dict[str, Any]) -> dict[str, Any]:
    arguments: dict[str, Any] = {"code": item["code"]}
    if item.get("commentary"):
        arguments["commentary"] = item["commentary"]
    return arguments


def _as_text(name: str, arguments: dict[str, Any]) -> str:
    """What a text-protocol model writes for the action: commentary, then one fenced python block."""
    if name == "run_python":
        body = arguments["code"].rstrip("\n")
        commentary = arguments.get("commentary", "")
        fenced = f"```python\n{body}\n```"
        return f"{commentary}\n\n{fenced}" if commentary else fenced
    args = ", ".join(f"{key}={value!r}" for key, value in arguments.items())
    return f"```python\nfinal({args})\n```"
