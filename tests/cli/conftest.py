"""The CLI over the compiled sample corpus, with no model configured (the offline planner answers)."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from sleuth.compile.pipeline import CompileReport
from sleuth.store.contexts.home import Home


@pytest.fixture
def runner(sample_home: tuple[Home, CompileReport], monkeypatch: pytest.MonkeyPatch) -> CliRunner:
    home, _ = sample_home
    monkeypatch.setenv("SLEUTH_HOME", str(home.root))
    monkeypatch.delenv("SLEUTH_MODEL", raising=False)
    return CliRunner()
