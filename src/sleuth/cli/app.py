"""The `sleuth` command line: the same engine as the server, over the same home (`store.home.resolve_home`).

What a person reads is written here once: `styled` builds a line from plain text and styled pieces
(nothing in the text is read as markup, so `pip install 'sleuth[openai]'`, a file named `[draft].pdf`
or a model's reply print as they are), and `fail` / `failure` print an error and pick the exit status:

- **1**: the command ran and failed (a context or query not found, a failed turn, a model or part
  missing, a compile whose sources all failed);
- **2**: the command line is wrong (an option's value, a file it names, a request the engine refuses).

`--json` commands print the error envelope (`{"error": {"code", "message"}}`) on stdout instead, for
scripts; people never see the machine code.
"""

from __future__ import annotations

import contextlib
import difflib
import json
import os
import sys
from collections.abc import Iterable
from typing import Annotated

import click
import typer
from rich.console import Console
from rich.text import Text
from typer.completion import show_callback
from typer.core import TyperArgument, TyperOption

from sleuth.errors import Invalid
from sleuth.settings import Settings, current
from sleuth.store.contexts.home import ContextDir, ContextNotFound, Home, resolve_home

FAILED = 1
USAGE = 2


class _Console(Console):
    """rich's console, except that a closed pipe raises `BrokenPipeError` where it is written to, instead
    of `SystemExit(1)` from wherever the write happened (a turn's thread included): the caller decides
    what a reader that left means (`sleuth ask` cancels its turn)."""

    def on_broken_pipe(self) -> None:
        self.quiet = True  # nothing more to write here
        raise BrokenPipeError(32, "the reader of this output went away")


def quiet_exit() -> typer.Exit:
    """Whoever read our output left (`| head -1`): say nothing more, and point stdout at /dev/null so
    that the interpreter's last flush does not complain either."""
    with contextlib.suppress(OSError, ValueError):
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    return typer.Exit(141)  # 128 + SIGPIPE, as a shell reports a writer a closed pipe stopped


def _console(stderr: bool = False) -> Console:
    """Lines are never wrapped (a path or an id stays whole for grep and copy), and output piped to a
    file or another program is not cut at 80 columns (rich's guess without a terminal): tables keep
    their width."""
    stream = sys.stderr if stderr else sys.stdout
    wide = not stream.isatty() and "COLUMNS" not in os.environ
    return _Console(stderr=stderr, width=200 if wide else None, soft_wrap=True)


def _value_name(param: TyperOption, ctx: click.Context) -> str | None:
    """What `--help` shows after an option that takes a value: its metavar if it has one, else its name
    (`--context CONTEXT`, `--top-k TOP_K`), never a Python type tag (`<str>`, `<list[str]>`); a flag
    shows nothing after it."""
    if param.metavar is not None:
        return param.metavar
    if param.is_flag or param.count:
        return None
    return (param.name or "value").upper()


def _no_type(param: TyperArgument, ctx: click.Context) -> str | None:
    """An argument's help line is its name and help: no type tag after the name."""
    return None


# Typer puts a type tag (`<str>`, `<list[str]>`, `<int range>`) after every parameter in `--help`, and
# has no setting to leave it out: its two parameter classes are told here what to show instead.
setattr(TyperOption, "display_type_rich", _value_name)  # noqa: B010
setattr(TyperArgument, "display_type_rich", _no_type)  # noqa: B010

app = typer.Typer(
    rich_markup_mode=None,
    no_args_is_help=True,
    # Typer's `--install-completion` edits ~/.bashrc without asking: ours prints the line to add
    # instead (`_root`), and `--show-completion` prints the script as before.
    add_completion=False,
    help="Sleuth: compile a corpus into a context, then ask it questions with verified citations.",
    epilog="Exit status: 0 done, 1 the command failed, 2 the command line is wrong.",
)


def _completion_init() -> None:
    """Register the shells' completion classes, as `add_completion` would have. Typer keeps this in a
    private module: a Typer that moved it loses `--show-completion`, never the CLI."""
    with contextlib.suppress(ImportError, AttributeError):
        from typer._completion_classes import completion_init

        completion_init()


_completion_init()
console = _console()
err = _console(stderr=True)


def _print_version(value: bool) -> None:
    if value:
        from sleuth import __version__

        typer.echo(f"sleuth {__version__}")
        raise typer.Exit()


def _shell() -> str:
    """The shell this runs under (as Typer detects it, else `$SHELL`), `bash` when neither says."""
    found = None
    with contextlib.suppress(Exception):  # Typer's private guess (shellingham), when it has one
        from typer._completion_shared import _get_shell_name

        found = _get_shell_name()
    return found or os.path.basename(os.environ.get("SHELL", "")) or "bash"


def completion_line(shell: str, prog: str = "sleuth") -> tuple[str, str]:
    """Where to add what, for `prog`'s completion in `shell`: (the file, the line)."""
    if shell == "zsh":
        return "~/.zshrc", f'autoload -Uz compinit && compinit && eval "$({prog} --show-completion)"'
    if shell == "fish":
        return f"~/.config/fish/completions/{prog}.fish", f"{prog} --show-completion | source"
    if shell in ("powershell", "pwsh"):
        return "$PROFILE", f"{prog} --show-completion | Out-String | Invoke-Expression"
    return "~/.bashrc", f'eval "$({prog} --show-completion)"'


