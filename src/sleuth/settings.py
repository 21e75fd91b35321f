"""Every tunable of a Sleuth process, declared once: its default, its bounds and its help text.

Each setting is read from the environment as `SLEUTH_<NAME>` (pydantic-settings), so tests and
deployments change a limit without a code change. `sleuth serve --help` lists them all, and
`GET /version` reports the values a server runs with.

Who reads when: a process's entry points call `current()`, once, and hand the `Settings` (or the few
values an engine needs) down as typed parameters; compile, store, sandbox and models do not read the
environment themselves.
- A server, worker or MCP server reads them once, when it starts (`server.build.open_server`), applies
  its command-line flags on top, and holds the result in `Server.settings`: what `/version` shows is
  what the server uses, in its turns, curates, imports and syncs alike. (A `Server` built bare, as tests
  do, reads the environment at each use of `Server.settings` instead.)
- Each CLI command reads them once, at its start (`cli.app.opened`), and passes them to what it runs;
  so does a benchmark script.
- A parameter an engine leaves optional defaults to the declared value (`DEFAULTS`), never the
  environment's: `VersionReader` in the sandbox, which has no settings, runs on them.
- One read is left below the entry points: `store.lock.curate_lock` without a database, for the API's
  context delete, which does not pass its own yet.

Three variables are read by their own modules and are not settings: `SLEUTH_HOME` (`store.home`),
`SLEUTH_MODEL` (`models.catalog`, beside the model config it picks from) and `SLEUTH_API_KEY`
(`store.keys`, a secret: nothing here may ever be shown).

The constants below are limits of the protocol (spec/api.md), not tunables: the turn contract declares
its bounds with them, and version collection reads the same turn cap.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict

__all__ = [
    "DEFAULTS",
    "ENV_PREFIX",
    "TOOL_OUTPUT_CHARS",
    "TURN_CAP_SECONDS",
    "Settings",
    "admin_only",
    "current",
    "declared_limits",
    "described",
    "int_range",
]

ENV_PREFIX = "SLEUTH_"
#: spec/api.md §8.1: the longest a turn may run. Version collection keeps a superseded version this long
#: after a newer one goes live, so a turn that pinned it can still read it.
TURN_CAP_SECONDS = 900
#: spec/runtime.md §3: what one step's printed output is cut to, unless a request asks otherwise.
TOOL_OUTPUT_CHARS = 10_000

_MIB = 1024 * 1024
#: A setting `GET /version` shows only to an admin (`admin_only`): a path or an allow list tells a caller
#: without a key how the server is laid out and what it may reach.
_ADMIN_ONLY: dict[str, Any] = {"admin_only": True}


class Settings(BaseSettings):
    """The tunables, grouped by who reads them. Unknown `SLEUTH_*` variables are ignored."""

    model_config = SettingsConfigDict(env_prefix=ENV_PREFIX, extra="ignore", frozen=True)

    # --- the server (spec/api.md §12)
    max_concurrent_turns: int = Field(4, ge=1, le=256, description="Turns executing at once.")
    max_queued_turns: int = Field(32, ge=0, le=10_000, description="Turns waiting for a worker before 429.")
    max_turns_per_key: int = Field(
        0,
        ge=0,
        le=10_000,
        description="Turn places (running + queued) one query key may hold at once, so one key cannot take "
        "them all (429 key_turn_limit); 0: a quarter of max_concurrent_turns + max_queued_turns, at least "
        "1. Admin keys and no-auth mode are not held to it.",
    )
    project_id: str = Field("local", description="Reported by /auth and in stats.")
    project_name: str = Field("local", description="Reported by /auth.")
    task_workers: int = Field(2, ge=1, le=64, description="Curate, import, pack and restore tasks at once.")
    task_stop_timeout_s: float = Field(
        30.0,
        gt=0,
        description="How long a stop waits for running jobs: a task's cancel or a context's delete waits "
        "this long for its tasks (then 504 task_stop_timeout); a worker's drain (SIGTERM) lets its turns "
        "and curates run this long, then stops them (turns end cancelled, curates go back to the queue) "
        "and exits at most 10 s later.",
    )

    # --- many machines (docs/deploy.md): PostgreSQL state, a durable queue, workers
    database_url: str | None = Field(
        None,
        description="postgresql://user:password@host/db for many API servers and workers (unset: "
        "server.sqlite under SLEUTH_HOME). /version shows only its kind.",
    )
    storage_url: str | None = Field(
        None,
        description="file:///shared/dir or s3://bucket/prefix: where every machine finds the contexts' "
        "files (needs SLEUTH_DATABASE_URL; unset: the contexts live under SLEUTH_HOME alone). With it, a "
        "node's SLEUTH_HOME holds only its working copies and caches.",
    )
    version_cache_mb: int = Field(
        10240,
        ge=0,
        description="With shared storage: the most disk a node's fetched versions take, in MiB (0: no "
        "bound by size). The least recently read go first; a version read within a turn's longest run "
        "(a turn may still be reading it) and what this node built itself are never dropped.",
    )
    worker_concurrency: int = Field(
        4, ge=1, le=256, description="Jobs (turns, curates) one worker runs at once."
    )
    worker_heartbeat_s: float = Field(
        10.0,
        ge=0.2,
        le=300,
        description="How often a worker renews its holds; one it holds is failed (a turn) or retried (a "
        "curate) after 3 missed beats.",
    )
    max_queue_wait_s: float = Field(
        3600.0, gt=0, description="A queued turn no worker has taken by then is failed (never left waiting)."
    )
    startup_wait_s: float = Field(
        60.0,
        ge=0,
        le=3600,
        description="How long `serve`, `worker` and `share` wait at start for the database and the storage "
        "to answer before they exit with one sentence saying why.",
    )
    database_wait_s: float = Field(
        120.0,
        ge=0,
        le=3600,
        description="How long a running turn or task waits for PostgreSQL to come back (a restart, a "
        "failover) before its write fails; requests are answered 503 database_unavailable meanwhile.",
    )

    # --- sources and uploads (spec/api.md §12)
    max_file_bytes: int = Field(250 * _MIB, ge=1, description="The largest one source file may be.")
    max_upload_bytes: int = Field(
        2 * 1024 * _MIB, ge=1, description="The largest one upload or archive may be."
    )
    max_context_bytes: int = Field(
        10 * 1024 * 1024 * _MIB, ge=1, description="All sources of a context together."
    )
    max_files_per_context: int = Field(100_000, ge=1, description="Sources one context may hold.")
    max_expanded_bytes: int = Field(
        4 * 1024 * _MIB,
        ge=1,
        description="What one archive may expand to, all members together (twice the upload limit, so "
        "an honest archive of compressed files fits and a compression bomb does not).",
    )
    max_archive_members: int = Field(
        100_000, ge=1, description="Entries one archive may hold, directories included."
    )
    max_expansion_ratio: int = Field(
        200,
        ge=1,
        description="Bytes an archive may decompress to per compressed byte read (past its first 4 MiB): "
        "text rarely passes 20:1, a run of zeros in bz2 passes 1,000,000:1.",
    )
    max_text_bytes: int = Field(
        32 * _MIB, ge=1, description="The most text one source may hold once parsed; a larger one is skipped."
    )

    # --- connectors (issue 27): what a sync may reach and fetch
    connector_allow: str = Field(
        "",
        description="Hosts or networks (comma-separated: `git.internal`, `10.0.0.0/8`) connectors may reach "
        "although they are loopback, link-local or private; `file` lets git connectors read file:// URLs. "
        "Unset: only public addresses.",
        json_schema_extra=_ADMIN_ONLY,
    )
    connector_folders: str = Field(
        "",
        description="Folders (comma-separated absolute paths) a folder connector made through the API may "
        "read, with what is below them. Unset: none (the CLI may name any folder its user can read).",
        json_schema_extra=_ADMIN_ONLY,
    )
    connector_s3_instance_credentials: bool = Field(
        False,
        description="Lets an s3 connector without its own access key sign with this machine's AWS "
        "credentials (boto3's chain: the environment, ~/.aws, the instance role). Unset: such a connector "
        "reads public buckets only, unsigned, since the machine's credentials may open every context's "
        "shared storage.",
        json_schema_extra=_ADMIN_ONLY,
    )
    connector_max_items: int = Field(10_000, ge=1, description="Items one connector sync lists at most.")
    connector_max_bytes: int = Field(
        2 * 1024 * _MIB, ge=1, description="Bytes one connector sync fetches at most, all items together."
    )
    connector_timeout_s: float = Field(
        600.0, gt=0, description="Seconds one connector sync may take before it stops (failed)."
    )

    # --- the host's work per turn (spec/sandbox.md): a turn past a cap is stopped and failed
    budget_rpc_calls: int = Field(
        2_000, ge=1, description="Host function calls per turn, rejected ones included."
    )
    budget_rpc_bytes: int = Field(
        32 * _MIB, ge=1, description="Bytes of host function requests and replies per turn."
    )
    budget_host_cpu_s: float = Field(20.0, gt=0, description="Seconds spent in host functions per turn.")
    budget_spans: int = Field(5_000, ge=1, description="Evidence spans the sandbox may report per turn.")
    budget_recorded_bytes: int = Field(
        64 * _MIB, ge=1, description="Bytes of step events, host results, trace and replay log per turn."
    )

    # --- search
    ann_min_vectors: int = Field(
        50_000,
        ge=1,
        description="Dense vectors from which a compile also builds an HNSW graph (the `ann` extra) and "
        "unfiltered semantic search reads it instead of scanning every vector.",
    )

    # --- models
    embed_threads: int | None = Field(
        None, ge=1, le=256, description="Threads of the local embedder (unset: onnxruntime's choice)."
    )
    curate_concurrency: int = Field(
        4, ge=1, le=64, description="Extraction calls in flight at once per provider endpoint (curation)."
    )
    curate_timeout_s: float = Field(
        300.0, gt=0, le=3600, description="Seconds one extraction call may take before it is retried."
    )


def current() -> Settings:
    """The settings as the environment says now (a bad value raises pydantic's `ValidationError`,
    which names the variable's field). Only a process's entry points call it, once (see above)."""
    return Settings()


#: The declared defaults, read from no environment: what a parameter left out means.
DEFAULTS = Settings.model_construct()


def admin_only() -> frozenset[str]:
    """The settings only an admin sees in `GET /version` (declared with `_ADMIN_ONLY`)."""
    return frozenset(
        name
        for name, info in Settings.model_fields.items()
        if isinstance(info.json_schema_extra, dict) and info.json_schema_extra.get("admin_only")
    )


def described() -> list[tuple[str, str, str]]:
    """(variable, default, help) of every setting, in declaration order: `sleuth serve --help`."""
    rows = []
    for name, info in Settings.model_fields.items():
        default = "unset" if info.default is None else str(info.default)
        rows.append((ENV_PREFIX + name.upper(), default, info.description or ""))
    return rows


def declared_limits(metadata: Sequence[Any]) -> dict[str, Any]:
    """The bounds (`ge`, `le`, `min_length`, `max_length`) that `Annotated` metadata or a pydantic
    field's `metadata` declares (a `Field(...)` carries them itself or in its own metadata). Every
    layer that states a range reads it from its declaration through this: the settings, the turn
    contract, the SDK's primitives."""
    return {
        key: getattr(meta, key)
        for item in metadata
        for meta in [item, *getattr(item, "metadata", [])]
        for key in ("ge", "le", "min_length", "max_length")
        if getattr(meta, key, None) is not None
    }


def int_range(name: str) -> tuple[int, int]:
    """The inclusive range a setting declares (`sleuth serve`'s options take theirs from here)."""
    limits = declared_limits(Settings.model_fields[name].metadata)
    return int(limits["ge"]), int(limits["le"])
