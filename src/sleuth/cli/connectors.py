"""`sleuth connectors …`: a context's connectors from the terminal (issue 27): add one, list them with
their last sync, sync (then curate incrementally), remove. The same registry, sync and limits as the
API; a folder connector may name any folder the user running the command can read."""

from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass
from typing import Annotated, Any

import typer
from rich.table import Table

from sleuth.cli.app import FAILED, USAGE, app, console, err, fail, failure, find_context, opened, say, styled
from sleuth.compile.connectors import registry
from sleuth.compile.connectors.base import ConnectorConfigError, ConnectorError
from sleuth.compile.connectors.configs import KIND_SPECS, KINDS
from sleuth.compile.connectors.kinds import build
from sleuth.compile.connectors.sync import SyncReport
from sleuth.compile.errors import CompileError
from sleuth.compile.pipeline import compile_context
from sleuth.errors import Conflict, Invalid
from sleuth.models.embedder import EmbedderError
from sleuth.server.connectors import failure_text, sync_connector
from sleuth.settings import Settings
from sleuth.store.contexts.home import ContextDir, Home
from sleuth.store.contexts.lock import lock_database
from sleuth.store.records.secrets import SecretBox

connectors_app = typer.Typer(
    help="Sources that stay in sync, of four kinds: git (a repository's branch or tag), folder (a folder "
    "of this machine), s3 (a bucket prefix) and web (pages, a sitemap or a site below a URL).",
    short_help="Sources that stay in sync: git, folder, s3, web.",
    no_args_is_help=True,
)
app.add_typer(connectors_app, name="connectors")


def _secret(pairs: list[str]) -> dict[str, str]:
    """`KEY=VALUE`, or `KEY=env:NAME` to read the value from the environment (not the shell history)."""
    found: dict[str, str] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise fail(f"--secret {pair!r}: write KEY=VALUE or KEY=env:VARIABLE", USAGE)
        if value.startswith("env:"):
            value = os.environ.get(value[4:], "")
            if not value:
                raise fail(f"--secret {key}: the environment has no {pair.split('env:', 1)[1]}", USAGE)
        found[key] = value
    return found


@connectors_app.command("add")
def add_cmd(
    context: Annotated[str, typer.Argument(help="The context (slug or id).")],
    name: Annotated[str, typer.Argument(help="The connector's name: the folder its items land in.")],
    kind: Annotated[str, typer.Option(help="One of: " + ", ".join(KINDS) + ".")],
    url: Annotated[
        list[str] | None, typer.Option(help="git: the repository's URL; web: a page to read (repeatable).")
    ] = None,
    sitemap: Annotated[str | None, typer.Option(help="web: a sitemap whose pages to read.")] = None,
    ref: Annotated[str, typer.Option(help="git: the branch or tag.")] = "main",
    path: Annotated[str | None, typer.Option(help="folder: the folder's absolute path.")] = None,
    bucket: Annotated[str | None, typer.Option(help="s3: the bucket.")] = None,
    prefix: Annotated[str, typer.Option(help="s3: the key prefix; web: follow links below this URL.")] = "",
    endpoint_url: Annotated[str | None, typer.Option(help="s3: the endpoint of a non-AWS store.")] = None,
    include: Annotated[
        list[str] | None, typer.Option(help="Only items matching this glob (repeatable).")
    ] = None,
    every: Annotated[
        str | None, typer.Option(help="Sync on a schedule while `sleuth serve` runs: 30m, 1h.")
    ] = None,
    secret: Annotated[
        list[str] | None,
        typer.Option(help="A credential, KEY=VALUE or KEY=env:VARIABLE (sealed, never shown)."),
    ] = None,
) -> None:
    """Add a connector to CONTEXT; `sleuth connectors sync` then brings its items in."""
    config: dict[str, Any] = {"include": list(include or [])}
    urls = list(url or [])
    git = kind == "git"
    given = {"url": urls[0] if git and urls else None, "urls": urls if not git and urls else None,
             "sitemap": sitemap, "ref": ref if git else None, "path": path, "bucket": bucket,
             "prefix": prefix or None, "endpoint_url": endpoint_url}  # fmt: skip
    spec = KIND_SPECS.get(kind)
    for key, value in given.items():
        if value is None:
            continue
        if spec is not None and key not in spec.config.model_fields:  # a flag this kind has no field for
            flag = "--url" if key == "urls" else f"--{key.replace('_', '-')}"
            raise fail(f"{flag} is not an option of a {kind} connector", USAGE)
        config[key] = value
    home, settings = opened()
    ctx = find_context(home, context)
    try:
        registry.check_name(name)
        entry = registry.ConnectorEntry(name, kind, config, registry.parse_every(every))
        if secret:
            entry.secret = SecretBox(home.root).seal(_secret(secret))
        build(
            kind, config, {}, settings, ctx.root / "connectors" / "cache",
            any_folder=True, adding=True, home=home.root,
        )  # fmt: skip
    except ConnectorConfigError as exc:
        raise fail(str(exc), USAGE) from None
    except ConnectorError as exc:
        raise fail(str(exc), FAILED) from None
    with ctx.editing():
        entries = registry.load(ctx)
        if name in entries:
            raise fail(f"context {context!r} has a connector {name!r} already", USAGE)
        entries[name] = entry
        registry.save(ctx, entries)
    say(
        f"added {kind} connector {name} to {context}: "
        f"`sleuth connectors sync {context} {name}` brings its items in"
    )


