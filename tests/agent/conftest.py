"""A runtime over the compiled sample corpus with its own server database, and a scripted model
factory: tests give the replies, the loop, sandbox, synthesis and citation checks are all real."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from sleuth.agent.turn import Runtime
from sleuth.compile.pipeline import CompileReport
from sleuth.models.base import ModelConfig
from sleuth.models.scripted import ScriptedModel, ScriptItem
from sleuth.sandbox import Limits, SandboxHost
from sleuth.store.contexts.home import Home
from sleuth.store.records.server_db import ServerDB
from tests.agent.support import RuntimeFactory


@pytest.fixture(scope="session")
def agent_host() -> Iterator[SandboxHost]:
    with SandboxHost(Limits(step_timeout_s=5, hard_kill_grace_s=2)) as host:
        yield host


@pytest.fixture
def make_runtime(
    sample_home: tuple[Home, CompileReport], agent_host: SandboxHost, tmp_path: Path
) -> Iterator[RuntimeFactory]:
    """`make_runtime(replies, protocol="native")` → a Runtime whose provider models are one scripted
    model with those replies (for every model the turn resolves)."""
    home, _ = sample_home
    made: list[Runtime] = []

    def factory(
        replies: list[ScriptItem] | None = None, protocol: str = "native", **kwargs: object
    ) -> Runtime:
        model = ScriptedModel(replies or [], tool_protocol=protocol)  # type: ignore[arg-type]

        def build(config: ModelConfig) -> ScriptedModel:
            return model

        runtime = Runtime(
            home,
            db=ServerDB(tmp_path / "server.sqlite", replay_root=tmp_path),
            sandbox_host=agent_host,
            model_factory=build,
            limits=agent_host.limits,
            **kwargs,  # type: ignore[arg-type]
        )
        runtime.scripted = model  # type: ignore[attr-defined]
        made.append(runtime)
        return runtime

    yield factory
    for runtime in made:
        runtime.close()
