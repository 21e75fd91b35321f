"""`sleuth db check` and `sleuth db init` (docs/deploy.md, Operating): whether the server database
answers, whether its schema is installed and current, whether the storage answers; and the schema
installed or upgraded once, before any server starts.

`init` runs what every server and worker runs at its start (`ServerDB`, `TaskStore`, the heads of
shared contexts with a storage, procrastinate's queue on PostgreSQL), each under the schema lock, so it
is idempotent and safe beside running servers; it reports what the schema lacked before it ran.

What goes wrong is said in one sentence that names the fix (`explain`): an operator reads
`database sleuth does not exist on db:5432: create it with ...`, never a driver's traceback.
"""

from __future__ import annotations

import importlib.metadata
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from sqlalchemy import Table, inspect, select, text
from sqlalchemy.engine import Connection, make_url
from sqlalchemy.exc import DBAPIError

from sleuth.errors import Error, Unavailable, require_extra
from sleuth.settings import Settings
from sleuth.store.contexts.lock import LOCK_TABLES, prepare_locks
from sleuth.store.contexts.replica import metadata as heads_metadata
from sleuth.store.database import Database, open_database
from sleuth.store.records.keys import TABLES as KEY_TABLES
from sleuth.store.records.server_db import ServerDB
from sleuth.store.records.server_schema import SCHEMA_VERSION, meta_t
from sleuth.store.records.server_schema import metadata as server_metadata
from sleuth.store.records.task_schema import metadata as task_metadata
from sleuth.store.records.tasks import TaskStore
from sleuth.store.storage import StorageUrlError, open_storage

INIT = "run `sleuth db init`"


class DatabaseUnreachable(Unavailable, ConnectionError):
    """The server database did not answer, or refused what was asked of it; the message says why in
    one sentence (`explain`)."""


@dataclass(frozen=True)
class Verdict:
    """One line of `sleuth db check`: what was checked, whether it passed (None: not checked, because
    what it needs failed first), and one sentence."""

    name: str
    ok: bool | None
    text: str


def database_target(settings: Settings, home_root: Path) -> str:
    """The server database a process with these settings uses: `SLEUTH_DATABASE_URL`, else the home's
    `server.sqlite` (`ServerDB.for_home`)."""
    return settings.database_url or f"sqlite:///{home_root / 'server.sqlite'}"


def _place(url: str) -> tuple[str, str, str, str]:
    """(host:port, host, database, role) of a PostgreSQL URL, with libpq's defaults."""
    parsed = make_url(url.replace("postgres://", "postgresql://", 1))
    host = parsed.host or "localhost"
    port = str(parsed.port or 5432)
    return (
        f"{host}:{port}",
        host,
        parsed.database or parsed.username or "postgres",
        parsed.username or "postgres",
    )


def explain(url: str, exc: BaseException) -> str:
    """What a failed connection or schema statement means, in one sentence with its fix."""
    if isinstance(exc, Error):
        return str(exc)
    cause: Any = getattr(exc, "orig", None) or exc
    lines = str(cause).strip().splitlines() or [type(cause).__name__]
    detail = re.sub(r"^(FATAL|ERROR):\s+", "", lines[0].rsplit(" failed: ", 1)[-1]).strip()
    if url.startswith("sqlite"):
        return f"the SQLite file {make_url(url).database} cannot be used: {detail}"
    where, host, database, role = _place(url)
    port = where.rsplit(":", 1)[1]
    said = detail.lower()
    if "does not exist" in said and said.startswith("database"):
        return (
            f"database {database} does not exist on {where}: create it with "
            f"`createdb -h {host} -p {port} -O {role} {database}` (as a role that may create databases)"
        )
    if "does not exist" in said and said.startswith("role"):
        return (
            f"role {role} does not exist on {where}: create it with "
            f"`createuser -h {host} -p {port} --pwprompt {role}` (as a superuser)"
        )
    if "password authentication failed" in said:
        return f"PostgreSQL at {where} refused the password of role {role}: check SLEUTH_DATABASE_URL"
    if "no pg_hba.conf entry" in said:
        return (
            f"PostgreSQL at {where} accepts no connection from this host for role {role} to database "
            f"{database}: add a line for them to its pg_hba.conf"
        )
    if "permission denied for database" in said:
        grant = f"GRANT CONNECT ON DATABASE {database} TO {role}"
        return f"role {role} may not connect to database {database}: `{grant}`"
    if getattr(cause, "sqlstate", None) == "42501":  # insufficient_privilege: creating the tables
        return (
            f"role {role} may not create tables in database {database} ({detail}): make it the database's "
            f"owner (`createdb -O {role} {database}`), or `GRANT CREATE ON SCHEMA public TO {role}`"
        )
    if "connection refused" in said:
        return (
            f"PostgreSQL at {where} did not answer: connection refused (is it running and listening there?)"
        )
    if "timeout expired" in said or "timed out" in said:
        return f"PostgreSQL at {where} did not answer in time: is the address right, and the port open?"
    if "failed to resolve host" in said or "could not translate host name" in said:
        return f"the host {host} of SLEUTH_DATABASE_URL could not be resolved"
    return f"PostgreSQL at {where}: {detail}"


