"""`sleuth ask`, `sleuth trace` and `sleuth replay` end to end on the compiled sample corpus, with
the offline planner (no model configured)."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from sleuth import __version__
from sleuth.cli import app
from sleuth.cli.app import styled
from sleuth.compile.pipeline import CompileReport
from sleuth.store.contexts.home import Home
from sleuth.store.records.server_db import ServerDB


def test_ask_streams_steps_then_the_cited_answer(runner: CliRunner) -> None:
    result = runner.invoke(
        app, ["ask", "--context", "acme", "What is the hotel limit per night when travelling?"]
    )
    assert result.exit_code == 0, result.output
    out = result.output
    assert "▶ step_1" in out and "search_source(" in out  # the live step, its code and SDK calls
    assert "answer" in out and "$220 per night" in out
    assert "[1] uploads/acme-corpus/" in out  # numbered citations with file and page
    assert "model sleuth/offline" in out and "session ses_" in out
    assert "how sure: " in out  # an answer without a model says how sure it is (issue 45)
    # The offline planner's internals are not shown as a model's work (issue 26, item 6): no
    # `#PLAN` lines, no step code (Sleuth's own, not a model's) and no `0 in / 0 out tokens`
    assert "#PLAN" not in out and "ask = " not in out and "tokens" not in out
    verbose = runner.invoke(
        app, ["ask", "-c", "acme", "What is the hotel limit per night when travelling?", "--verbose"]
    )
    assert verbose.exit_code == 0, verbose.output
    # --verbose shows the step's whole code
    assert "ask = " in verbose.output and "\n    #PLAN " not in verbose.output
    assert len(verbose.output.splitlines()) > len(out.splitlines())
    # and under each search, its first hits with their scores and what ranked them (issue 44)
    ranked = re.findall(
        r"^ +1\. uploads/acme-corpus/\S+ p\.\d+ (\d\.\d{3})(?: \((.+)\))?$", verbose.output, re.M
    )
    assert ranked and all(0 <= float(score) <= 1 for score, _why in ranked)
    assert any(re.fullmatch(r"\w+ [+-]\d+\.\d\d(, \w+ [+-]\d+\.\d\d)*", why) for _score, why in ranked)
    assert "ranked=" not in verbose.output and "ranked=" not in out


def test_ask_reads_the_question_from_stdin_and_prints_only_the_answer(runner: CliRunner) -> None:
    """Issue 39, item 11: `ask -` reads the question as Unix tools do; `--quiet` leaves the steps out."""
    quiet = runner.invoke(
        app, ["ask", "-c", "acme", "--quiet", "-"], input="What is the hotel limit per night?\n"
    )
    assert quiet.exit_code == 0, quiet.output
    assert "$220" in quiet.stdout and "[1]" in quiet.stdout
    assert "▶ step_1" not in quiet.output
    empty = runner.invoke(app, ["ask", "-c", "acme", "-"], input="\n")
    assert empty.exit_code == 2 and "no question on standard input" in empty.stderr


def test_ask_json_trace_and_replay(runner: CliRunner) -> None:
    result = runner.invoke(app, ["ask", "-c", "acme", "How many products are in the catalog?", "--json"])
    assert result.exit_code == 0, result.output
    query = json.loads(result.stdout)
    assert query["object"] == "query" and query["status"] == "completed"
    assert query["output"][0]["content"][0]["text"].startswith("There are 10 products")
    assert query["citations"] and query["model"] == "sleuth/offline"

    trace = runner.invoke(app, ["trace", query["id"], "--json"])
    assert trace.exit_code == 0, trace.output
    data = json.loads(trace.stdout)
    assert data["query_id"] == query["id"] and data["steps"][0]["calls"][0]["fn"] == "query_db"
    assert data["versions"]["contexts"] == {"acme": "v000001"}

    shown = runner.invoke(app, ["trace", query["id"]])
    assert shown.exit_code == 0 and "evidence:" in shown.output

    replayed = runner.invoke(app, ["replay", query["id"]])
    assert replayed.exit_code == 0, replayed.output
    assert "identical" in replayed.output

    follow = runner.invoke(app, ["ask", "--session", query["session_id"], "List all products", "--json"])
    assert follow.exit_code == 0, follow.output
    assert json.loads(follow.stdout)["previous_query_id"] == query["id"]


def test_a_replay_embeds_nothing_so_it_agrees_on_any_cpu(
    runner: CliRunner, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 39, item 2: scores differ between instruction sets, so a replay must not recompute them. A
    search turn embeds its question; its replay embeds nothing (the recorded host results answer it,
    whatever this CPU would score) and is "identical"."""
    from sleuth.models.embedder import MiniLMEmbedder

    embedded: list[str] = []
    original = MiniLMEmbedder.embed

    def counting(self: MiniLMEmbedder, texts: list[str]) -> Any:
        embedded.extend(texts)
        return original(self, texts)

    monkeypatch.setattr(MiniLMEmbedder, "embed", counting)
    ask = "How many days a week can employees work remotely?"
    result = runner.invoke(app, ["ask", "-c", "acme", ask, "--json"])
    assert result.exit_code == 0, result.output
    query = json.loads(result.stdout)
    assert query["status"] == "completed" and ask in embedded  # the precondition: the turn embedded
    embedded.clear()
    replayed = runner.invoke(app, ["replay", query["id"]])
    assert replayed.exit_code == 0, replayed.output
    assert "identical" in replayed.output and embedded == []


