"""What a real small model wrote, and what it is told (issue 46). Qwen2.5-Coder-1.5B, asked through the
OpenAI-compatible API, sent `async def run_python(code, commentary): …` with `from final import *` and
`from query_db import *` inside, as if it had to implement the tool and the SDK were modules; the REPL's
`SyntaxError` did not say what to do instead, and the turn spun. A scripted model replays that code
here; the loop and the sandbox are real."""

from __future__ import annotations

from sleuth.agent.actions import misread_tool
from sleuth.agent.turn import TurnRequest
from sleuth.models.scripted import code, final_call
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
