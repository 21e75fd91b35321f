"""Reply parsing, the reserved-name check and the context-window elision (spec/runtime.md §4.1, §4.2, §12)."""

from __future__ import annotations

import ast
import threading
import time
from typing import Any

import pytest

from sleuth.agent.actions import parse_reply, reserved_binding
from sleuth.agent.loop import AgentLoop, LoopSettings
from sleuth.agent.repeats import code_key
from sleuth.models.base import Message, ModelConfig, Reply, ToolCall


def test_text_protocol_joins_fenced_blocks_and_takes_the_first_prose_line() -> None:
    reply = Reply(
        "Count the products first.\nThen search.\n```python\nrows = query_db('SELECT 1')\n```\n"
        "and\n```\nprint(rows)\n```\n```repl\nprint(2)\n```"
    )
    action = parse_reply(reply, "text")
    assert action.kind == "code"
    assert action.code == "rows = query_db('SELECT 1')\nprint(rows)\nprint(2)"
    assert action.commentary == "Count the products first."


def test_text_protocol_commentary_falls_back_to_the_first_comment() -> None:
    action = parse_reply(Reply("```python\n# look at tables\nprint(list_tables())\n```"), "text")
    assert action.commentary == "look at tables"


def test_a_reply_without_code_is_the_draft_answer() -> None:
    action = parse_reply(Reply("The answer is 42."), "text")
    assert (action.kind, action.answer) == ("none", "The answer is 42.")
    native = parse_reply(Reply("Plain text, no tool call."), "native")
    assert native.kind == "none"


def test_native_calls_run_in_order_as_one_step_and_final_after_code_is_kept() -> None:
    reply = Reply(
        "",
        [
            ToolCall("a", "run_python", {"code": "x = 1", "commentary": "set x"}),
            ToolCall("b", "run_python", {"code": "print(x)"}),
            ToolCall("c", "final", {"evidence": ["E1"]}),
        ],
    )
    action = parse_reply(reply, "native")
    assert action.kind == "code" and action.commentary == "set x"
    assert action.code == "x = 1\nprint(x)\nfinal(answer=None, evidence=['E1'])"
    assert action.tool_call_ids == ["a", "b", "c"]
    only_final = parse_reply(
        Reply("", [ToolCall("d", "final", {"answer": "done", "evidence": ["E2"]})]), "native"
    )
    assert (only_final.kind, only_final.answer, only_final.evidence) == ("final", "done", ["E2"])


def test_malformed_native_calls_become_a_problem_for_the_model() -> None:
    bad_args = parse_reply(Reply("", [ToolCall("a", "run_python", {"_raw": "{not json"})]), "native")
    assert bad_args.problem is not None and "could not parse" in bad_args.problem
    unknown = parse_reply(Reply("", [ToolCall("a", "shell", {"cmd": "ls"})]), "native")
    assert unknown.problem is not None and "unknown tool 'shell'" in unknown.problem


@pytest.mark.parametrize(
    ("code", "name"),
    [
        ("search_source = lambda q: []", "search_source"),
        ("def query_db(sql):\n    return []", "query_db"),
        ("async def search_knowledge(q):\n    pass", "search_knowledge"),
        ("class final:\n    pass", "final"),
        ("import json as read_artifact", "read_artifact"),
        ("from os import path as walk_graph", "walk_graph"),
        ("for answer in range(3):\n    pass", "answer"),
        ("answer = 42", "answer"),
        ("x, get_fact = 1, 2", "get_fact"),
        ("with open('f') as list_tables:\n    pass", "list_tables"),
    ],
)
def test_binding_a_reserved_name_is_caught(code: str, name: str) -> None:
    assert reserved_binding(code) == name


@pytest.mark.parametrize(
    "code",
    [
        "hits = await search_source('x')",
        "rows = query_db('SELECT 1')\nprint(rows)",
        "final(evidence=['E1'])",
        "def helper(q):\n    return search_source(q)",
        "this is not python (",
    ],
)
def test_calling_sdk_names_is_fine(code: str) -> None:
    assert reserved_binding(code) is None


class _Window:
    config = ModelConfig(id="tiny", provider="scripted", model="tiny", context_window=600)

    def complete(self, *args: object) -> Reply:
        raise AssertionError("not called")


def test_the_oldest_observations_are_elided_when_the_window_is_full() -> None:
    messages = [
        Message("system", "s" * 400),
        Message("user", "question"),
        Message("assistant", "", [ToolCall("1", "run_python", {"code": "print(1)"})]),
        Message("tool", "a" * 1200, tool_call_id="1"),
        Message("assistant", "", [ToolCall("2", "run_python", {"code": "print(2)"})]),
        Message("tool", "b" * 600, tool_call_id="2"),
    ]
    loop = AgentLoop(
        _Window(),
        None,  # type: ignore[arg-type]
        messages,
        LoopSettings(max_reply_tokens=100),
        deadline=0.0,
        emit=lambda step: None,
        restart_sandbox=lambda: None,  # type: ignore[arg-type,return-value]
        resolve_span=lambda report: None,
    )
    loop._fit_context_window()
    assert messages[3].content == "[observation elided: 1,200 chars]"
    assert messages[3].tool_call_id == "1"
    assert messages[5].content == "b" * 600  # the newest observation stays once the rest fits
    assert messages[2].tool_calls[0].arguments == {"code": "print(1)"}  # code is kept


def test_turns_on_many_threads_never_parse_at_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 42, item 8: CPython keeps the AST constructor's recursion depth per interpreter, so two
    threads inside `ast.parse` at once can fail one of them with `SystemError: AST constructor
    recursion depth mismatch` (python/cpython#106905; 2 of 522 turns on a server's threads). The real
    parse runs here (the reserved-name check's and the repeat check's), widened by a short sleep so that
    threads meet inside it: with the parse left
    unserialised, several are inside at once (the test fails); serialised, never more than one."""
    parse = ast.parse
    inside = 0
    most = 0
    count = threading.Lock()

    def watched(source: str, *args: Any, **kwargs: Any) -> ast.Module:
        nonlocal inside, most
        with count:
            inside += 1
            most = max(most, inside)
        try:
            time.sleep(0.005)
            tree: ast.Module = parse(source, *args, **kwargs)
            return tree
        finally:
            with count:
                inside -= 1

    monkeypatch.setattr(ast, "parse", watched)
    codes = [f"x{i} = [n * {i} for n in range(3)]\nprint(x{i})" for i in range(8)]
    start = threading.Barrier(len(codes))

    def turn(code: str) -> None:
        start.wait()
        for _ in range(5):
            assert reserved_binding(code) is None
            assert code_key(code)  # issue 46's repeat check parses the same code, under the same lock

    threads = [threading.Thread(target=turn, args=(code,)) for code in codes]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert most == 1
