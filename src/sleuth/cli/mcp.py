"""`sleuth mcp`: the MCP server (spec/api.md §11) over stdio, for local agents, as the local admin."""

from __future__ import annotations

from typing import Annotated

import typer

from sleuth.cli.app import app, fail
from sleuth.store.home import ContextNotFound
from sleuth.store.replica import open_home


@app.command("mcp")
def mcp_cmd(
    context: Annotated[
        str | None,
        typer.Option("--context", help="Serve only this context (its slug); default: every context."),
    ] = None,
) -> None:
    """Serve MCP over stdin/stdout (for local agents) over $SLEUTH_HOME until the client disconnects."""
    # Imported here: the MCP SDK is only needed by this command, not by every CLI start.
    from sleuth.api.mcp import serve_stdio

    try:
        serve_stdio(open_home(), only=context)
    except ContextNotFound:
        raise fail(f"no context {context!r}") from None
