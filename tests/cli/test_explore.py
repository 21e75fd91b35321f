"""`sleuth explore` (issue 27, item 4): the manifest that fits a context's sources, by the rules and with
a model reached over the OpenAI wire format (a real HTTP server on 127.0.0.1 that answers as a model
would), written where `sleuth compile --manifest` reads it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from sleuth.cli import app
from sleuth.compile.manifest import load_manifest
from tests.models.wire import Canned, openai_completion, wire_server

PROPOSAL = {
    "template": "knowledge-base",
    "confidence": 0.85,
    "reasons": ["both sources are policies naming an owner and a review date"],
    "artifact_types": [
        {"name": "Document", "kind": "doc"},
        {
            "name": "Policy",
            "kind": "entity",
            "format": "sqlite",
            "columns": [{"name": "title"}, {"name": "owner"}, {"name": "reviewed"}],
            "natural_key": ["title"],
        },
    ],
}


def _completion(body: dict[str, Any]) -> Canned:
    usage = {"prompt_tokens": 900, "completion_tokens": 120, "total_tokens": 1020}
    return Canned(body=openai_completion(json.dumps(PROPOSAL), usage=usage, model=body["model"]))


def test_explore_by_the_rules_then_with_a_model(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy"):
        monkeypatch.delenv(name, raising=False)
    home = tmp_path / "home"
    monkeypatch.setenv("SLEUTH_HOME", str(home))
    docs = tmp_path / "docs"
    docs.mkdir()
    for topic in ("travel", "leave"):
        (docs / f"{topic}.md").write_text(
            f"# {topic.title()} policy\n\nOwner: People team. Reviewed 2026-01-05.\n\n"
            f"This policy says how {topic} is requested and approved.\n",
            encoding="utf-8",
        )
    runner = CliRunner()
    assert runner.invoke(app, ["compile", str(docs), "-c", "pol"]).exit_code == 0

    rules = runner.invoke(app, ["explore", "-c", "pol", "--json"])
    assert rules.exit_code == 0, rules.output
    found = json.loads(rules.output)
    assert (
        found["proposed_by"] == "rules" and found["sampled"] == 2 and found["reasons"][0].startswith("read 2")
    )

    missing = runner.invoke(app, ["explore", "-c", "pol", "--model", "local/designer"])
    assert missing.exit_code == 2 and "local/designer" in missing.output  # not in the catalog

    with wire_server(Canned(500, {"error": {"message": "no"}}), "/v1", respond=_completion) as wire:
        (home / "config.toml").write_text(
            f'[models."local/designer"]\nprovider = "openai-compatible"\nmodel = "designer"\n'
            f'base_url = "{wire.url}"\napi_key = "unused"\n',
            encoding="utf-8",
        )
        out = tmp_path / "manifest.json"
        asked = runner.invoke(app, ["explore", "-c", "pol", "--model", "local/designer", "--out", str(out)])
        assert asked.exit_code == 0, asked.output
        assert "Knowledge base (knowledge-base) by local/designer, confidence 85%" in asked.output
        assert "types: Document (doc), Policy (entity)" in asked.output
        assert "without a model, a curate skips Policy" in asked.output
        assert (
            len(wire.requests) == 1
            and "travel.md (markdown, 1 page read" in wire.requests[0].body["messages"][1]["content"]
        )
    manifest = load_manifest(out)  # what the model proposed is a manifest `sleuth compile` accepts
    assert [t.name for t in manifest.curate.artifacts.artifact_types] == ["Document", "Policy"]
