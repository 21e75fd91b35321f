"""`sleuth pack` and `sleuth restore`: a context as one `.context.zip` and back (spec/context.md §8),
the same work the API's pack and restore tasks run (`server.packs.write_pack`, `restore_pack`)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.progress import Progress

from sleuth.cli.app import FAILED, USAGE, app, err, fail, failure, find_context, opened, say
from sleuth.cli.contexts import PHASE_COLUMNS, RichProgress
from sleuth.errors import Conflict, Invalid, Told
from sleuth.store.contexts.home import ContextNotFound
from sleuth.store.contexts.lock import lock_database


@app.command("pack")
def pack_cmd(
    context: Annotated[str, typer.Argument(help="The context to pack (slug or id).")],
    out: Annotated[
        Path | None, typer.Option("--out", "-o", help="Where to write it (default: ./<slug>.context.zip).")
    ] = None,
) -> None:
    """Write a context as one .context.zip: its sources, manifest and extraction cache, to restore on
    another machine or home without calling a model again."""
    from sleuth.server.packs import write_pack

    home, settings = opened()
    ctx = find_context(home, context)
    target = (out or Path(f"{ctx.info().slug}.context.zip")).resolve()
    if target.is_dir():
        raise fail(f"{target} is a folder: give the file to write", USAGE)
    try:
        with Progress(*PHASE_COLUMNS, console=err, transient=True) as bars:
            database = lock_database(settings.database_url)
            result = write_pack(ctx, target, False, RichProgress(bars), database=database)
    except Conflict as exc:
        raise failure(exc) from None
    except OSError as exc:
        raise fail(f"cannot write {target}: {exc}", FAILED) from None
    say(
        f"packed {result['slug']} into {target}: {result['pack_size']:,} bytes, "
        f"{result['sources_files']} source files, live version {result['live_version'] or 'none'}"
    )


@app.command("restore")
def restore_cmd(
    pack_file: Annotated[Path, typer.Argument(help="A .context.zip written by `sleuth pack` or the API.")],
    context: Annotated[
        str | None,
        typer.Option("--context", "-c", help="The context to restore into (default: the pack's slug)."),
    ] = None,
) -> None:
    """Restore a .context.zip into a new or empty context and curate it (no model is called: the packed
    extraction cache answers)."""
    from sleuth.compile.archives import SourceLimits
    from sleuth.server.context_files import has_sources
    from sleuth.server.packs import check_pack, restore_pack

    if not pack_file.is_file():
        raise fail(f"no such file: {pack_file}", USAGE)
    home, settings = opened()
    try:
        pack = check_pack(pack_file, SourceLimits.of_settings(settings))
    except Told as exc:
        raise fail(exc.message, USAGE) from None
    slug = context or str(pack.get("slug") or "")
    try:
        ctx = home.find(slug)
    except ContextNotFound:
        try:
            ctx = home.create(slug, name=str(pack.get("name") or slug))
        except Invalid as exc:
            raise failure(exc) from None
    else:
        if has_sources(ctx):
            raise fail(
                f"context {slug!r} already has sources: restore needs a new or empty context",
                FAILED,
                hint="restore into another: --context NEW-NAME",
            )
    try:
        with Progress(*PHASE_COLUMNS, console=err, transient=True) as bars:
            database = lock_database(settings.database_url)
            result = restore_pack(
                home, ctx, pack_file, pack, RichProgress(bars), settings=settings, database=database
            )
    except Conflict as exc:
        raise failure(exc) from None
    say(
        f"restored {result['sources_files']} source files into {result['slug']}; "
        f"version {result['live_version']} is live"
    )
