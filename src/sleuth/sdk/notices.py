"""What a primitive says beside its result (a bound lowered, a `must_contain` that matched no word, a
comparison cut short). In the sandbox a notice goes to stderr, which is part of the step's output the
model reads; a caller with no step output (an MCP tool call) collects them with `collected()` and hands
them back with the result."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar

_SINK: ContextVar[list[str] | None] = ContextVar("sleuth_sdk_notices", default=None)


def notice(text: str) -> None:
    """Say `text` to whoever reads this call's output."""
    sink = _SINK.get()
    if sink is None:
        print(text, file=sys.stderr)
    else:
        sink.append(text)


@contextmanager
def collected() -> Iterator[list[str]]:
    """The notices given within the block, in order, instead of on stderr (a coroutine run inside it
    gives its notices here too: it runs in a copy of this context, holding the same list)."""
    sink: list[str] = []
    token = _SINK.set(sink)
    try:
        yield sink
    finally:
        _SINK.reset(token)
