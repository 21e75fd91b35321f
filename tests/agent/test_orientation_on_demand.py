"""The orientation on demand (issue 43): the `orientation()` primitive, in a turn's sandbox and in a
process that reads versions itself (MCP), and `sleuth orientation` print exactly what a turn's model
was given as its first message, for the same contexts and request settings."""

from __future__ import annotations

import asyncio

import pytest
from typer.testing import CliRunner

from sleuth.agent.turn import TurnRequest
from sleuth.cli.app import app
from sleuth.models.scripted import code, final_call
from sleuth.sdk.knowledge import Knowledge, ScopedContext
from tests.agent.support import RuntimeFactory

MODEL = "openai:gpt-test"
PROMPT, GUARDRAILS = "Answer in one sentence.", "Never guess prices."
TOOLS = ["search_source", "read_page", "orientation"]


def test_the_primitive_and_the_command_print_what_the_model_was_given(
    make_runtime: RuntimeFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    runtime = make_runtime([code("print(await orientation())", "Read my orientation"), final_call(), "Done."])
    query = runtime.ask(
        TurnRequest(
            ask="What am I told?",
            scope=["acme"],
            model=MODEL,
            system_prompt=PROMPT,
            guardrails=GUARDRAILS,
            tools=TOOLS,
            max_tool_output_chars=100_000,
        )
    )
    assert query.status == "completed", query.error
    calls = runtime.scripted.calls  # type: ignore[attr-defined]
    given = calls[0].messages[0].content
    assert "## Contexts in scope" in given
    assert "## Guardrails\nNever guess prices." in given and "def query_db(" not in given  # its settings

    # in the turn's sandbox: the turn's own, with no argument
    step = next(m for m in calls[1].messages if m.role == "tool")
    assert step.content.rstrip("\n") == given

    # in a process that reads the version itself (as MCP does): the same settings, the same text
    home = runtime.home
    context = home.find("acme")
    live = context.live_version()
    assert live is not None
    knowledge = Knowledge([ScopedContext("acme", context.version_dir(live))])
    try:
        same = knowledge.orientation(
            tools=TOOLS, system_prompt=PROMPT, guardrails=GUARDRAILS, max_tool_output_chars=100_000
        )
        assert asyncio.run(same) == given
        default = asyncio.run(knowledge.orientation())
        assert default != given and "def query_db(" in default and "Never guess prices." not in default
    finally:
        knowledge.close()

    # the command line: the same text, the model's profile and protocol from the catalog
    monkeypatch.setenv("SLEUTH_HOME", str(home.root))
    tools = [arg for name in TOOLS for arg in ("--tool", name)]
    result = CliRunner().invoke(
        app,
        [
            "orientation",
            "--context",
            "acme",
            "--model",
            MODEL,
            *tools,
            "--system-prompt",
            PROMPT,
            "--guardrails",
            GUARDRAILS,
            "--max-tool-output-chars",
            "100000",
        ],
    )
    assert result.exit_code == 0, result.output
    assert result.output == given + "\n"


def test_a_turn_with_its_own_settings_answers_with_them(make_runtime: RuntimeFactory) -> None:
    """Arguments left None take the turn's; one given is used: the text a turn with it would get."""
    runtime = make_runtime(
        [
            code("print(len(await orientation(profile='small')))"),
            final_call(),
            "Done.",
        ],
        protocol="text",
    )
    query = runtime.ask(TurnRequest(ask="What am I told?", scope=["acme"], model=MODEL))
    assert query.status == "completed", query.error
    calls = runtime.scripted.calls  # type: ignore[attr-defined]
    given = calls[0].messages[0].content
    step = next(m.content for m in calls[1].messages if m.content.startswith("Output of the step"))
    chars = int(step.split(":\n", 1)[1].split()[0])
    assert 0 < chars < len(given) // 2  # the small profile's rules replace the standard reference
