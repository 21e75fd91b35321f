"""`sleuth ask --retrieval-only` / `--pointers-only` on the compiled sample corpus: the fused hits of
one hybrid search, printed or as the Query JSON, and `sleuth trace` of such a turn."""

from __future__ import annotations

import json

from typer.testing import CliRunner

from sleuth.cli import app

HOTEL = "What is the hotel limit per night when travelling?"


def test_ask_retrieval_only_prints_the_hits(runner: CliRunner) -> None:
    result = runner.invoke(app, ["ask", "-c", "acme", HOTEL, "--retrieval-only", "--max-retrieved", "4"])
    assert result.exit_code == 0, result.output
    out = result.output
    assert "▶ step_1 retrieval only" in out and "search_source(" in out
    assert "hits (4 of 8)" in out and "1. chunk acme uploads/acme-corpus/policies/travel-policy.md p.1" in out
    assert "$220 per night" in out


def test_ask_pointers_only_json_and_its_trace(runner: CliRunner) -> None:
    result = runner.invoke(app, ["ask", "-c", "acme", HOTEL, "--pointers-only", "--json"])
    assert result.exit_code == 0, result.output
    query = json.loads(result.stdout)
    assert query["status"] == "completed" and query["rollup"]["stop_reason"] == "retrieval_only"
    assert len(query["output_json"]["hits"]) == 20
    assert all("text" not in hit for hit in query["output_json"]["hits"])
    trace = runner.invoke(app, ["trace", query["id"]])
    assert trace.exit_code == 0, trace.output
    out = " ".join(trace.output.split())  # the console wraps long lines
    assert "stop retrieval_only" in out and "hits (20 of 40)" in out
