"""The tables of `server.sqlite` (spec/context.md §7) and the upgrades between their versions.

Plain SQLAlchemy Core tables and DDL that SQLite and PostgreSQL share; `server_db.ServerDB` writes
and reads them, `store/records/keys.py` adds its own tables to the same `metadata`.
"""

from __future__ import annotations

from sqlalchemy import (
    Column,
    Float,
    ForeignKey,
    Index,
    Integer,
    MetaData,
    String,
    Table,
    Text,
)

SCHEMA_VERSION = 4
TITLE_CHARS = 80
metadata = MetaData()
meta_t = Table(
    "meta",
    metadata,
    Column("key", String(64), primary_key=True),
    Column("value", Text, nullable=False),
)
sessions_t = Table(
    "sessions",
    metadata,
    Column("id", String(80), primary_key=True),
    Column("scope", Text, nullable=False),  # JSON list of context slugs
    Column("title", String(TITLE_CHARS), nullable=False),
    Column("system_prompt", Text),
    Column("guardrails", Text),
    Column("models", Text, nullable=False),  # JSON list
    Column("tools", Text),  # JSON list or null
    Column("workflow", String(64), nullable=False),
    Column("last_query_id", String(80)),
    Column("active_query_id", String(80)),  # the turn in flight: one per session
    Column("created_by", String(200)),  # the principal that opened it (v2; NULL read as "local")
    Column("created_at", Float, nullable=False),
    Column("updated_at", Float, nullable=False),
    Index("ix_sessions_created_by", "created_by", "created_at"),  # v3: a query key lists its own
)
queries_t = Table(
    "queries",
    metadata,
    Column("id", String(80), primary_key=True),
    Column("session_id", String(80), ForeignKey("sessions.id", ondelete="CASCADE"), nullable=False),
    Column("status", String(32), nullable=False),
    Column("created", Integer, nullable=False),
    Column("updated", Float, nullable=False),
    Column("document", Text, nullable=False),  # the whole Query object, JSON
    Column("feedback", Text),  # JSON {rating, comment} or null
    Column("workflow", String(64)),  # v2: the turn's workflow (the document does not carry it)
    Column("comparison_group", String(128)),  # v2: the client's comparison run, at most 3 turns
    # v4: what another process needs to run, hold and stop the turn (many API servers and workers)
    Column("request", Text),  # the turn to run, JSON (`agent.turn.Runtime.restore` reads it)
    Column("share_key", String(80)),  # the query key whose share of the turn places it takes
    Column("worker", String(200)),  # the worker running it; NULL while it waits
    Column("lease_until", Float),  # the worker's hold ends then unless renewed (its heartbeat)
    Column("cancel_requested", Float),  # when a stop was asked, from any server
    Index("ix_queries_session_created", "session_id", "created", "id"),
    Index("ix_queries_comparison_group", "comparison_group"),
    Index("ix_queries_status", "status"),
)
events_t = Table(
    "events",
    metadata,
    Column("query_id", String(80), ForeignKey("queries.id", ondelete="CASCADE"), primary_key=True),
    Column("seq", Integer, primary_key=True, autoincrement=False),  # 1-based per query
    Column("type", String(128), nullable=False),
    Column("data", Text, nullable=False),  # the whole event dict, JSON
)
traces_t = Table(
    "traces",
    metadata,
    Column("query_id", String(80), ForeignKey("queries.id", ondelete="CASCADE"), primary_key=True),
    Column("document", Text, nullable=False),
)
# Schema upgrades, in order: (version reached, statements). Plain DDL that SQLite and PostgreSQL share.
MIGRATIONS: tuple[tuple[int, tuple[str, ...]], ...] = (
    (
        2,
        (
            "ALTER TABLE sessions ADD COLUMN created_by VARCHAR(200)",
            "ALTER TABLE queries ADD COLUMN workflow VARCHAR(64)",
            "ALTER TABLE queries ADD COLUMN comparison_group VARCHAR(128)",
            "CREATE INDEX IF NOT EXISTS ix_queries_comparison_group ON queries (comparison_group)",
        ),
    ),
    (
        3,
        (
            # The contexts a key is limited to (`store/records/keys.py` defines the table; spec/api.md
            # §3.1). A table of its own, not a column of `api_keys`: that table exists only where the
            # keys were used, and `create_all` may already have made this one, hence IF NOT EXISTS.
            "CREATE TABLE IF NOT EXISTS api_key_contexts (key_id VARCHAR(80) NOT NULL, "
            "context_id VARCHAR(80) NOT NULL, PRIMARY KEY (key_id, context_id))",
            "CREATE INDEX IF NOT EXISTS ix_sessions_created_by ON sessions (created_by, created_at)",
        ),
    ),
    # v4's columns are added by `database.add_missing_columns`, which every store runs on open.
    (4, ()),
)
