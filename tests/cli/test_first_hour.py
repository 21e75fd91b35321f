"""The first hour (issue 26): one rule for the home every entry point uses, printed by `sleuth
contexts`; compile outcomes that say what happened and exit accordingly."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from sleuth.cli import app
from sleuth.store.contexts.home import Home, resolve_home


def test_the_home_rule(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`$SLEUTH_HOME`; else the nearest `.sleuth/` with contexts from the working directory up (what
    `make demo` makes); else `$XDG_DATA_HOME/sleuth`; else `~/.local/share/sleuth`."""
    project = tmp_path / "project"
    deep = project / "docs" / "notes"
    deep.mkdir(parents=True)
    monkeypatch.setenv("HOME", str(tmp_path / "user"))
    monkeypatch.delenv("SLEUTH_HOME", raising=False)
    monkeypatch.delenv("XDG_DATA_HOME", raising=False)
    assert resolve_home(deep).source == "default"
    assert resolve_home(deep).path == tmp_path / "user" / ".local" / "share" / "sleuth"
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "xdg"))
    assert resolve_home(deep) == resolve_home(deep).__class__(tmp_path / "xdg" / "sleuth", "XDG_DATA_HOME")
    (project / ".sleuth").mkdir()
    assert resolve_home(deep).source == "XDG_DATA_HOME"  # a `.sleuth` without contexts is not a home
    (project / ".sleuth" / "contexts").mkdir()
    choice = resolve_home(deep)
    assert (choice.path, choice.source) == (project.resolve() / ".sleuth", "project")
    assert "found from the working directory" in choice.describe()
    monkeypatch.setenv("SLEUTH_HOME", str(tmp_path / "explicit"))
    assert resolve_home(deep).source == "SLEUTH_HOME"


def test_contexts_says_which_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """After `make demo`, a fresh shell in the checkout finds the demo's home, and `sleuth contexts`
    says where it looked; an empty home says how to make a context."""
    project = tmp_path / "checkout"
    Home(project / ".sleuth").contexts_dir.mkdir(parents=True)
    monkeypatch.delenv("SLEUTH_HOME", raising=False)
    monkeypatch.chdir(project)
    listed = CliRunner().invoke(app, ["contexts"])
    assert listed.exit_code == 0, listed.output
    first = listed.output.splitlines()[0]
    assert (
        first
        == f"home: {project.resolve() / '.sleuth'} (the project's .sleuth, found from the working directory)"
    )
    assert "no contexts yet: make one with `sleuth compile DIR --context NAME`" in listed.output
    missing = CliRunner().invoke(app, ["inspect", "acme"])
    assert (
        missing.exit_code == 1 and f"no context 'acme' in {project.resolve() / '.sleuth'}" in missing.output
    )
    assert "hint: make one with: sleuth compile DIR --context acme" in missing.output


def test_compile_outcomes(tmp_path: Path, home: Home) -> None:
    """Issue 26, item 3: an empty folder makes no context and exits 2; unreadable sources exit 1 and
    are counted; a second folder of the same name does not silently delete the first one's sources."""
    runner = CliRunner()
    (tmp_path / "empty" / "sub").mkdir(parents=True)
    empty = runner.invoke(app, ["compile", str(tmp_path / "empty"), "-c", "notes"])
    assert empty.exit_code == 2 and "nothing to compile" in empty.output
    assert home.contexts() == []

    first = tmp_path / "a" / "docs"
    first.mkdir(parents=True)
    (first / "policy.md").write_text("# Leave\n\nEmployees take 25 days of leave a year.\n")
    (first / "broken.pdf").write_bytes(b"%PDF-1.4 this is not a PDF at all")
    (first / "broken-too.pdf").write_bytes(b"%PDF-1.7\n%%EOF")
    partial = runner.invoke(app, ["compile", str(first), "-c", "notes"])
    assert partial.exit_code == 1, partial.output
    assert "1 of 3 sources compiled" in partial.output
    assert "error: 2 sources could not be read (listed above); the others are compiled" in partial.output
    assert home.find("notes").live_version() == "v000001"  # what could be read is live

    second = tmp_path / "b" / "docs"
    second.mkdir(parents=True)
    (second / "travel.md").write_text("# Travel\n\nBook economy class.\n")
    clash = runner.invoke(app, ["compile", str(second), "-c", "notes"])
    assert clash.exit_code == 2
    assert f"uploads/docs/ holds the sources compiled from {first.resolve()}" in clash.output
    assert (home.find("notes").sources / "uploads" / "docs" / "policy.md").exists()  # nothing deleted
    replaced = runner.invoke(app, ["compile", str(second), "-c", "notes", "--replace"])
    assert replaced.exit_code == 0, replaced.output
    assert not (home.find("notes").sources / "uploads" / "docs" / "policy.md").exists()
    again = runner.invoke(app, ["compile", str(second), "-c", "notes"])  # its own folder again: fine
    assert again.exit_code == 0 and "nothing changed" in again.output


