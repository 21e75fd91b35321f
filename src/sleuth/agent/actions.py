"""From a model reply to an action (spec/runtime.md §4.1–4.2): run code, or finish.

Native models call the `run_python` and `final` tools; text-protocol models write fenced code
blocks and call `final(...)` inside them, or reply without code. Code that would rebind an SDK name
is refused before it runs, because a model that shadows `search_source` with a stub silently stops
searching (spec/local-llm.md §6).
"""

from __future__ import annotations

import ast
import re
import threading
from dataclasses import dataclass, field
from typing import Any, Literal

from sleuth.models.base import Reply, ToolSpec
from sleuth.sdk.knowledge import PRIMITIVES

SDK_NAMES = PRIMITIVES  # the names code must call, never bind
RESERVED = (*SDK_NAMES, "final", "answer")
COMMENTARY_LIMIT = 200

RUN_PYTHON = ToolSpec(
    name="run_python",
    description=(
        "Run Python in the persistent REPL that has the retrieval SDK bound. Only printed output comes "
        "back. Variables persist between calls."
    ),
    parameters={
        "type": "object",
        "properties": {
            "code": {
                "type": "string",
                "description": (
                    "Python source, run as it is; top-level await is allowed. Send the code itself: do "
                    "not define run_python, and do not import the SDK (its functions are already defined)."
                ),
            },
            "commentary": {"type": "string", "description": "One line: what this step does and why."},
        },
        "required": ["code"],
    },
)
FINAL = ToolSpec(
    name="final",
    description="Finish: the evidence is in hand. Synthesis writes the cited answer from it.",
    parameters={
        "type": "object",
        "properties": {
            "answer": {"type": "string", "description": "A draft answer to check against the evidence."},
            "evidence": {
                "type": "array",
                "items": {"type": "string"},
                "description": "Evidence labels such as E7 to cite first.",
            },
        },
    },
)
TOOLS = [RUN_PYTHON, FINAL]

_FENCE = re.compile(r"```[ \t]*(python|py|repl)?[ \t]*\n(.*?)```", re.DOTALL | re.IGNORECASE)


@dataclass
class Action:
    kind: Literal["code", "final", "none"]
    code: str = ""
    commentary: str = ""
    answer: str | None = None
    evidence: list[str] = field(default_factory=list)
    tool_call_ids: list[str] = field(default_factory=list)
    problem: str | None = None  # a malformed tool call, reported back to the model as a failed step


def parse_reply(reply: Reply, protocol: str) -> Action:
    """The action a reply asks for. Several native tool calls run in order as one step."""
    if protocol == "native" and reply.tool_calls:
        return _from_tool_calls(reply)
    return _from_text(reply.text)


def _from_tool_calls(reply: Reply) -> Action:
    codes: list[str] = []
    commentary = ""
    ids = [c.id for c in reply.tool_calls]
    for call in reply.tool_calls:
        args: dict[str, Any] = call.arguments
        if call.name == "final":
            if codes:  # code first, then finish: run the code; the final call ends the loop after it
                evidence = [str(e) for e in args.get("evidence") or []]
                codes.append(f"final(answer={args.get('answer')!r}, evidence={evidence!r})")
                continue
            return Action(
                kind="final",
                answer=_text_or_none(args.get("answer")),
                evidence=[str(e) for e in args.get("evidence") or []],
                tool_call_ids=ids,
            )
        if call.name != "run_python":
            return Action(
                kind="code",
                tool_call_ids=ids,
                problem=f"unknown tool {call.name!r}; the tools are run_python and final",
            )
        code = args.get("code")
        if not isinstance(code, str) or not code.strip():
            raw = args.get("_raw")
            detail = f" (could not parse arguments: {str(raw)[:200]!r})" if raw else ""
            return Action(
                kind="code",
                tool_call_ids=ids,
                problem=f"run_python needs a non-empty string `code` argument{detail}",
            )
        codes.append(code)
        commentary = commentary or str(args.get("commentary") or "")
    code = "\n".join(codes)
    return Action(
        kind="code",
        code=code,
        commentary=(commentary or _first_comment(code))[:COMMENTARY_LIMIT],
        tool_call_ids=ids,
    )