@connectors_app.command("list")
def list_cmd(
    context: Annotated[str, typer.Argument(help="The context (slug or id).")],
    json_out: Annotated[
        bool, typer.Option("--json", help="Print the connectors as JSON (credentials never shown).")
    ] = False,
) -> None:
    """The context's connectors, with what their last sync did or why it failed."""
    ctx = find_context(opened()[0], context)
    entries = registry.load(ctx).values()
    if json_out:
        typer.echo(json.dumps([entry.public() for entry in entries], ensure_ascii=False, indent=2))
        return
    table = Table("name", "kind", "every", "last sync", "result")
    for entry in entries:
        last = entry.last_sync or {}
        result = entry.last_error or (
            f"{len(last.get('added', []))} added, {len(last.get('changed', []))} changed, "
            f"{len(last.get('deleted', []))} deleted, {last.get('unchanged', 0)} unchanged"
            if last
            else "never synced"
        )
        every = f"{entry.every_s / 60:.0f} min" if entry.every_s else "—"
        table.add_row(entry.name, entry.kind, every, entry.last_attempt_at or "—", result)
    console.print(table)


@dataclass
class Outcome:
    """What one connector's sync did (`report`) or why it failed (`error`)."""

    entry: registry.ConnectorEntry
    report: SyncReport | None = None
    error: str | None = None

    @property
    def changed(self) -> bool:
        return self.report is not None and bool(
            self.report.added or self.report.changed or self.report.deleted
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.entry.name,
            "kind": self.entry.kind,
            "ok": self.error is None,
            "report": self.report.to_json() if self.report is not None else None,
            "error": self.error,
        }


def _sync_one(home: Home, settings: Settings, ctx: ContextDir, entry: registry.ConnectorEntry) -> Outcome:
    """Sync `entry` as the server does (`server.connectors.sync_connector`: under the curate lock, the
    outcome recorded); a failure is returned, not raised, so that one connector that fails leaves the
    others to sync."""
    try:
        database = lock_database(settings.database_url)
        report = sync_connector(home, ctx, entry, settings, machine_user=True, database=database)
    except Exception as exc:  # recorded with the connector already; said here, in the same words
        return Outcome(entry, error=failure_text(exc))
    return Outcome(entry, report=report)


def _said(outcome: Outcome) -> None:
    """One connector's outcome for people: what changed (and what was skipped), or why it failed."""
    name = outcome.entry.name
    if outcome.report is None:
        say((f"{name}: failed", "red"), f" — {outcome.error}")
        return
    report = outcome.report
    say(f"{name}: {report.summary}" + (f" (commit {report.commit[:12]})" if report.commit else ""))
    for item, why in report.skipped:
        say(f"  skipped {item}: {why}")


@connectors_app.command("sync")
def sync_cmd(
    context: Annotated[str, typer.Argument(help="The context (slug or id).")],
    name: Annotated[str | None, typer.Argument(help="The connector (default: every one).")] = None,
    curate: Annotated[bool, typer.Option(help="Curate after a sync that changed anything.")] = True,
    json_out: Annotated[
        bool, typer.Option("--json", help="Print each connector's outcome and the curate as JSON.")
    ] = False,
) -> None:
    """Fetch what is new or changed, delete what is gone, then curate incrementally.

    Every connector is synced even when one fails; each one's outcome is printed (progress on
    stderr), and the command exits 1 when any failed."""
    home, settings = opened()
    ctx = find_context(home, context)
    entries = registry.load(ctx)
    chosen = [entries[name]] if name in entries else list(entries.values()) if name is None else []
    if not chosen:
        raise fail(
            f"context {context!r} has no connector {name!r}" if name else "no connectors to sync",
            USAGE,
            machine="invalid_request" if json_out else None,
        )
    outcomes: list[Outcome] = []
    for n, entry in enumerate(chosen, 1):
        err.print(
            styled((f"[{n}/{len(chosen)}]", "dim"), f" {entry.name} ({entry.kind}): syncing…"),
            highlight=False,
        )
        began = time.monotonic()
        outcome = _sync_one(home, settings, ctx, entry)
        took = f"{time.monotonic() - began:.1f} s"
        err.print(
            styled(
                (f"[{n}/{len(chosen)}]", "dim"),
                f" {entry.name}: ",
                ("synced", "green") if outcome.error is None else ("failed", "red"),
                f" in {took}",
            ),
            highlight=False,
        )
        outcomes.append(outcome)
        if not json_out:
            _said(outcome)
    failed = [o.entry.name for o in outcomes if o.error is not None]
    curated: str | None = None
    if curate and any(o.changed for o in outcomes):
        err.print(f"curating {context}…", highlight=False)
        try:
            report = compile_context(ctx.info().slug, home=home, settings=settings)
        except (Invalid, Conflict, CompileError, EmbedderError) as exc:
            raise failure(exc) from None
        curated = report.version or report.parent
        if not json_out:
            say(f"curated {context}: version {curated} is live")
    if json_out:
        typer.echo(
            json.dumps(
                {
                    "context": ctx.info().slug,
                    "connectors": [o.to_json() for o in outcomes],
                    "curated": curated,
                },
                ensure_ascii=False,
                indent=2,
            )
        )
    if failed:
        synced = len(outcomes) - len(failed)
        raise fail(
            f"{len(failed)} of {len(outcomes)} connectors failed to sync ({', '.join(failed)})"
            + (f"; the other {synced} synced" if synced else ""),
            FAILED,
        )


@connectors_app.command("remove")
def remove_cmd(
    context: Annotated[str, typer.Argument(help="The context (slug or id).")],
    name: Annotated[str, typer.Argument(help="The connector to remove, with the files it brought.")],
) -> None:
    """Remove a connector and the files it brought (the next curate drops them)."""
    ctx = find_context(opened()[0], context)
    with ctx.editing():
        if not registry.remove(ctx, name):
            raise fail(f"context {context!r} has no connector {name!r}", USAGE)
    say(f"removed {name}: curate {context} to drop its files from the live version")
