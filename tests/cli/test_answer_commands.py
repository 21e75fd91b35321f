"""`sleuth ask`, `sleuth trace` and `sleuth replay` end to end on the compiled sample corpus, with
the offline planner (no model configured)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from sleuth.cli import app


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
    verbose = runner.invoke(
        app, ["ask", "-c", "acme", "What is the hotel limit per night when travelling?", "--verbose"]
    )
    assert verbose.exit_code == 0, verbose.output
    # Compact by default: long code is cut with a pointer to --verbose, which shows all of it.
    assert ("more lines (--verbose)" in out) and "more lines (--verbose)" not in verbose.output
    assert len(verbose.output.splitlines()) > len(out.splitlines())


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


def test_ask_errors_are_clear(runner: CliRunner) -> None:
    missing = runner.invoke(app, ["ask", "-c", "nope", "anything"])
    assert missing.exit_code == 2 and "context_not_found" in missing.output
    no_scope = runner.invoke(app, ["ask", "anything"])
    assert no_scope.exit_code == 2 and "scope_required" in no_scope.output
    bad_model = runner.invoke(app, ["ask", "-c", "acme", "q", "--model", "nope"])
    assert bad_model.exit_code == 2 and "model_unavailable" in bad_model.output
    unknown = runner.invoke(app, ["trace", "qry_00000000-0000-0000-0000-000000000000"])
    assert unknown.exit_code == 1


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
