"""`sleuth search` for people and scripts (issue 11, 7): ten hits by default, never wrapped, `--json`,
and `--source` to search inside named documents."""

from __future__ import annotations

import json

from typer.testing import CliRunner

from sleuth.cli import app

REMOTE = "How many days a week can employees work remotely?"
POLICY = "uploads/acme-corpus/policies/remote-work-policy.md"


def test_search_prints_ten_unwrapped_hits(runner: CliRunner) -> None:
    result = runner.invoke(app, ["search", "-c", "acme", REMOTE], terminal_width=40)
    assert result.exit_code == 0, result.output
    heads = [line for line in result.output.splitlines() if line[:1].isdigit()]
    assert [h.split(".", 1)[0] for h in heads] == [str(n) for n in range(1, 11)]
    assert all(" p. " in h and "(score " in h for h in heads)  # each hit stays on its own line at 40 columns


def test_search_json_and_source_filter(runner: CliRunner) -> None:
    result = runner.invoke(
        app, ["search", "-c", "acme", REMOTE, "--json", "--top-k", "3", "--source", POLICY]
    )
    assert result.exit_code == 0, result.output
    document = json.loads(result.stdout)
    assert document["query"] == REMOTE and len(document["hits"]) == 3
    assert {h["source_path"] for h in document["hits"]} == {POLICY}
    first = document["hits"][0]
    assert {"id", "score", "page", "start", "end", "text", "section_path"} <= set(first)
    unknown = runner.invoke(app, ["search", "-c", "acme", REMOTE, "--source", "nope.md"])
    assert unknown.exit_code == 2 and "no source 'nope.md'" in unknown.output


def test_search_filters_by_document_type(runner: CliRunner) -> None:
    result = runner.invoke(app, ["search", "-c", "acme", "revenue", "--json", "--doc-type", "annual report"])
    assert result.exit_code == 0, result.output
    assert {h["source_path"] for h in json.loads(result.stdout)["hits"]} == {
        "uploads/acme-corpus/reports/annual-report-2025.pdf"
    }
    none = runner.invoke(app, ["search", "-c", "acme", "revenue", "--year", "1999"])
    assert none.exit_code == 1 and "no document matches" in none.output


def test_search_why_names_each_pages_score_and_what_moved_it(runner: CliRunner) -> None:
    """Issue 44: the features behind a rank are visible, for people (one line per hit) and scripts."""
    result = runner.invoke(app, ["search", "-c", "acme", REMOTE, "--top-k", "3", "--why"], terminal_width=200)
    assert result.exit_code == 0, result.output
    reasons = [line.strip() for line in result.output.splitlines() if line.strip().startswith("why: ")]
    assert len(reasons) == 3 and all(r.startswith("why: page score ") for r in reasons)
    document = json.loads(
        runner.invoke(app, ["search", "-c", "acme", REMOTE, "--top-k", "3", "--why", "--json"]).stdout
    )
    pages = document["pages"]
    assert pages and {(p["source_path"], p["page"]) for p in pages} <= {
        (h["source_path"], h["page"]) for h in document["hits"]
    }
    first = pages[0]
    assert first["ranker"] == "learned" and 0.0 < first["page_score"] <= 1.0
    assert set(first["features"]) == set(first["contributions"]) and "coverage" in first["features"]
    plain = json.loads(runner.invoke(app, ["search", "-c", "acme", REMOTE, "--json"]).stdout)
    assert "pages" not in plain
