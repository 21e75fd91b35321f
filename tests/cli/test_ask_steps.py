"""`sleuth ask`'s step log (issue 39, item A): a run of the same SDK call is one line with its count and
results, and on a terminal the steps give way to one summary line once the answer is there."""

from __future__ import annotations

import io
import itertools
from typing import Any

from rich.console import Console
from typer.testing import CliRunner

from sleuth.cli import app
from sleuth.cli.turn_view import StepPrinter, first_argument, grouped_calls, steps_summary

SQL = '\'SELECT label, section, title, header, year, unit, text, value, source, page, start, "end", column_n'


def _call(fn: str, args: str, result: dict[str, Any], ms: float = 4.0, ok: bool = True) -> dict[str, Any]:
    return {"fn": fn, "args": args, "result": result, "duration_ms": ms, "ok": ok}


def _step(calls: list[dict[str, Any]], step_id: str = "step_1") -> dict[str, Any]:
    return {
        "type": "response.step",
        "step_id": step_id,
        "status": "completed",
        "cost": {"decide_ms": 0, "execute_ms": 350},
        "tool_calls": calls,
        "output": "E1 handbook.docx p. 1",
    }


def _printed(printer_of: Any, *events: dict[str, Any]) -> str:
    buffer = io.StringIO()
    printer = printer_of(Console(file=buffer, width=200, soft_wrap=True))
    for event in events:
        printer(event)
    return buffer.getvalue()


def test_the_first_argument_of_a_call_is_read_whole() -> None:
    assert first_argument("'a, b', top_k=5") == "'a, b'"
    assert first_argument("'it\\'s, here', 2") == "'it\\'s, here'"
    assert first_argument("[3 items], 'q', max_total=12") == "[3 items]"
    assert first_argument("{'a': 1, 'b': 2}, x=1") == "{'a': 1, 'b': 2}"
    assert first_argument(SQL) == SQL  # cut before its closing quote: the whole of it


def test_repeated_calls_collapse_into_one_line_with_their_results() -> None:
    calls = [
        _call("search_source", "'remote days', top_k=10", {"hits": 10, "top": "a.md p.1"}),
        _call("query_db", SQL, {"rows": 5, "truncated": False}, 8),
        _call("query_db", SQL, {"rows": 0, "truncated": False}, 1),
        _call("query_db", SQL, {"rows": 0, "truncated": False}, 1),
        _call("query_db", "'SELECT count(*) FROM products'", {"rows": 1, "truncated": False}),
    ]
    assert [len(group) for group in grouped_calls(calls)] == [1, 3, 1]
    out = _printed(lambda console: StepPrinter(console), _step(calls))
    lines = [line for line in out.splitlines() if line.startswith("  · ")]
    assert len(lines) == 3, out
    assert lines[0].startswith("  · search_source('remote days', top_k=10) → hits=10, top=a.md p.1")
    assert "query_db('SELECT label" in lines[1] and "×3 → rows=5, 0, 0 (10 ms)" in lines[1]
    assert lines[2].startswith("  · query_db('SELECT count(*) FROM products') → rows=1")
    # --verbose shows every call on its own line
    verbose = _printed(lambda console: StepPrinter(console, verbose=True), _step(calls))
    assert sum(line.startswith("  · query_db(") for line in verbose.splitlines()) == 4


def test_a_failed_call_in_a_run_is_named() -> None:
    calls = [
        _call("query_db", "'SELECT 1'", {"rows": 1}),
        _call("query_db", "'SELECT 1'", {}, ok=False),
    ]
    out = _printed(lambda console: StepPrinter(console), _step(calls))
    assert "query_db('SELECT 1') ×2 → rows=1, failed" in out and "1 failed" in out


def test_the_summary_line_counts_steps_calls_and_time() -> None:
    steps = [
        _step(
            [
                _call("search_source", "'q'", {"hits": 10}),
                *[_call("query_db", SQL, {"rows": 0})] * 3,
            ]
        ),
        {**_step([_call("search_in_sources", "[3 items], 'q'", {"hits": 12})], "step_2"), "cost": {
            "decide_ms": 50, "execute_ms": 100}},
    ]  # fmt: skip
    line = steps_summary(steps).plain
    assert line.startswith("✓ 2 steps, 5 SDK calls (search_source, query_db ×3, search_in_sources) in 0.5 s")
    assert "--verbose" in line
    failed = steps_summary([{**steps[0], "status": "failed"}]).plain
    assert failed.startswith("✓ 1 step, 4 SDK calls") and "1 failed" in failed


def test_on_a_terminal_the_steps_give_way_to_the_summary_line() -> None:
    buffer = io.StringIO()
    terminal = Console(file=buffer, force_terminal=True, width=120, height=40)
    printer = StepPrinter(terminal, offline=True, live=True)
    printer({"type": "response.step", "step_id": "step_1", "status": "running", "commentary": "Search."})
    printer(_step([*[_call("query_db", SQL, {"rows": 0})] * 2]))
    printer.finish(completed=True)
    out = buffer.getvalue()
    assert "▶ step_1" in out  # drawn while the turn ran …
    last = out.rstrip("\n").rsplit("\n", 1)[-1]
    assert "1 step, 2 SDK calls (query_db ×2)" in last and "▶" not in last  # … then one line
    assert "\x1b[2K" in out  # the live lines were erased (rich's transient display)

    kept = io.StringIO()
    failing = StepPrinter(Console(file=kept, force_terminal=True, width=120, height=40), live=True)
    failing(_step([_call("query_db", SQL, {"rows": 0})]))
    failing.finish(completed=False)  # a turn that did not complete keeps its whole log
    assert kept.getvalue().rstrip("\n").rsplit("\n", 1)[-1].startswith("    E1 handbook.docx")


def test_ask_piped_keeps_the_step_log_with_repeated_calls_collapsed(runner: CliRunner) -> None:
    result = runner.invoke(app, ["ask", "-c", "acme", "How many days a week can employees work remotely?"])
    assert result.exit_code == 0, result.output
    out = result.output
    assert "▶ step_1" in out and "completed decide" in out and "✓" not in out  # not a terminal
    calls = [line for line in out.splitlines() if line.startswith("  · ")]
    keys = [(line.split("(", 1)[0], first_argument(line.split("(", 1)[1])) for line in calls]
    assert all(a != b for a, b in itertools.pairwise(keys)), calls  # no run left uncollapsed
    assert any("×" in line for line in calls), calls
