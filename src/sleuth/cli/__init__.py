"""The `sleuth` command line. Each module registers its commands on the one Typer app."""

from sleuth.cli import (
    answer,
    connectors,
    contexts,
    evaluate,
    explore,
    mcp,
    operate,
    orientation,
    packs,
    profile,
    serve,
)
from sleuth.cli.app import app

__all__ = [
    "answer",
    "app",
    "connectors",
    "contexts",
    "evaluate",
    "explore",
    "main",
    "mcp",
    "operate",
    "orientation",
    "packs",
    "profile",
    "serve",
]


def main() -> None:
    app()  # a reader that left (`| head -1`) ends a command quietly: click exits 1 on EPIPE
