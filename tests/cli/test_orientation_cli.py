"""`sleuth orientation` (issue 43): what a model is given, printed; the same text `orientation()`
returns in a `sleuth exec` step. That both equal a turn's first message is checked in
`tests/agent/test_orientation_on_demand.py`."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from typer.testing import CliRunner

from sleuth.cli.app import app
from sleuth.compile.pipeline import CompileReport
from sleuth.store.contexts.home import Home


def test_the_command_and_an_exec_step_print_one_orientation(
    runner: CliRunner, sample_home: tuple[Home, CompileReport], tmp_path: Path
) -> None:
    printed = runner.invoke(app, ["orientation", "--context", "acme", "--max-tool-output-chars", "100000"])
    assert printed.exit_code == 0, printed.output
    assert "## SDK reference" in printed.output and "### Context `acme`" in printed.output
    assert "100,000" in printed.output  # the step output limit the rules state

    home, _ = sample_home
    script = tmp_path / "orient.py"
    script.write_text("print(await orientation())")
    env = {key: value for key, value in os.environ.items() if key != "SLEUTH_MODEL"}
    step = subprocess.run(
        [
            sys.executable,
            "-m",
            "sleuth",
            "exec",
            "--context",
            "acme",
            str(script),
            *("--max-tool-output-chars", "100000"),
        ],
        env={**env, "SLEUTH_HOME": str(home.root)},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert step.returncode == 0, step.stderr
    assert step.stdout == printed.output


def test_the_command_refuses_what_no_turn_would_take(runner: CliRunner) -> None:
    unknown = runner.invoke(app, ["orientation", "--context", "acme", "--tool", "search_sorce"])
    assert unknown.exit_code == 2 and "unknown tool 'search_sorce'" in unknown.output
    assert "search_source" in unknown.output  # the hint names the one meant
    missing = runner.invoke(app, ["orientation", "--context", "nope"])
    assert missing.exit_code == 1 and "no context 'nope'" in missing.output
    only = runner.invoke(app, ["orientation", "--context", "acme", "--tool", "query_db"])
    assert only.exit_code == 0 and "def query_db(" in only.output and "def search_source(" not in only.output
