"""API keys and login tokens (spec/api.md §3) in `server.sqlite`, beside the sessions and queries.

A key is `slk_` + 40 random base62 characters; it is shown once, when created, and only its SHA-256 is
stored, so a copy of the database does not hand out working keys. A login token (`slt_…`, §3.2) is a
second secret bound to one key: also stored hashed, valid for 30 days, and dead as soon as its key is
revoked (verification joins the key row, so revoking needs no sweep over tokens).

A query key may be limited to a list of contexts, stored by context id (so a renamed context stays
visible, and a new context that takes an old slug does not become visible); a key with no rows in
`api_key_contexts` sees every context. The list is fixed when the key is created.

The tables join `server_db.metadata` and are written through the ServerDB's own transactions, so they
follow its rules (one engine, `BEGIN IMMEDIATE` for writes); `KeyStore.for_db` also creates them on a
database opened before this module was imported.
"""

from __future__ import annotations

import hashlib
import secrets
import string
import threading
import time
import weakref
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from pydantic import TypeAdapter
from sqlalchemy import Column, Float, ForeignKey, Index, String, Table, delete, insert, select, update
from sqlalchemy.engine import Connection, Row

from sleuth.errors import Invalid
from sleuth.store.database import new_id
from sleuth.store.records.server_db import LOCAL_PRINCIPAL, ServerDB
from sleuth.store.records.server_schema import metadata

KEY_PREFIX = "slk_"
TOKEN_PREFIX = "slt_"
SECRET_CHARS = 40
BASE62 = string.digits + string.ascii_letters
ROLES = ("admin", "query")
TOKEN_TTL_S = 30 * 24 * 3600  # spec/api.md §12: login tokens live 30 days
NAME_CHARS = 64

keys_t = Table(
    "api_keys",
    metadata,
    Column("id", String(80), primary_key=True),
    Column("name", String(NAME_CHARS), nullable=False),
    Column("role", String(16), nullable=False),
    Column("hash", String(64), nullable=False, unique=True),  # sha256 hex of the key string
    Column("created_at", Float, nullable=False),
    Column("revoked_at", Float),
    Index("ix_api_keys_name", "name"),
)

tokens_t = Table(
    "login_tokens",
    metadata,
    Column("hash", String(64), primary_key=True),
    Column("key_id", String(80), ForeignKey("api_keys.id", ondelete="CASCADE"), nullable=False),
    Column("created_at", Float, nullable=False),
    Column("expires_at", Float, nullable=False),
    Index("ix_login_tokens_key", "key_id"),
)

# Schema v3 (server_db.MIGRATIONS creates it in an older file with the same DDL). No foreign key to
# `api_keys`: keys are revoked, never deleted, and this table may predate that one in a file.
key_contexts_t = Table(
    "api_key_contexts",
    metadata,
    Column("key_id", String(80), primary_key=True),
    Column("context_id", String(80), primary_key=True),
)
TABLES = [keys_t, tokens_t, key_contexts_t]


class KeyStoreError(Invalid, ValueError):
    """A key cannot be created or revoked as asked (bad role or name, unknown or ambiguous key)."""


@dataclass(frozen=True)
class ApiKey:
    """A stored key, never with its secret."""

    id: str
    name: str
    role: str
    created_at: float
    revoked_at: float | None = None
    contexts: tuple[str, ...] | None = None  # the context ids it is limited to; None: every context

    @property
    def active(self) -> bool:
        return self.revoked_at is None

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = _API_KEY.dump_python(self, mode="json")
        return data


_API_KEY = TypeAdapter(ApiKey)


@dataclass(frozen=True)
class LoginToken:
    token: str
    key: ApiKey
    expires_at: float


def digest(secret: str) -> str:
    return hashlib.sha256(secret.encode("utf-8")).hexdigest()


def new_secret(prefix: str) -> str:
    """`prefix` + 40 random base62 characters from `secrets` (about 238 bits)."""
    return prefix + "".join(secrets.choice(BASE62) for _ in range(SECRET_CHARS))


def _key(row: Row[Any], contexts: tuple[str, ...] | None = None) -> ApiKey:
    return ApiKey(row.id, row.name, row.role, row.created_at, row.revoked_at, contexts)


