"""The `sleuth` command line: the same engine as the server, over the same `$SLEUTH_HOME`."""

from __future__ import annotations

import typer
from rich.console import Console

app = typer.Typer(
    add_completion=False,
    no_args_is_help=True,
    help="Sleuth: compile a corpus into a context, then ask it questions with verified citations.",
)
console = Console()
err = Console(stderr=True)


def fail(message: str, code: int = 2) -> typer.Exit:
    """Print an error to stderr and return the Exit to raise."""
    err.print(f"[red]error:[/red] {message}", highlight=False)
    return typer.Exit(code)