def _show_completion(ctx: typer.Context, param: typer.CallbackParam, value: bool) -> None:
    if value and not ctx.resilient_parsing:
        show_callback(ctx, param, value)  # prints the script and exits


def _install_completion(ctx: typer.Context, value: bool) -> None:
    if not value or ctx.resilient_parsing:
        return
    prog = ctx.find_root().info_name or "sleuth"
    where, line = completion_line(_shell(), prog)
    typer.echo(f"To complete {prog}'s commands in your shell, add this line to {where}:\n\n    {line}\n")
    typer.echo("(Nothing was changed: `--show-completion` prints the script itself.)")
    raise typer.Exit()


@app.callback()
def _root(
    version: Annotated[
        bool,
        typer.Option("--version", callback=_print_version, is_eager=True, help="Print the version and exit."),
    ] = False,
    install_completion: Annotated[
        bool,
        typer.Option(
            "--install-completion",
            callback=_install_completion,
            is_eager=True,
            expose_value=False,
            help="Print the line that turns on completion in your shell (nothing is changed).",
        ),
    ] = False,
    show_completion: Annotated[
        bool,
        typer.Option(
            "--show-completion",
            callback=_show_completion,
            is_eager=True,
            expose_value=False,
            help="Print the completion script for your shell.",
        ),
    ] = False,
) -> None:
    """Sleuth: compile a corpus into a context, then ask it questions with verified citations."""


Part = str | tuple[str, str]


def styled(*parts: Part) -> Text:
    """One line from plain text and `(text, style)` pieces; no part is read as markup."""
    line = Text()
    for part in parts:
        if isinstance(part, tuple):
            line.append(part[0], style=part[1])
        else:
            line.append(part)
    return line


def say(*parts: Part) -> None:
    """Print one line for people on stdout (see `styled`)."""
    console.print(styled(*parts), highlight=False)


def fail(
    message: str, code: int = FAILED, *, hint: str | None = None, machine: str | None = None
) -> typer.Exit:
    """Print an error for people to stderr and return the Exit to raise. `machine`: the error code a
    `--json` command prints on stdout in the envelope (spec/api.md §4) as well."""
    if machine is not None:
        typer.echo(json.dumps({"error": {"code": machine, "message": message}}, ensure_ascii=False))
    err.print(styled(("error:", "red"), " ", message), highlight=False)
    if hint:
        err.print(styled(("hint:", "dim"), " ", hint), highlight=False)
    return typer.Exit(code)


def failure(exc: BaseException, *, hint: str | None = None) -> typer.Exit:
    """Sleuth's error as people read it: its message, and the exit status of its kind (`Invalid`: the
    command line is wrong; any other: the command failed)."""
    return fail(str(exc), USAGE if isinstance(exc, Invalid) else FAILED, hint=hint)


def did_you_mean(name: str, known: Iterable[str]) -> str | None:
    """`did you mean 'acme'?` for a name close to one that exists."""
    close = difflib.get_close_matches(name, list(known), n=3, cutoff=0.6)
    return f"did you mean {' or '.join(repr(c) for c in close)}?" if close else None


def context_missing(
    slug: str, home: Home, known: list[str] | None = None, machine: str | None = None
) -> typer.Exit:
    """`no context 'x' in <home> (why this home)`, with the nearest names or how to make one: what every
    command says of a context it cannot find."""
    known = [info.slug for _ctx, info in home.contexts()] if known is None else known
    hint = did_you_mean(slug, known) or (
        f"contexts here: {', '.join(known)}"
        if known
        else f"make one with: sleuth compile DIR --context {slug}"
    )
    return fail(f"no context {slug!r} in {home_where(home)}", FAILED, hint=hint, machine=machine)


def home_where(home: Home) -> str:
    """The home's path, and why it is this one when it is the one the rule found (`resolve_home`)."""
    choice = resolve_home()
    return choice.describe() if home.root == choice.path.resolve() else str(home.root)


def opened() -> tuple[Home, Settings]:
    """The command's settings (`SLEUTH_*`), read once at its start, and the home they open: a command
    calls this first and hands both down to whatever it runs, which reads no environment itself."""
    from sleuth.store.contexts.replica import open_home  # the database and storage layers load only here

    settings = current()
    return open_home(None, settings), settings


def opened_when_ready() -> tuple[Home, Settings]:
    """`opened()` for a process of a deployment (`serve`, `worker`, `share`): it first waits, up to
    `startup_wait_s`, for the database and the storage it names to answer, then exits with one sentence
    when they do not (`DependencyUnavailable`), never a traceback."""
    from sleuth.server.startup import DependencyUnavailable, wait_for_dependencies
    from sleuth.store.contexts.home import Home as LocalHome

    settings = current()
    if settings.database_url or settings.storage_url:
        try:
            wait_for_dependencies(settings, LocalHome(None).root)
        except DependencyUnavailable as exc:
            raise failure(exc) from None
    from sleuth.store.contexts.replica import open_home

    return open_home(None, settings), settings


def find_context(home: Home, name: str) -> ContextDir:
    """The context `name` (slug or id), or the error every command gives for one that is missing."""
    try:
        return home.find(name)
    except (ContextNotFound, ValueError):
        raise context_missing(name, home) from None