def test_models_lists_what_model_can_name(home: Home, monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 26, item 5: `sleuth models` (the API had `/models`), with why a model cannot run here."""
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("SLEUTH_MODEL", raising=False)
    home.root.mkdir(parents=True, exist_ok=True)
    (home.root / "config.toml").write_text('[models."gpt"]\nprovider = "openai"\nmodel = "gpt-4.1"\n')
    runner = CliRunner()
    listed = runner.invoke(app, ["models"])
    assert listed.exit_code == 0, listed.output
    assert "gpt (default)" in listed.output and "sleuth/offline" in listed.output  # one model: the default
    reasons = ("not here: gpt needs an API key: set OPENAI_API_KEY", "not here: gpt needs the openai extra")
    assert any(reason in listed.output for reason in reasons), listed.output  # the extra may be absent
    as_json = json.loads(runner.invoke(app, ["models", "--json"]).stdout)
    assert {m["id"]: m["available"] for m in as_json["models"]} == {"sleuth/offline": True, "gpt": False}
    # Issue 46: no tier is mapped, so none is listed beside the default as if it were (a curate's
    # `lite` artifact_model warned "not mapped" while this table showed it mapped).
    assert "lite, standard, pro: a turn that names one uses the default (gpt)" in " ".join(
        listed.output.split()
    )
    (home.root / "config.toml").write_text(
        '[models."gpt"]\nprovider = "openai"\nmodel = "gpt-4.1"\n\n[tiers]\nlite = "gpt"\n'
    )
    mapped = " ".join(runner.invoke(app, ["models"]).output.split())
    assert "tiers not mapped: standard, pro" in mapped and "lite" not in mapped.split("tiers not mapped")[1]


def test_profile_needs_no_key_and_no_sdk(runner: CliRunner, monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 26, item 5: the README's "nothing spent" estimate failed without the SDK and a key."""
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.setitem(sys.modules, "openai", None)  # as on an install without the extra
    result = runner.invoke(app, ["profile", "-c", "acme", "--model", "openai:gpt-4.1"])
    assert result.exit_code == 0, result.output
    assert "with openai:gpt-4.1" in result.output and "total" in result.output


def test_every_option_and_argument_says_what_it_does() -> None:
    """Issue 26, item 5: several options had no description in `--help`."""
    import typer.main

    root: Any = typer.main.get_command(app)
    bare = []
    for name, command in root.commands.items():
        leaves = command.commands.items() if hasattr(command, "commands") else [("", command)]
        for sub, leaf in leaves:
            bare += [
                f"{name} {sub} {p.name}"
                for p in leaf.params
                if p.name != "help" and not getattr(p, "help", None)
            ]
    assert bare == []


def test_pack_then_restore_in_another_home(
    runner: CliRunner, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 26, item 5: `sleuth pack` and `sleuth restore` (the API and the console had them)."""
    target = tmp_path / "out" / "acme.context.zip"
    packed = runner.invoke(app, ["pack", "acme", "--out", str(target)])
    assert packed.exit_code == 0, packed.output
    assert target.is_file() and f"packed acme into {target}" in packed.output

    monkeypatch.setenv("SLEUTH_HOME", str(tmp_path / "elsewhere"))
    restored = runner.invoke(app, ["restore", str(target)])
    assert restored.exit_code == 0, restored.output
    assert "restored 21 source files into acme; version v000001 is live" in restored.output
    home = Home(tmp_path / "elsewhere")
    assert home.find("acme").live_version() == "v000001"
    again = runner.invoke(app, ["restore", str(target)])
    assert again.exit_code == 1 and "already has sources" in again.output
    other = runner.invoke(app, ["restore", str(target), "--context", "acme-copy"])
    assert other.exit_code == 0 and home.find("acme-copy").live_version() == "v000001"
    (tmp_path / "not-a-pack.zip").write_bytes(b"hello")
    refused = runner.invoke(app, ["restore", str(tmp_path / "not-a-pack.zip")])
    assert refused.exit_code == 2 and "not a valid Sleuth pack" in refused.output


def test_the_readme_eval_example_is_a_valid_question_file(tmp_path: Path) -> None:
    """Issue 26, item 5: the eval file's format was undocumented; the README's example must load."""
    from sleuth.agent.evaluation.questions import load_questions

    readme = (Path(__file__).parents[2] / "README.md").read_text(encoding="utf-8")
    example = next(line for line in readme.splitlines() if line.startswith('{"id": "leave-1"'))
    (tmp_path / "q.jsonl").write_text(example + "\n", encoding="utf-8")
    [question] = load_questions(tmp_path / "q.jsonl")
    assert (question.id, question.answer, question.evidence[0].page) == ("leave-1", "25 days", 4)