def test_ask_errors_are_clear(runner: CliRunner) -> None:
    """Issue 26, item 4: a sentence for people (no machine code), the exit status of its kind (1: it
    failed, 2: the command line is wrong), the home a context was looked for in and the nearest name;
    `--json` prints the envelope with the code for scripts."""
    missing = runner.invoke(app, ["ask", "-c", "acm", "anything"])
    assert missing.exit_code == 1
    assert "error: no context 'acm' in " in missing.output and "(from $SLEUTH_HOME)" in missing.output
    assert "hint: did you mean 'acme'?" in missing.output and "context_not_found" not in missing.output
    scripted = runner.invoke(app, ["ask", "-c", "acm", "anything", "--json"])
    assert scripted.exit_code == 1
    assert json.loads(scripted.stdout)["error"]["code"] == "context_not_found"
    no_scope = runner.invoke(app, ["ask", "anything"])
    assert no_scope.exit_code == 2 and "pass --context NAME (sleuth contexts lists them)" in no_scope.output
    assert "scope_required" not in no_scope.output
    bad_model = runner.invoke(app, ["ask", "-c", "acme", "q", "--model", "nope"])
    assert bad_model.exit_code == 2 and "unknown model 'nope'" in bad_model.output
    too_long = runner.invoke(app, ["ask", "-c", "acme", "x" * 20_001])
    assert too_long.exit_code == 2 and "ask is too long: at most 20000 characters" in too_long.output
    assert "String should" not in too_long.output
    unknown = runner.invoke(app, ["trace", "qry_00000000-0000-0000-0000-000000000000"])
    assert unknown.exit_code == 1


def test_a_missing_extra_is_named_and_leaves_no_session(
    runner: CliRunner, monkeypatch: pytest.MonkeyPatch, sample_home: tuple[Home, CompileReport]
) -> None:
    """Issue 26, item 2: `--model openai:…` without the openai package printed `internal error` with
    `pip install 'sleuth'` (Rich ate `[openai]`) and left a session behind. The package is made
    unimportable here (`sys.modules[name] = None`), as on an install without the extra."""
    monkeypatch.setitem(sys.modules, "openai", None)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    db = ServerDB.for_home(sample_home[0])
    before = len(db.list_sessions(limit=1000))
    result = runner.invoke(app, ["ask", "-c", "acme", "q", "--model", "openai:gpt-4.1"])
    assert result.exit_code == 1, result.output
    assert "pip install 'sleuth[openai]'" in result.output and "internal error" not in result.output
    assert len(db.list_sessions(limit=1000)) == before


def test_people_text_is_never_read_as_markup() -> None:
    """Issue 26, item 2: one place renders styles; `[red]…[/red]` or `[openai]` in a message prints as
    it is (`replay` printed `[red]different[/red]` literally, errors lost `[openai]`)."""
    line = styled(("different", "red"), " at step_1: pip install 'sleuth[openai]' [red]x[/red]")
    assert line.plain == "different at step_1: pip install 'sleuth[openai]' [red]x[/red]"
    assert [(span.start, span.end, str(span.style)) for span in line.spans] == [(0, 9, "red")]


def test_version_and_completion(runner: CliRunner) -> None:
    version = runner.invoke(app, ["--version"])
    assert version.exit_code == 0 and version.output.strip() == f"sleuth {__version__}"
    helped = runner.invoke(app, ["--help"])
    assert "--install-completion" in helped.output and "<bool>" not in helped.output
    assert "Exit status: 0 done, 1 the command failed, 2 the command line is wrong" in helped.output


@pytest.mark.parametrize(
    "args",
    [
        ["ask", "--context", "acme", "Hello?"],
        ["eval", "questions.jsonl", "--context", "acme"],
        ["serve", "--port", "18997"],
        ["profile", "--context", "acme"],
    ],
)
def test_a_model_that_does_not_resolve_is_a_clear_error(
    runner: CliRunner, monkeypatch: pytest.MonkeyPatch, tmp_path: Path, args: list[str]
) -> None:
    """`SLEUTH_MODEL` naming no model printed a traceback from ask, eval and serve."""
    monkeypatch.setenv("SLEUTH_MODEL", "no-such-model")
    monkeypatch.chdir(tmp_path)
    (tmp_path / "questions.jsonl").write_text('{"question": "Hello?", "answer": "hi"}\n')
    result = runner.invoke(app, args)
    assert result.exit_code == 2, result.output
    flat = " ".join(result.output.split())  # the console wraps long lines
    assert "unknown model 'no-such-model'" in flat and "Traceback" not in flat
