"""`sleuth db check|init|prune-jobs` and `sleuth storage gc`: what an operator of a deployment runs
(docs/deploy.md, Operating). The work is in `server/db_admin.py`, `server/stale_jobs.py` and
`server/storage_gc.py`; here only the options and the lines printed."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Annotated

import typer
from pydantic import ValidationError

from sleuth.cli.app import FAILED, USAGE, app, fail, failure, say
from sleuth.errors import Error
from sleuth.format.problems import first_problem
from sleuth.settings import Settings, current
from sleuth.store.contexts.home import Home

db_app = typer.Typer(
    no_args_is_help=True,
    help="The server database: check it, install or upgrade its schema, prune stale queue jobs.",
)
storage_app = typer.Typer(
    no_args_is_help=True, help="The shared storage (SLEUTH_STORAGE_URL): remove what nothing refers to."
)
app.add_typer(db_app, name="db")
app.add_typer(storage_app, name="storage")

UNITS = {"": 1.0, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}


def _read() -> tuple[Path, Settings]:
    """The home's root and the settings, read once. Not `opened()`: with a storage it connects to the
    database before a check could say why that fails."""
    try:
        settings = current()
    except ValidationError as exc:
        raise fail(first_problem(exc), USAGE) from None
    return Home().root, settings


def duration_s(option: str, value: str) -> float:
    match = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([smhd]?)\s*", value)
    if not match:
        raise fail(f"{option} {value!r}: a duration such as 90s, 30m, 1h or 2d", USAGE)
    return float(match.group(1)) * UNITS[match.group(2)]


def _size(count: int) -> str:
    if count < 1024:
        return f"{count} bytes"
    amount, unit = count / 1024, "KiB"
    for bigger in ("MiB", "GiB", "TiB"):
        if amount < 1024:
            break
        amount, unit = amount / 1024, bigger
    return f"{amount:.1f} {unit}"


@db_app.command("check")
def check_cmd() -> None:
    """Say whether the server database answers, its schema is installed and current, and the storage
    answers: one line each; exit status 1 when any fails."""
    from sleuth.server.db_admin import check

    root, settings = _read()
    verdicts = check(settings, root)
    for verdict in verdicts:
        mark = {True: ("ok", "green"), False: ("failed", "red"), None: ("skipped", "dim")}[verdict.ok]
        say((f"{mark[0]:<8}", mark[1]), (f"{verdict.name:<10}", "bold"), verdict.text)
    if any(verdict.ok is False for verdict in verdicts):
        raise typer.Exit(FAILED)


@db_app.command("init")
def init_cmd() -> None:
    """Install or upgrade the schema (Sleuth's tables; on PostgreSQL, the job queue's), as every server
    and worker does at its start: run it once before starting them. Safe to run again."""
    from sleuth.server.db_admin import database_target, init
    from sleuth.store.database import redacted

    root, settings = _read()
    try:
        done, verdicts = init(settings, root)
    except Error as exc:
        raise failure(exc) from None
    say("the server database: ", redacted(database_target(settings, root)))
    for line in done:
        say(line)
    for verdict in verdicts:
        if not verdict.ok:
            raise fail(verdict.text)


@db_app.command("prune-jobs")
def prune_jobs_cmd(
    older_than: Annotated[
        str, typer.Option(help="Leave a job whose record ended, or whose worker is gone, this long first.")
    ] = "1h",
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Say what would go; remove nothing.")] = False,
) -> None:
    """Remove the queue's jobs left `doing` that no worker will finish: their turn or task ended (or
    is gone) longer ago than --older-than, or their worker is gone and they started longer ago."""
    from sleuth.server.db_admin import open_checked
    from sleuth.server.stale_jobs import prune_jobs

    limit = duration_s("--older-than", older_than)
    root, settings = _read()
    try:
        database = open_checked(settings, root)
        pruned = prune_jobs(
            database, older_than_s=limit, stalled_s=3 * settings.worker_heartbeat_s, dry_run=dry_run
        )
    except Error as exc:
        raise failure(exc) from None
    for job in pruned.stale:
        say(f"job {job.id} ({job.task_name}): ", job.why)
    if dry_run:
        say(f"jobs doing: {pruned.doing}; stale: {len(pruned.stale)}; nothing removed (--dry-run)")
    else:
        say(f"jobs doing: {pruned.doing}; stale: {len(pruned.stale)}; removed: {pruned.removed}")


@storage_app.command("gc")
def gc_cmd(
    grace: Annotated[
        str,
        typer.Option(
            help="Keep what has been unused for less than this (at least 6h): a curate may be publishing it."
        ),
    ] = "24h",
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Say what would go; remove nothing.")] = False,
) -> None:
    """Remove from the shared storage what nothing refers to: blobs no version, head or task names,
    the versions of deleted contexts, the files of tasks that are gone, the uploads of tasks that ended."""
    from sleuth.server.db_admin import open_checked, storage_verdict
    from sleuth.server.storage_gc import collect
    from sleuth.store.storage import open_storage

    grace_s = duration_s("--grace", grace)
    root, settings = _read()
    if not settings.storage_url:
        raise fail("there is no shared storage to collect: SLEUTH_STORAGE_URL is not set", USAGE)
    verdict = storage_verdict(settings)
    if not verdict.ok:
        raise fail(verdict.text)
    try:
        report = collect(
            open_storage(settings.storage_url), open_checked(settings, root), grace_s=grace_s, dry_run=dry_run
        )
    except Error as exc:
        raise failure(exc) from None
    verb = "would go" if dry_run else "removed"
    for kind, swept in report.kinds.items():
        spared = f", {swept.young} kept within the grace ({grace})" if swept.young else ""
        say(f"{kind}: {swept.removed} {verb} ({_size(swept.bytes)}){spared}")
    say(f"{_size(report.bytes)} {'would be freed (--dry-run: nothing removed)' if dry_run else 'freed'}")