def _from_text(text: str) -> Action:
    blocks = [m.group(2) for m in _FENCE.finditer(text)]
    if not blocks:
        return Action(kind="none", answer=text.strip() or None)
    code = "\n".join(b.rstrip() for b in blocks)
    prose = text[: text.find("```")].strip().splitlines()
    commentary = prose[0].strip() if prose else _first_comment(code)
    return Action(kind="code", code=code, commentary=commentary[:COMMENTARY_LIMIT])


def _first_comment(code: str) -> str:
    for line in code.splitlines():
        stripped = line.strip()
        if stripped.startswith("#"):
            return stripped.lstrip("#").strip()
    return ""


def _text_or_none(value: Any) -> str | None:
    return value if isinstance(value, str) and value.strip() else None


#: CPython keeps the AST constructor's recursion depth per interpreter, not per thread: turns parsing
#: their code at once on a server's threads failed with `SystemError: AST constructor recursion depth
#: mismatch` (python/cpython#106905). Parsing a step is quick; one at a time costs nothing. Every parse
#: of model code in the server process takes it (`agent.repeats` too).
AST_LOCK = threading.Lock()


def reserved_binding(code: str) -> str | None:
    """The first reserved name the code would bind, or None. Syntax errors are left to the REPL,
    which reports them with the model's own line numbers."""
    try:
        with AST_LOCK:
            tree = ast.parse(code)
    except SyntaxError:
        return None
    for node in ast.walk(tree):
        names: list[str] = []
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names.append(node.name)
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store | ast.Del):
            names.append(node.id)
        elif isinstance(node, ast.Import | ast.ImportFrom):
            names += [(a.asname or a.name).split(".")[0] for a in node.names]
        elif isinstance(node, ast.Global | ast.Nonlocal):
            names += node.names
        for name in names:
            if name in RESERVED:
                return name
    return None


_TOOL_DEFINED = re.compile(r"^[ \t]*(?:async[ \t]+)?def[ \t]+(run_python|final)[ \t]*\(", re.M)
_TOOL_CALLED = re.compile(r"(?<![\w.])(?:await[ \t]+)?run_python[ \t]*\(")
_SDK_IMPORTED = re.compile(
    rf"^[ \t]*(?:from[ \t]+({'|'.join(RESERVED)})[ \t]+import\b|import[ \t]+({'|'.join(RESERVED)})\b)", re.M
)
_EXAMPLE = (
    "hits = await search_source('remote work days per week', top_k=5)\n"
    "for h in hits:\n    print(h.ref, h.fields['chunk_text'][:300])"
)


def misread_tool(code: str) -> str | None:
    """Why code written *around* the tool rather than *in* it is not run, or None (issue 46).

    A real 1.5B model sent `async def run_python(code, commentary): …` with `from final import *`,
    `from query_db import *` and the like, as if it had to implement the tool and the SDK were modules;
    the REPL's syntax error did not tell it what to do instead. Read as text, so that it is caught
    whether or not the code parses."""
    defined = _TOOL_DEFINED.search(code)
    if defined is not None:
        return (
            f"Step not run: do not define `{defined.group(1)}`: it is a tool you call, and the `code` you "
            f"pass to run_python is what runs. Send only the code, for example:\n{_EXAMPLE}"
        )
    if _TOOL_CALLED.search(code):
        return (
            "Step not run: `run_python` is not a function in the REPL: the code you pass to it is what "
            f"runs. Send the code itself, for example:\n{_EXAMPLE}"
        )
    imported = _SDK_IMPORTED.search(code)
    if imported is not None:
        name = imported.group(1) or imported.group(2)
        return (
            f"Step not run: `{name}` is not a module to import: the SDK functions are already defined in "
            f"the REPL. Call them directly, for example:\n{_EXAMPLE}"
        )
    return None


def rejection_message(name: str) -> str:
    call = "final(answer=..., evidence=[...])" if name in ("final", "answer") else f"{name}(...)"
    return (
        f"Step not run: `{name}` is a reserved SDK name and must not be defined, assigned or imported. "
        f"It is already bound; call it directly, e.g. `{call}`. Rename your variable."
    )
