"""`sleuth serve` and `sleuth keys create|list|revoke` (spec/api.md §3, README CLI table)."""

from __future__ import annotations

import json
import logging
import time
from datetime import UTC, datetime
from enum import StrEnum
from typing import TYPE_CHECKING, Annotated, Any

import typer

from sleuth.cli.app import (
    FAILED,
    USAGE,
    app,
    console,
    err,
    fail,
    failure,
    find_context,
    opened,
    opened_when_ready,
    styled,
)
from sleuth.settings import int_range
from sleuth.store.contexts.home import Home

if TYPE_CHECKING:
    from sleuth.store.records.keys import ApiKey

keys_app = typer.Typer(no_args_is_help=True, help="API keys: create (shown once), list, revoke.")
app.add_typer(keys_app, name="keys")


class Role(StrEnum):
    admin = "admin"
    query = "query"


def log_to_stderr(level: str) -> None:
    """The logging of `sleuth serve` and `sleuth worker` (uvicorn's lines too: `api/server.py` sends them
    here): each line starts with its time, ISO 8601 in UTC to the millisecond,
    `2026-07-01T09:30:12.345Z INFO:     sleuth.worker: …`."""
    formatter = logging.Formatter(
        "%(asctime)s.%(msecs)03dZ %(levelname)s:     %(name)s: %(message)s", "%Y-%m-%dT%H:%M:%S"
    )
    formatter.converter = time.gmtime
    handler = logging.StreamHandler()
    handler.setFormatter(formatter)
    logging.basicConfig(level=level.upper(), handlers=[handler])


def _settings_help() -> str:
    """The epilog of `sleuth serve --help`: every setting, its variable, default and meaning."""
    from sleuth.settings import described

    rows = [f"{name} (default {default}): {text}" for name, default, text in described()]
    return "Settings, read from the environment (a flag that is one wins over its variable):\n\n" + (
        "\n\n".join(rows)
    )


@app.command("serve", epilog=_settings_help())
def serve_cmd(
    host: Annotated[
        str, typer.Option(help="Address to bind; loopback means no-auth by default.")
    ] = "127.0.0.1",
    port: Annotated[int, typer.Option(min=1, max=65535, help="The port to listen on.")] = 8088,
    auth: Annotated[
        bool | None,
        typer.Option("--auth/--no-auth", help="Require API keys (default: only on non-loopback addresses)."),
    ] = None,
    allow_remote: Annotated[
        bool, typer.Option("--allow-remote", help="Allow --no-auth on a non-loopback address (warns).")
    ] = False,
    max_concurrent_turns: Annotated[
        int | None,
        typer.Option(
            min=int_range("max_concurrent_turns")[0],
            max=int_range("max_concurrent_turns")[1],
            help="Turns executing at once, a setting.",
        ),
    ] = None,
    max_queued_turns: Annotated[
        int | None,
        typer.Option(
            min=int_range("max_queued_turns")[0],
            max=int_range("max_queued_turns")[1],
            help="Turns waiting for a worker before 429, a setting.",
        ),
    ] = None,
    project_id: Annotated[str | None, typer.Option(help="Reported by /auth, a setting.")] = None,
    project_name: Annotated[str | None, typer.Option(help="Reported by /auth, a setting.")] = None,
    log_level: Annotated[str, typer.Option(help="debug | info | warning | error")] = "info",
    with_worker: Annotated[
        bool,
        typer.Option(
            "--with-worker",
            help="With SLEUTH_DATABASE_URL: also run a worker in this process (a one-host deployment).",
        ),
    ] = False,
) -> None:
    """Serve the HTTP API (OpenAPI at /api/openapi.json) over $SLEUTH_HOME until interrupted."""
    from sleuth.api.server import ServeOptions, resolve_auth, serve
    from sleuth.errors import MissingExtra
    from sleuth.models.catalog import CatalogError
    from sleuth.server.build import ServeError
    from sleuth.store.database import DatabaseUrlError

    options = ServeOptions(
        host=host,
        port=port,
        auth=auth,
        allow_remote=allow_remote,
        max_concurrent_turns=max_concurrent_turns,
        max_queued_turns=max_queued_turns,
        project_id=project_id,
        project_name=project_name,
        with_worker=with_worker,
    )
    try:
        required = resolve_auth(options)
    except ServeError as exc:
        raise failure(exc) from None
    log_to_stderr(log_level)
    shown = f"[{host}]" if ":" in host else host
    base = f"http://{shown}:{port}"
    home, settings = opened_when_ready()  # a bad `SLEUTH_*` value stops here, before anything starts
    err.print(
        styled(
            ("Sleuth", "bold"),
            f" · console {base}/ · API {base}/api (OpenAPI at /api/openapi.json) · "
            f"auth: {'api_key' if required else 'none'} · home: {home.root}",
        ),
        highlight=False,
    )
    try:
        serve(home, options, settings, log_level=log_level.lower())
    # config.toml or SLEUTH_MODEL names a model that does not resolve; the database URL is not one, or
    # needs the postgres extra
    except (CatalogError, DatabaseUrlError, MissingExtra) as exc:
        raise failure(exc) from None


