"""What the model sees of a step (spec/runtime.md §4.4): the captured text, cut at N characters with
the exact notice `[truncated: showing 10,000 of 46,212 chars]`."""

from __future__ import annotations

import io


class CappedStream(io.TextIOBase):
    """A stdout/stderr replacement: keeps the first `cap` characters, counts all of them."""

    def __init__(self, cap: int, sink: list[str] | None = None) -> None:
        self.cap = cap
        self.parts: list[str] = [] if sink is None else sink
        self.kept = 0
        self.total = 0

    def writable(self) -> bool:
        return True

    def write(self, text: str) -> int:
        if not isinstance(text, str):
            raise TypeError(f"write() argument must be str, not {type(text).__name__}")
        self.total += len(text)
        room = self.cap - self.kept
        if room > 0:
            piece = text[:room]
            self.parts.append(piece)
            self.kept += len(piece)
        return len(text)

    def flush(self) -> None:
        pass


def observation(text: str, total: int, limit: int, error_line: str | None = None) -> tuple[str, bool]:
    """(observation, truncated) for a step whose full output has `total` characters."""
    if total <= limit and len(text) <= limit:
        return text, False
    shown = text[:limit]
    out = f"{shown}\n[truncated: showing {limit:,} of {total:,} chars]"
    if error_line and error_line not in shown:
        out += "\n" + error_line[:500]
    return out, True