def open_checked(settings: Settings, home_root: Path) -> Database:
    """The server database, once it has answered; `DatabaseUnreachable` (one sentence) when it does not.
    A SQLite file that is not there yet is made (`init` and the servers make it)."""
    url = database_target(settings, home_root)
    try:
        database = open_database(url)
        database.ping()
    except (DBAPIError, Error) as exc:
        raise DatabaseUnreachable(explain(url, exc)) from None
    return database


# ------------------------------------------------------------------------------------- the schema
@dataclass(frozen=True)
class _Schema:
    """What a database holds of the schema this Sleuth expects."""

    missing_tables: tuple[str, ...]
    missing_columns: tuple[str, ...]  # table.column
    version: int | None  # Sleuth's schema version (`meta`), None when unstamped
    queue_missing: tuple[str, ...]  # procrastinate's tables, functions and types (PostgreSQL)
    queue_total: int


def _tables(settings: Settings) -> list[Table]:
    """Sleuth's tables as a process with these settings creates them at its start."""
    tables = {t.name: t for t in [*server_metadata.sorted_tables, *KEY_TABLES, *task_metadata.sorted_tables]}
    if settings.storage_url:  # the heads of shared contexts (`replica.Replica`)
        tables.update({t.name: t for t in heads_metadata.sorted_tables})
    if (settings.database_url or "").startswith("postgres"):  # the leased curate locks (`store.lock`)
        tables.update({t.name: t for t in LOCK_TABLES.sorted_tables})
    return list(tables.values())


def _queue_objects() -> list[tuple[str, str]]:
    """(kind, name) of every table, function and type the installed procrastinate's schema makes."""
    require_extra("the job queue (many machines on PostgreSQL)", "postgres", "procrastinate", "psycopg")
    from procrastinate.schema import SchemaManager

    schema = SchemaManager.get_schema()
    return [
        (kind, name)
        for kind in ("table", "function", "type")
        for name in re.findall(rf"^CREATE {kind.upper()} (\w+)", schema, re.MULTILINE | re.IGNORECASE)
    ]


_PRESENT = {
    "table": "SELECT to_regclass(:name) IS NOT NULL",
    "type": "SELECT to_regtype(:name) IS NOT NULL",
    "function": "SELECT EXISTS (SELECT 1 FROM pg_proc WHERE proname = :name AND pg_function_is_visible(oid))",
}


def _read_schema(database: Database, tables: list[Table]) -> _Schema:
    with database.reading() as conn:
        inspector = inspect(conn)
        present = set(inspector.get_table_names())
        missing_columns = [
            f"{table.name}.{column}"
            for table in tables
            if table.name in present
            for column in sorted(
                {c.name for c in table.columns} - {c["name"] for c in inspector.get_columns(table.name)}
            )
        ]
        version = None
        if meta_t.name in present:
            found = conn.execute(select(meta_t.c.value).where(meta_t.c.key == "schema_version")).scalar()
            version = None if found is None else int(found)
        queue_missing, queue_total = _queue_state(database, conn)
    return _Schema(
        tuple(t.name for t in tables if t.name not in present),
        tuple(missing_columns),
        version,
        queue_missing,
        queue_total,
    )


