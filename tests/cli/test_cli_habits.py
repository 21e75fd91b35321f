"""The command line's habits (issue 39, item E): no type tags in `--help`, `ask` names the flag it
needs, `--install-completion` changes no file, keyword hits print in score order."""

from __future__ import annotations

import importlib
import re
from pathlib import Path
from typing import Any

import pytest
import typer
from typer.testing import CliRunner

from sleuth.cli import app
from sleuth.cli.app import completion_line

TYPE_TAG = re.compile(r"<(?:str|int|float|bool|path|list\[[^\]]*\]|[a-z]+ range)[^>]*>")


def _commands(command: Any, path: list[str]) -> list[list[str]]:
    found = [path]
    if hasattr(command, "commands"):  # a group (Typer's own click)
        for name, sub in command.commands.items():
            found += _commands(sub, [*path, name])
    return found


def test_no_help_shows_a_type_tag() -> None:
    runner = CliRunner()
    paths = _commands(typer.main.get_command(app), [])
    assert len(paths) > 25  # every command and group, nested ones included
    for path in paths:
        shown = runner.invoke(app, [*path, "--help"], terminal_width=100)
        assert shown.exit_code == 0, (path, shown.output)
        assert not TYPE_TAG.search(shown.output), (path, TYPE_TAG.findall(shown.output))
    search = runner.invoke(app, ["search", "--help"], terminal_width=100).output
    assert "-c, --context CONTEXT" in search and "--top-k TOP_K" in search  # a value is still named
    assert re.search(r"--json\s+Print the hits", search)  # a flag takes none


def test_ask_without_a_context_names_the_flag(runner: CliRunner) -> None:
    result = runner.invoke(app, ["ask", "What is the hotel limit?"])
    assert result.exit_code == 2, result.output
    assert "pass --context NAME (sleuth contexts lists them)" in result.stderr
    assert "contexts here: acme" in result.stderr


def test_install_completion_prints_the_line_and_changes_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("SHELL", "/bin/bash")
    for module in ("typer._completion_shared", "typer.completion"):  # where Typer guesses the shell
        monkeypatch.setattr(importlib.import_module(module), "_get_shell_name", lambda: "bash", raising=False)
    runner = CliRunner()
    shown = runner.invoke(app, ["--install-completion"], prog_name="sleuth")
    assert shown.exit_code == 0, shown.output
    assert 'add this line to ~/.bashrc:\n\n    eval "$(sleuth --show-completion)"' in shown.output
    assert list(tmp_path.iterdir()) == []  # no ~/.bashrc, no ~/.bash_completions
    script = runner.invoke(app, ["--show-completion"], prog_name="sleuth")
    assert script.exit_code == 0 and "_SLEUTH_COMPLETE=complete_bash" in script.output
    assert completion_line("zsh")[0] == "~/.zshrc" and "compinit" in completion_line("zsh")[1]
    assert completion_line("fish") == (
        "~/.config/fish/completions/sleuth.fish",
        "sleuth --show-completion | source",
    )


def test_keyword_hits_print_in_descending_score(runner: CliRunner) -> None:
    result = runner.invoke(app, ["search", "-c", "acme", "--mode", "keyword", "ERR-4012"])
    assert result.exit_code == 0, result.output
    heads = [line for line in result.output.splitlines() if line[:1].isdigit()]
    scores = [float(line.rsplit("(score ", 1)[1].rstrip(")")) for line in heads]
    assert len(scores) > 3 and scores == sorted(scores, reverse=True), heads
    assert [h.split(".", 1)[0] for h in heads] == [str(n) for n in range(1, len(heads) + 1)]
