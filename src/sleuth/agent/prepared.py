"""A turn resolved for admission (`TurnPlan`, `turn.Runtime.resolve`), a turn that passed it
(`PreparedTurn`, `turn.Runtime.admit`) as `run.TurnRun` runs it, and what a run needs of the engine
that admitted it (`Engine`). Kept apart from `turn` so that the run and its trace do not import the
runtime that imports them."""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from sleuth.agent.orientation import ContextBrief
from sleuth.agent.records import Query
from sleuth.agent.request import Caller, TurnRequest
from sleuth.models.base import Model, ModelConfig
from sleuth.sandbox.host import HostFunction, SandboxHost
from sleuth.sandbox.limits import HostBudget, Limits
from sleuth.store.records.rows import SessionRow
from sleuth.store.records.server_db import ServerDB

__all__ = ["Engine", "PreparedTurn", "TurnPlan"]


@dataclass(frozen=True)
class TurnPlan:
    """A turn the runtime resolved and checked, nothing stored yet: the server holds it to its own
    limits (spec/api.md §8.1) before `Runtime.admit` stores it."""

    request: TurnRequest
    caller: Caller
    session: SessionRow | None  # the stored session the turn continues; None: it opens one
    scope: tuple[str, ...]
    briefs: tuple[ContextBrief, ...]  # each context with the version pinned for the turn
    model_ids: tuple[str, ...]  # the session's models (a new session stores them)
    configs: tuple[ModelConfig, ...]
    workflow: str | None  # None: the session's own
    ignored: tuple[str, ...]  # the pinned fields a continued session ignores


@dataclass
class PreparedTurn:
    """A turn that passed admission: its Query is stored `in_progress` and its session claimed."""

    request: TurnRequest
    query: Query
    session: SessionRow
    briefs: list[ContextBrief]
    model_configs: list[ModelConfig]
    workflow: str
    ignored_fields: list[str] = field(default_factory=list)
    model_override: Model | None = None  # replay: a scripted model for the loop and synthesis
    request_replay: dict[str, Any] | None = None  # replay: recorded planner results
    registry_override: dict[str, HostFunction] | None = None  # replay: recorded host results
    cancel_event: threading.Event = field(default_factory=threading.Event)  # set: stop between steps
    cancel_reason: str | None = None  # the error a cancel ends it with; None: `cancelled by client`

    @property
    def offline(self) -> bool:
        return bool(self.model_configs) and self.model_configs[0].provider == "offline"


class Engine(Protocol):
    """What a turn's run reads from the runtime that admitted it (`turn.Runtime` is one)."""

    db: ServerDB
    limits: Limits
    budget: HostBudget
    model_factory: Callable[[ModelConfig], Model]

    @property
    def sandbox_host(self) -> SandboxHost: ...