def _queue_state(database: Database, conn: Connection) -> tuple[tuple[str, ...], int]:
    if not database.is_postgres:
        return (), 0
    objects = _queue_objects()
    missing = tuple(
        name for kind, name in objects if not conn.execute(text(_PRESENT[kind]), {"name": name}).scalar()
    )
    return missing, len(objects)


def _sleuth_verdict(schema: _Schema, total: int) -> Verdict:
    missing = schema.missing_tables
    if len(missing) == total:
        return Verdict("schema", False, f"Sleuth's schema is not installed: {INIT}")
    if schema.version is not None and schema.version > SCHEMA_VERSION:
        return Verdict(
            "schema",
            False,
            f"the database's schema is version {schema.version}, newer than this Sleuth understands "
            f"({SCHEMA_VERSION}): upgrade Sleuth",
        )
    if missing:
        return Verdict("schema", False, f"Sleuth's schema lacks the tables {', '.join(missing)}: {INIT}")
    if schema.version is None:
        return Verdict("schema", False, f"Sleuth's schema has no version stamp: {INIT}")
    if schema.version < SCHEMA_VERSION:
        return Verdict(
            "schema",
            False,
            f"Sleuth's schema is version {schema.version}, older than this Sleuth's "
            f"({SCHEMA_VERSION}): {INIT}",
        )
    if schema.missing_columns:
        lacks = ", ".join(schema.missing_columns)
        return Verdict("schema", False, f"Sleuth's schema lacks the columns {lacks}: {INIT}")
    return Verdict(
        "schema", True, f"Sleuth's schema is installed and current (version {SCHEMA_VERSION}, {total} tables)"
    )


def _queue_verdict(schema: _Schema) -> Verdict:
    version = importlib.metadata.version("procrastinate")
    missing = schema.queue_missing
    if len(missing) == schema.queue_total:
        return Verdict("queue", False, f"the job queue's schema (procrastinate's) is not installed: {INIT}")
    if missing:
        from procrastinate.schema import SchemaManager

        migrations = SchemaManager.get_migrations_path()
        return Verdict(
            "queue",
            False,
            f"the job queue's schema is older than procrastinate {version} (it lacks {', '.join(missing[:3])}"
            f"{', …' if len(missing) > 3 else ''}): apply procrastinate's migrations from {migrations} "
            "(its docs: Migrations)",
        )
    return Verdict(
        "queue", True, f"the job queue's schema (procrastinate {version}) is installed and current"
    )


def schema_verdicts(database: Database, settings: Settings) -> list[Verdict]:
    """Sleuth's schema, then procrastinate's on PostgreSQL."""
    tables = _tables(settings)
    schema = _read_schema(database, tables)
    verdicts = [_sleuth_verdict(schema, len(tables))]
    if database.is_postgres:
        verdicts.append(_queue_verdict(schema))
    return verdicts


# ------------------------------------------------------------------------------------------ check
def _database_verdict(database: Database) -> Verdict:
    if not database.is_postgres:
        return Verdict("database", True, f"the SQLite file {database.path} answers")
    where, _host, name, role = _place(database.url)
    with database.reading() as conn:
        version = str(conn.execute(text("SHOW server_version")).scalar()).split()[0]
    return Verdict(
        "database", True, f"PostgreSQL {version} at {where} answers (database {name}, role {role})"
    )


def storage_verdict(settings: Settings) -> Verdict:
    """Whether `SLEUTH_STORAGE_URL` answers (a pass when there is none: one machine needs none)."""
    url = settings.storage_url
    if not url:
        return Verdict(
            "storage", True, "no shared storage is set (SLEUTH_STORAGE_URL): contexts live under SLEUTH_HOME"
        )
    if not (settings.database_url or "").startswith(("postgresql", "postgres:")):
        return Verdict("storage", False, "SLEUTH_STORAGE_URL needs SLEUTH_DATABASE_URL=postgresql://…")
    parts = urlsplit(url)
    if parts.scheme == "file" and not Path(parts.path).is_dir():
        return Verdict(
            "storage", False, f"the storage directory {parts.path} does not exist: create or mount it"
        )
    try:
        storage = open_storage(url)
        storage.ping()
    except StorageUrlError as exc:
        return Verdict("storage", False, str(exc))
    except Exception as exc:  # boto3's and the file system's own errors: each said in one sentence
        return Verdict("storage", False, _storage_failure(url, exc))
    return Verdict("storage", True, f"the storage {storage.url} answers")


