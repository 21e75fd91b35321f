"""Sandbox limits (sandbox.md §6): declared once, with defaults, and reported when they bite."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any


@dataclass(frozen=True)
class Limits:
    step_timeout_s: float = 30.0  # soft: the step fails, state is kept
    hard_kill_grace_s: float = 3.0  # the host kills the sandbox this long after the step timeout
    cpu_s: int = 120  # RLIMIT_CPU for the whole turn
    memory_mb: int = 1024  # RLIMIT_AS budget above the child's size after set-up
    pids: int = 64  # RLIMIT_NPROC (threads count)
    scratch_mb: int = 64  # tmpfs size, and RLIMIT_FSIZE
    nofile: int = 256  # RLIMIT_NOFILE
    max_output: int = 10_000  # characters the model sees (max_tool_output_chars)
    full_output_cap: int = 1 << 20  # characters kept for the trace
    floor: str = "standard"  # standard | strict | none

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Limits:
        return cls(**data)