@app.command("worker", epilog=_settings_help())
def worker_cmd(
    queue: Annotated[
        list[str] | None,
        typer.Option("--queue", help="Take jobs from this queue only (turns, tasks); repeat. Default: both."),
    ] = None,
    concurrency: Annotated[
        int | None, typer.Option(min=1, max=256, help="Jobs at once (the worker_concurrency setting).")
    ] = None,
    metrics_port: Annotated[
        int | None,
        typer.Option(
            min=1,
            max=65535,
            help="Serve Prometheus /metrics and /healthz (liveness, for a probe) on this port (no key: keep "
            "it private).",
        ),
    ] = None,
    metrics_addr: Annotated[
        str, typer.Option(help="The address --metrics-port binds (a pod: 0.0.0.0 on a private network).")
    ] = "127.0.0.1",
    log_level: Annotated[str, typer.Option(help="debug | info | warning | error")] = "info",
) -> None:
    """Run the turns and curates API servers queue (needs SLEUTH_DATABASE_URL=postgresql://…) until
    SIGTERM, which drains it: no new jobs; running ones get SLEUTH_TASK_STOP_TIMEOUT_S, then turns are
    cancelled and curates go back to the queue, and it exits at most 10 s later."""
    from sleuth.errors import MissingExtra
    from sleuth.server.build import ServeError
    from sleuth.server.queue import QUEUES
    from sleuth.server.worker import work
    from sleuth.settings import current

    wanted = tuple(queue or QUEUES)
    unknown = [name for name in wanted if name not in QUEUES]
    if unknown:
        raise fail(f"unknown queue {unknown[0]!r}; use {' or '.join(QUEUES)}", USAGE)
    settings = current()  # read once, here: the worker runs on these (`open_server`)
    url = settings.database_url
    if not url or not url.startswith(("postgresql", "postgres:")):
        raise fail(
            "sleuth worker needs SLEUTH_DATABASE_URL=postgresql://… (the job queue lives there)", USAGE
        )
    log_to_stderr(log_level)
    home, settings = opened_when_ready()
    overrides = {} if concurrency is None else {"worker_concurrency": concurrency}
    try:
        work(
            home,
            settings,
            overrides,
            queues=wanted,
            metrics_port=metrics_port,
            metrics_addr=metrics_addr,
        )
    except (ServeError, MissingExtra) as exc:
        raise failure(exc) from None