def _contexts_of(conn: Connection, key_ids: Iterable[str]) -> dict[str, tuple[str, ...]]:
    """The context lists of these keys (sorted ids); a key without one is absent."""
    ids = list(key_ids)
    if not ids:
        return {}
    stmt = (
        select(key_contexts_t.c.key_id, key_contexts_t.c.context_id)
        .where(key_contexts_t.c.key_id.in_(ids))
        .order_by(key_contexts_t.c.key_id, key_contexts_t.c.context_id)
    )
    found: dict[str, list[str]] = {}
    for row in conn.execute(stmt):
        found.setdefault(row.key_id, []).append(row.context_id)
    return {key_id: tuple(contexts) for key_id, contexts in found.items()}


def _with_contexts(conn: Connection, row: Row[Any] | None) -> ApiKey | None:
    if row is None:
        return None
    return _key(row, _contexts_of(conn, [row.id]).get(row.id))


def _check_name(name: str) -> str:
    name = name.strip()
    if not name or len(name) > NAME_CHARS or not name.isprintable():
        raise KeyStoreError(f"a key name is 1-{NAME_CHARS} printable characters; got {name!r}")
    if name == LOCAL_PRINCIPAL:  # its sessions would be those of the CLI and of no-auth mode
        raise KeyStoreError(f"{name!r} is the principal of no-auth mode and the CLI; choose another name")
    return name


_stores: weakref.WeakKeyDictionary[ServerDB, KeyStore] = weakref.WeakKeyDictionary()
_stores_lock = threading.Lock()


