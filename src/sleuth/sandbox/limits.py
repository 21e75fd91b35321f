"""Sandbox limits (spec/sandbox.md §6): declared once, with defaults, and reported when they bite."""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields
from typing import Any

from sleuth.errors import Failed
from sleuth.settings import DEFAULTS, TOOL_OUTPUT_CHARS, Settings


@dataclass(frozen=True)
class Limits:
    step_timeout_s: float = 30.0  # soft: the step fails, state is kept
    hard_kill_grace_s: float = 3.0  # the host kills the sandbox this long after the step timeout
    cpu_s: int = 120  # RLIMIT_CPU for the whole turn
    memory_mb: int = 1024  # RLIMIT_AS budget above the child's size after set-up
    pids: int = 64  # RLIMIT_NPROC (threads count)
    scratch_mb: int = 64  # tmpfs size, and RLIMIT_FSIZE
    nofile: int = 256  # RLIMIT_NOFILE
    max_output: int = TOOL_OUTPUT_CHARS  # characters the model sees (max_tool_output_chars)
    full_output_cap: int = 1 << 20  # characters kept for the trace
    floor: str = "standard"  # standard | strict | none

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Limits:
        return cls(**data)


@dataclass(frozen=True)
class HostBudget:
    """What one turn may cost the host (the sandbox's own limits are `Limits`).

    None of this work counts against the sandbox's cgroup or RLIMIT_CPU: parsing and answering host
    function calls, keeping the evidence spans it reports, and recording the turn. Each is capped per
    turn; a turn that passes a cap is stopped and marked `failed` with the cap's name. Every field is a
    setting, `SLEUTH_BUDGET_<FIELD>` (for example `SLEUTH_BUDGET_RPC_CALLS`), which the process reads
    at its start and hands in through `from_settings`; the defaults are the settings' own.
    """

    rpc_calls: int = DEFAULTS.budget_rpc_calls  # host function calls, rejected ones included
    rpc_bytes: int = DEFAULTS.budget_rpc_bytes  # bytes of host function requests and replies
    host_cpu_s: float = DEFAULTS.budget_host_cpu_s  # seconds in host functions (CPU or wall, the larger)
    spans: int = DEFAULTS.budget_spans  # evidence spans the sandbox reports
    recorded_bytes: int = DEFAULTS.budget_recorded_bytes  # step events, host results, trace, replay log

    @classmethod
    def from_settings(cls, settings: Settings = DEFAULTS) -> HostBudget:
        """The budget `settings` give (`SLEUTH_BUDGET_<FIELD>`; left out: the declared defaults)."""
        return cls(**{item.name: getattr(settings, f"budget_{item.name}") for item in fields(cls)})


class BudgetExceeded(Failed, RuntimeError):
    """A turn used up one of its `HostBudget` caps; the turn stops and fails."""

    def __init__(self, name: str, used: float, limit: float) -> None:
        super().__init__(
            f"host budget exceeded: {name} reached {_number(used)} (limit {_number(limit)}); "
            f"the turn was stopped (raise SLEUTH_BUDGET_{name.upper()} to allow more)"
        )
        self.name = name
        self.used = used
        self.limit = limit


def _number(value: float) -> str:
    return f"{value:,.0f}" if value >= 100 else f"{value:,.2f}"


class BudgetMeter:
    """One turn's use of its `HostBudget`. Only the turn's own thread charges it."""

    def __init__(self, budget: HostBudget | None = None) -> None:
        self.budget = budget or HostBudget()
        self.used: dict[str, float] = {item.name: 0 for item in fields(HostBudget)}

    def charge(self, name: str, amount: float) -> None:
        """Add `amount` to `name`; `BudgetExceeded` once it passes the cap."""
        self.used[name] += amount
        limit = float(getattr(self.budget, name))
        if self.used[name] > limit:
            raise BudgetExceeded(name, self.used[name], limit)

    def left(self, name: str) -> float:
        return max(0.0, float(getattr(self.budget, name)) - self.used[name])

    def to_json(self) -> dict[str, Any]:
        return {
            name: {"used": round(used, 3), "limit": getattr(self.budget, name)}
            for name, used in self.used.items()
        }
