"""Settings declared once (`sleuth.settings`): read from `SLEUTH_*`, validated, listed by
`sleuth serve --help`, and read by each part that has a limit."""

from __future__ import annotations

import pytest
from pydantic import ValidationError
from typer.testing import CliRunner

from sleuth.cli import app
from sleuth.sandbox.limits import HostBudget
from sleuth.server.build import open_server
from sleuth.settings import Settings, current, described, int_range
from sleuth.store.contexts.home import Home


def test_defaults_and_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("SLEUTH_MAX_FILE_BYTES", raising=False)
    assert current().max_file_bytes == Settings.model_fields["max_file_bytes"].default == 250 * 1024 * 1024
    monkeypatch.setenv("SLEUTH_MAX_FILE_BYTES", "1234")
    monkeypatch.setenv("SLEUTH_NOT_A_SETTING", "ignored")
    assert current().max_file_bytes == 1234


def test_a_bad_value_names_its_setting(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SLEUTH_MAX_QUEUED_TURNS", "-1")
    with pytest.raises(ValidationError) as invalid:
        current()
    assert invalid.value.errors()[0]["loc"] == ("max_queued_turns",)
    monkeypatch.setenv("SLEUTH_MAX_QUEUED_TURNS", "many")
    with pytest.raises(ValidationError):
        current()


def test_every_setting_has_help_and_is_listed_by_serve_help() -> None:
    rows = described()
    assert [name for name, _, _ in rows] == ["SLEUTH_" + n.upper() for n in Settings.model_fields]
    assert all(text for _, _, text in rows)
    result = CliRunner().invoke(app, ["serve", "--help"], env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    for name, default, _ in rows:
        assert f"{name} (default {default})" in result.output
    # the serve flags that are settings take their ranges from the declaration
    assert int_range("max_queued_turns") == (0, 10_000) and "[0<=x<=10000]" in result.output
    assert int_range("max_concurrent_turns") == (1, 256) and "[1<=x<=256]" in result.output


def test_the_host_budget_is_read_from_the_settings(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SLEUTH_BUDGET_SPANS", "7")
    monkeypatch.setenv("SLEUTH_BUDGET_HOST_CPU_S", "1.5")
    budget = HostBudget.from_settings(current())  # read where the process starts, then handed in
    assert budget.spans == 7 and budget.host_cpu_s == 1.5
    assert HostBudget.from_settings() == HostBudget()  # left out: the declared defaults, not the env's
    assert budget.rpc_calls == HostBudget().rpc_calls == Settings.model_fields["budget_rpc_calls"].default


def test_a_server_reads_its_settings_once_and_hands_them_down(
    home: Home, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 41 (5): what `/version` shows is what the server's engines run with: its sandbox host's
    embedder threads and its turns' host budget come from the settings read at its start."""
    monkeypatch.setenv("SLEUTH_EMBED_THREADS", "3")
    monkeypatch.setenv("SLEUTH_BUDGET_SPANS", "7")
    state = open_server(home)
    try:
        monkeypatch.setenv("SLEUTH_BUDGET_SPANS", "8")  # too late: read once, at the start
        assert state.settings.embed_threads == 3 and state.settings.budget_spans == 7
        assert state.runtime.sandbox_host.fan_out == {"embed": 3}
        assert state.runtime.budget == HostBudget.from_settings(state.settings)
    finally:
        state.close()