class KeyStore:
    """The keys of one server database. Get it with `KeyStore.for_db(db)` (one per ServerDB)."""

    def __init__(self, db: ServerDB) -> None:
        self.db = db
        with db.writing() as conn:  # the ServerDB's write transaction: same engine, same lock rules
            metadata.create_all(conn, tables=TABLES)

    @classmethod
    def for_db(cls, db: ServerDB) -> KeyStore:
        """The store of `db`, created (with its tables) on first use, so request handlers stay cheap."""
        with _stores_lock:
            store = _stores.get(db)
            if store is None:
                store = _stores[db] = cls(db)
            return store

    # --- keys --------------------------------------------------------------------------------------

    def create(
        self,
        name: str,
        role: str,
        secret: str | None = None,
        contexts: Iterable[str] | None = None,
    ) -> tuple[ApiKey, str]:
        """A new key; returns it with the secret, which exists nowhere else afterwards.

        Names are unique among active keys, so `revoke NAME` is never ambiguous. `secret` is for
        seeding a key chosen by the operator (`SLEUTH_API_KEY`); otherwise a fresh `slk_` key is made.
        `contexts` (context ids, at least one) limits a query key to those contexts.
        """
        name = _check_name(name)
        if role not in ROLES:
            raise KeyStoreError(f"unknown role {role!r}; use admin or query")
        limited: tuple[str, ...] | None = None
        if contexts is not None:
            limited = tuple(sorted({c.strip() for c in contexts}))
            if not limited or not all(limited):
                raise KeyStoreError("a key limited to contexts needs at least one context")
            if role != "query":
                raise KeyStoreError("only query keys can be limited to contexts: an admin sees every one")
        secret = secret if secret is not None else new_secret(KEY_PREFIX)
        if not secret.strip():
            raise KeyStoreError("a key cannot be blank")
        key = ApiKey(new_id("key"), name, role, time.time(), contexts=limited)
        with self.db.writing() as conn:
            taken = conn.execute(
                select(keys_t.c.id).where(keys_t.c.name == name, keys_t.c.revoked_at.is_(None))
            ).first()
            if taken is not None:
                raise KeyStoreError(f"an active key is already named {name!r} ({taken.id})")
            if conn.execute(select(keys_t.c.id).where(keys_t.c.hash == digest(secret))).first():
                raise KeyStoreError("that key string is already stored")
            conn.execute(
                insert(keys_t).values(
                    id=key.id, name=name, role=role, hash=digest(secret), created_at=key.created_at
                )
            )
            if limited is not None:
                conn.execute(insert(key_contexts_t), [{"key_id": key.id, "context_id": c} for c in limited])
        return key, secret

    def list_keys(self, include_revoked: bool = True) -> list[ApiKey]:
        """Oldest first; never the secrets (only their hashes are stored)."""
        stmt = select(keys_t).order_by(keys_t.c.created_at, keys_t.c.id)
        if not include_revoked:
            stmt = stmt.where(keys_t.c.revoked_at.is_(None))
        with self.db.reading() as conn:
            rows = conn.execute(stmt).all()
            contexts = _contexts_of(conn, [row.id for row in rows])
        return [_key(row, contexts.get(row.id)) for row in rows]

    def revoke(self, id_or_name: str) -> ApiKey:
        """Revoke the key with this id, or the active key with this name; its tokens die with it.

        Revoking an already revoked key (by id) returns it unchanged. `KeyStoreError` when nothing matches.
        """
        with self.db.writing() as conn:
            row = conn.execute(select(keys_t).where(keys_t.c.id == id_or_name)).first()
            if row is None:
                row = conn.execute(
                    select(keys_t).where(keys_t.c.name == id_or_name, keys_t.c.revoked_at.is_(None))
                ).first()
            if row is None:
                raise KeyStoreError(f"no active key with id or name {id_or_name!r}")
            contexts = _contexts_of(conn, [row.id]).get(row.id)
            if row.revoked_at is not None:
                return _key(row, contexts)
            stamp = time.time()
            conn.execute(update(keys_t).where(keys_t.c.id == row.id).values(revoked_at=stamp))
        return ApiKey(row.id, row.name, row.role, row.created_at, stamp, contexts)

    def seed(self, secret: str, name: str = "SLEUTH_API_KEY") -> ApiKey | None:
        """Make sure the operator's key (`SLEUTH_API_KEY`) is an active admin key; idempotent.

        A changed value replaces the previous seeded key (revoked, with its tokens). A value that was
        revoked stays revoked (returns None): revocation is the operator's last word, not the env's.
        One transaction, so servers and workers starting together with the same value agree on one key
        (checking, revoking and creating in steps let one revoke the key another had just made).
        """
        if not secret.strip():
            raise KeyStoreError("a key cannot be blank")
        with self.db.writing() as conn:
            row = conn.execute(select(keys_t).where(keys_t.c.hash == digest(secret))).first()
            if row is not None:
                return _key(row) if row.revoked_at is None else None
            stamp = time.time()
            conn.execute(
                update(keys_t)
                .where(keys_t.c.name == name, keys_t.c.revoked_at.is_(None))
                .values(revoked_at=stamp)
            )
            key = ApiKey(new_id("key"), name, "admin", stamp)
            conn.execute(
                insert(keys_t).values(
                    id=key.id, name=name, role="admin", hash=digest(secret), created_at=stamp
                )
            )
        return key

    # --- verification and login --------------------------------------------------------------------

    def verify_key(self, secret: str) -> ApiKey | None:
        """The active key with this secret, else None."""
        with self.db.reading() as conn:
            row = conn.execute(
                select(keys_t).where(keys_t.c.hash == digest(secret), keys_t.c.revoked_at.is_(None))
            ).first()
            return _with_contexts(conn, row)

    def verify_token(self, token: str, now: float | None = None) -> ApiKey | None:
        """The key behind an unexpired login token whose key is still active, else None."""
        stamp = time.time() if now is None else now
        stmt = (
            select(keys_t)
            .join(tokens_t, tokens_t.c.key_id == keys_t.c.id)
            .where(
                tokens_t.c.hash == digest(token),
                tokens_t.c.expires_at > stamp,
                keys_t.c.revoked_at.is_(None),
            )
        )
        with self.db.reading() as conn:
            return _with_contexts(conn, conn.execute(stmt).first())

    def verify(self, secret: str, *, tokens: bool = True) -> ApiKey | None:
        """A key string, or (with `tokens`) a login token: who presents it, or None if nobody."""
        if tokens and secret.startswith(TOKEN_PREFIX):
            return self.verify_token(secret)
        return self.verify_key(secret)

    def logout(self, token: str) -> bool:
        """End one login token (signing out); the key and its other tokens stay. False if none."""
        with self.db.writing() as conn:
            gone = conn.execute(delete(tokens_t).where(tokens_t.c.hash == digest(token)))
        return bool(gone.rowcount)

    def login(self, secret: str, ttl_s: float = TOKEN_TTL_S) -> LoginToken | None:
        """Exchange an active key (not a token: that would extend a token forever) for a login token."""
        key = self.verify_key(secret)
        if key is None:
            return None
        token = new_secret(TOKEN_PREFIX)
        now = time.time()
        with self.db.writing() as conn:
            conn.execute(delete(tokens_t).where(tokens_t.c.expires_at <= now))  # keep the table small
            conn.execute(
                insert(tokens_t).values(
                    hash=digest(token), key_id=key.id, created_at=now, expires_at=now + ttl_s
                )
            )
        return LoginToken(token, key, now + ttl_s)