def _storage_failure(url: str, exc: Exception) -> str:
    bucket = urlsplit(url).netloc
    code = str((getattr(exc, "response", None) or {}).get("Error", {}).get("Code", ""))
    name = type(exc).__name__
    if code in ("404", "NoSuchBucket", "NotFound"):
        return f"bucket {bucket} does not exist: create it (`aws s3 mb s3://{bucket}`); Sleuth does not"
    if code in ("403", "AccessDenied", "Forbidden"):
        return f"bucket {bucket} refused these credentials (403): they need s3:ListBucket on it"
    if name in ("NoCredentialsError", "PartialCredentialsError"):
        return "no AWS credentials were found: set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, or a role"
    if name in ("EndpointConnectionError", "ConnectTimeoutError", "ConnectionClosedError"):
        return f"the S3 endpoint for bucket {bucket} did not answer: {exc}"
    return f"the storage {url} did not answer: {exc}"


def check(settings: Settings, home_root: Path) -> list[Verdict]:
    """Every check, in order; one that needs the database is not run when the database failed. Nothing
    is created, not even a SQLite file."""
    url = database_target(settings, home_root)
    names = ["schema", "queue"] if url.startswith("postgres") else ["schema"]
    database: Database | None = None
    sqlite_file = None if url.startswith("postgres") else Path(make_url(url).database or "")
    if sqlite_file is not None and not sqlite_file.is_file():
        first = Verdict("database", False, f"there is no server database at {sqlite_file} yet: {INIT}")
    else:
        try:
            database = open_checked(settings, home_root)
            first = _database_verdict(database)
        except DatabaseUnreachable as exc:
            first = Verdict("database", False, str(exc))
    if database is None:
        rest = [Verdict(name, None, "not checked: the database check failed") for name in names]
    else:
        try:
            rest = schema_verdicts(database, settings)
        except (DBAPIError, Error) as exc:
            rest = [Verdict(name, False, explain(url, exc)) for name in names]
    return [first, *rest, storage_verdict(settings)]


# ------------------------------------------------------------------------------------------- init
def init(settings: Settings, home_root: Path) -> tuple[list[str], list[Verdict]]:
    """Install or upgrade the schema as every process does at its start. Returns what was done, and the
    schema's verdicts afterwards (a queue schema left by an older procrastinate still fails: only its
    own migrations upgrade it)."""
    url = database_target(settings, home_root)
    database = open_checked(settings, home_root)
    tables = _tables(settings)
    try:
        before = _read_schema(database, tables)
        ServerDB(database, replay_root=home_root)  # Sleuth's tables (keys' among them), then its upgrades
        TaskStore(database)
        if settings.storage_url:
            database.prepare(heads_metadata)
        if database.is_postgres:
            from sleuth.server.queue import install_schema

            prepare_locks(database)
            install_schema(database)
        after = _read_schema(database, tables)
    except DBAPIError as exc:
        raise DatabaseUnreachable(explain(url, exc)) from None
    return _changes(before, after, len(tables)), schema_verdicts(database, settings)


def _changes(before: _Schema, after: _Schema, total: int) -> list[str]:
    done = []
    created = sorted(set(before.missing_tables) - set(after.missing_tables))
    if len(created) == total:
        done.append(f"installed Sleuth's schema (version {after.version}): {total} tables")
    elif created:
        done.append(f"created the tables {', '.join(created)}")
    added = sorted(set(before.missing_columns) - set(after.missing_columns))
    if added:
        done.append(f"added the columns {', '.join(added)}")
    if before.version is not None and before.version != after.version:
        done.append(f"upgraded Sleuth's schema from version {before.version} to {after.version}")
    if before.queue_missing and len(before.queue_missing) == before.queue_total and not after.queue_missing:
        done.append(
            f"installed the job queue's schema (procrastinate {importlib.metadata.version('procrastinate')})"
        )
    return done or ["nothing to do: the schema was already installed and current"]
