"""A loop that notices itself (issue 46): a step whose code was already run in this turn is not run
again, and the model is told where its output already is.

A real 1.5B model ran `search_source("remote work policy", top_k=5)` and the same print eight times in
one turn, each time reading the same output, until the step cap: 41,988 input tokens for nothing. Code
is compared as Python reads it (its syntax tree: comments, blank lines and spacing do not count), or
as its collapsed text where it does not parse.
"""

from __future__ import annotations

import ast
import re

from sleuth.agent.actions import AST_LOCK

__all__ = ["code_key", "repeat_notice"]

_LABEL = re.compile(r"\bE(\d+)\b")


def code_key(code: str) -> str:
    """What two steps' code must share to be the same step."""
    try:
        with AST_LOCK:  # turns on a server's threads parse at once (see `agent.actions.AST_LOCK`)
            tree = ast.parse(code)  # top-level `await` parses: only the compiler refuses it
    except (SyntaxError, ValueError):
        return " ".join(code.split())
    return ast.dump(tree, annotate_fields=False)


def _ranges(numbers: list[int]) -> str:
    """`[1, 2, 3, 5]` → `E1–E3, E5`."""
    parts: list[str] = []
    start = previous = numbers[0]
    for n in [*numbers[1:], None]:
        if n is not None and n == previous + 1:
            previous = n
            continue
        parts.append(f"E{start}" if start == previous else f"E{start}–E{previous}")
        if n is not None:
            start = previous = n
    return ", ".join(parts)


def repeat_notice(earlier_step: int, earlier_output: str) -> str:
    """What the model reads instead of the output of code it already ran."""
    labels = sorted({int(n) for n in _LABEL.findall(earlier_output)})
    held = f"; its output ({_ranges(labels)}) is above" if labels else "; its output is above"
    return (
        f"Step not run: you ran this same code in step {earlier_step}{held}. Running it again gives the "
        "same output. Change the query, read a hit in full, or answer with final(...) from the evidence "
        "you hold."
    )