def _stamp(epoch: float | None) -> str:
    return "-" if epoch is None else datetime.fromtimestamp(epoch, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


@keys_app.command("create")
def keys_create(
    name: Annotated[str, typer.Option("--name", help="Unique among active keys; used by revoke.")],
    role: Annotated[
        Role, typer.Option("--role", help="admin: everything; query: read, ask, rate.")
    ] = Role.query,
    contexts: Annotated[
        list[str] | None,
        typer.Option(
            "--context",
            help="Limit a query key to this context (slug or id); repeat for several. Default: all.",
        ),
    ] = None,
) -> None:
    """Create a key and print it once: only its SHA-256 is stored, so it cannot be shown again."""
    from sleuth.store.records.keys import KeyStore, KeyStoreError
    from sleuth.store.records.server_db import ServerDB

    home, settings = opened()
    context_ids: list[str] | None = None
    if contexts:
        context_ids = []
        for slug in contexts:
            context_ids.append(find_context(home, slug).info().id)
    with ServerDB.for_home(home, settings.database_url) as db:
        try:
            key, secret = KeyStore(db).create(name, role.value, contexts=context_ids)
        except KeyStoreError as exc:
            raise failure(exc) from None
    typer.echo(secret)  # alone on stdout, so `KEY=$(sleuth keys create …)` works
    limited = "" if key.contexts is None else f" limited to {', '.join(_slugs(home, key))}"
    err.print(
        f"created {key.role} key {key.name!r} ({key.id}){limited}; store it now: it is not shown again",
        highlight=False,
    )


def _slugs(home: Home, key: ApiKey) -> list[str]:
    """The slugs of the contexts a key is limited to, now, sorted; a deleted one shows as its id."""
    slugs = {info.id: info.slug for _ctx, info in home.contexts()}
    return sorted(slugs.get(context_id, f"{context_id} (deleted)") for context_id in key.contexts or ())


def _key_json(home: Home, key: ApiKey) -> dict[str, Any]:
    body = key.to_json()
    if key.contexts is not None:
        slugs = {info.id: info.slug for _ctx, info in home.contexts()}
        body["contexts"] = [{"id": c, "slug": slugs.get(c)} for c in key.contexts]
    return body


@keys_app.command("list")
def keys_list(
    json_out: Annotated[bool, typer.Option("--json", help="Print the keys as JSON.")] = False,
    all_keys: Annotated[bool, typer.Option("--all", help="Include revoked keys.")] = False,
) -> None:
    """List keys (never the key strings: they are not stored)."""
    from sleuth.store.records.keys import KeyStore
    from sleuth.store.records.server_db import ServerDB

    home, settings = opened()
    with ServerDB.for_home(home, settings.database_url) as db:
        keys = KeyStore(db).list_keys(include_revoked=all_keys)
    if json_out:
        typer.echo(json.dumps([_key_json(home, k) for k in keys], indent=2))
        return
    if not keys:
        err.print("no API keys; create one with `sleuth keys create --name NAME --role admin|query`")
        return
    for key in keys:
        status = "active" if key.active else f"revoked {_stamp(key.revoked_at)}"
        scope = "all contexts" if key.contexts is None else "contexts: " + ", ".join(_slugs(home, key))
        console.print(
            f"{key.id}  {key.role:<5}  {key.name}  created {_stamp(key.created_at)}  {status}  {scope}",
            highlight=False,
            markup=False,
        )


@keys_app.command("revoke")
def keys_revoke(key: Annotated[str, typer.Argument(help="Key id, or the name of an active key.")]) -> None:
    """Revoke a key; its login tokens stop working at once."""
    from sleuth.store.records.keys import KeyStore, KeyStoreError
    from sleuth.store.records.server_db import ServerDB

    home, settings = opened()
    with ServerDB.for_home(home, settings.database_url) as db:
        try:
            revoked = KeyStore(db).revoke(key)
        except KeyStoreError as exc:
            raise fail(str(exc), FAILED) from None
    console.print(
        f"revoked {revoked.role} key {revoked.name!r} ({revoked.id})", highlight=False, markup=False
    )
