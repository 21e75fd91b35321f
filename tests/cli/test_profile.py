"""`sleuth profile` says why its cost column is empty, and how to fill it (issue 39, item 12)."""

from __future__ import annotations

from typer.testing import CliRunner

from sleuth.cli import app


def test_an_unpriced_model_says_why_there_is_no_cost(runner: CliRunner) -> None:
    result = runner.invoke(app, ["profile", "-c", "acme", "--model", "openai:gpt-4.1"])
    assert result.exit_code == 0, result.output
    assert "no cost: openai:gpt-4.1 has no prices" in result.output
    assert "price_input_per_token" in result.output and "config.toml" in result.output
