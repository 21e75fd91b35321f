"""What a real small model wrote, and what it is told (issue 46). Qwen2.5-Coder-1.5B, asked through the
OpenAI-compatible API, sent `async def run_python(code, commentary): …` with `from final import *` and
`from query_db import *` inside, as if it had to implement the tool and the SDK were modules; the REPL's
`SyntaxError` did not say what to do instead, and the turn spun. A scripted model replays that code
here; the loop and the sandbox are real.

Given the standard rules and reference, the same model copied the reference's signatures into its code
as empty definitions (an `IndentationError`, three steps running) and re-ran the example's search eight
times; the `small` profile shows five calls as they are written and one example that ends in `final`."""

from __future__ import annotations

import ast
import re

from sleuth.agent.actions import misread_tool
from sleuth.agent.orientation import block_a
from sleuth.agent.turn import TurnRequest
from sleuth.models.scripted import code, final_call
from sleuth.sdk.primitives import primitives
from tests.agent.support import RuntimeFactory

MODEL = "openai:gpt-test"
#: The first lines of the step the 1.5B model sent (from a real trace, cut).
WRAPPED = (
    "async def run_python(code: str, commentary: str):\n"
    '    print("Running code in the REPL...")\n'
    "    import asyncio\n"
    "    from typing import *\n"
    "    from query_db import *\n"
    "    from final import *\n"
    "\n"
    "    # Your code goes here\n"
)
SEARCH = "hits = await search_source('remote work days per week', top_k=5)\nprint(hits[0].ref)"


def test_code_written_around_the_tool_is_not_run_and_the_model_is_shown_the_body_to_send(
    make_runtime: RuntimeFactory,
) -> None:
    runtime = make_runtime([code(WRAPPED, "Run"), code(SEARCH, "Search"), final_call(), "Nothing found."])
    query = runtime.ask(TurnRequest(ask="How many remote days?", scope=["acme"], model=MODEL))
    assert query.status == "completed", query.error
    wrapped, searched = query.steps[:2]
    assert wrapped.status == "failed" and wrapped.error is not None
    assert wrapped.error["type"] == "StepRejected"
    assert wrapped.output is not None and wrapped.output.startswith(
        "Step not run: do not define `run_python`"
    )
    assert "hits = await search_source(" in wrapped.output  # what to send instead
    assert searched.status == "completed" and searched.fns == ["search_source"]


def test_sdk_names_imported_as_modules_are_refused_with_what_to_do() -> None:
    told = misread_tool("from query_db import *\nrows = query_db('SELECT 1')")
    assert told is not None and told.startswith("Step not run: `query_db` is not a module to import")
    assert misread_tool("import search_source") is not None
    called = misread_tool("await run_python(code='print(1)', commentary='x')")  # a NameError, in a real run
    assert called is not None and called.startswith("Step not run: `run_python` is not a function")
    assert misread_tool("import re\nfrom collections import Counter\nhits = await search_source('x')") is None
    assert misread_tool("def helper(x):\n    return x") is None


def _blocks(text: str) -> list[str]:
    return re.findall(r"```python\n(.*?)```", text, re.S)


def test_the_small_profile_shows_calls_as_written_and_no_signatures_to_copy() -> None:
    small, standard = block_a("small", "text", 10_000, None), block_a("standard", "text", 10_000, None)
    assert len(small) * 4 < len(standard)  # about 2,400 characters against 12,800
    assert "def " not in small.replace("def main()", "")
    calls = [line for line in small.splitlines() if line.startswith("- `")]
    names = {item.name for item in primitives()} | {"final"}
    for line in calls:  # every call shown is a real primitive's, written as code that parses
        snippet = line[3 : line.index("`:")]
        ast.parse(snippet.removeprefix("hits = await ").removeprefix("rows = "))
        assert re.findall(r"(\w+)\(", snippet)[-1 if "print(" in snippet else 0] in names
    step_one, step_two = _blocks(small)
    assert "search_source(" in step_one and step_two.strip() == 'final(evidence=["E2"])'
    only = block_a("small", "native", 10_000, ["search_source"])
    shown = [line for line in only.splitlines() if line.startswith("- `")]
    assert [re.findall(r"(\w+)\(", line)[0] for line in shown] == ["search_source", "final"]


def test_the_small_example_runs_as_written(make_runtime: RuntimeFactory) -> None:
    """Its two steps, sent as they are shown, search the sample and end the loop with a citation."""
    step_one, step_two = _blocks(block_a("small", "text", 10_000, None))
    runtime = make_runtime(
        [f"Search.\n```python\n{step_one}```", f"Done.\n```python\n{step_two}```", "5 [1]."], "text"
    )
    query = runtime.ask(TurnRequest(ask="How many retry attempts are allowed?", scope=["acme"], model=MODEL))
    assert query.status == "completed", query.error
    first, second = query.steps
    assert first.error is None and first.output is not None
    assert re.search(r"^E1 \S+ p\. \d+$", first.output, re.M)  # a label, a file and a page, then text
    assert second.error is None and query.rollup is not None and query.rollup.stop_reason == "final"
