"""`sleuth mcp`: the MCP server (spec/api.md §11) over stdio, for local agents, as the local admin."""

from __future__ import annotations

from typing import Annotated

import typer

from sleuth.cli.app import app, context_missing, opened
from sleuth.store.contexts.home import ContextNotFound


@app.command("mcp")
def mcp_cmd(
    context: Annotated[
        str | None,
        typer.Option("--context", help="Serve only this context (its slug); default: every context."),
    ] = None,
) -> None:
    """Serve MCP over stdin/stdout (for local agents) over the home `sleuth contexts` names, until the
    client disconnects."""
    # Imported here: the MCP SDK is only needed by this command, not by every CLI start.
    from sleuth.api.mcp import serve_stdio

    home, settings = opened()
    try:
        serve_stdio(home, settings, only=context)
    except ContextNotFound:
        raise context_missing(context or "", home) from None
