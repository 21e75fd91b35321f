"""Contexts that many machines share (docs/deploy.md): the database says what a context is, the
storage holds its bytes, and each node's `$SLEUTH_HOME` is only a working copy and a cache.

- **The head**, one row per context in the database: its slug, its live version, and a map of its
  context-level files (`context.json`, the manifest, the ledger, `context.extra.json`, `sources/`) to the
  SHA-256 of their content, with a revision number that every change moves.
- **Blobs** in the storage, `blobs/<sha>`: written once, never changed, shared by every version and
  context that holds the same bytes (an incremental curate uploads only what it changed).
- **Versions**, immutable: `versions/<context id>/<version>.json` indexes a version's files (path → sha,
  size). A curate publishes the index after its blobs, then moves the live pointer in one transaction, so
  no node can see a pointer to a version that is not whole. A node fetches a version the first time it
  reads it, into a temporary directory renamed into place under the version's id (`fetch_version`).

`pull` brings a working copy up to the head; `push` sends what changed here and moves the head in one
transaction. Both merge per file, three-way, against the revision this copy last saw: a pull replaces
only files the head changed since, so an edit made here and not yet pushed survives; a push applies
only files changed here, so two nodes editing different files of a context (a guide on one server, a
curate on a worker) lose neither. Two edits of one file: the last push wins, as on one machine.

Blobs and versions are kept by `store.shared_trees` (a `Replica` extends its `SharedTrees`); this
module keeps the heads and the working copies.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sqlalchemy import (
    Column,
    Float,
    Integer,
    MetaData,
    String,
    Table,
    Text,
    delete,
    insert,
    or_,
    select,
    update,
)
from sqlalchemy.exc import IntegrityError

from sleuth.errors import Conflict, Invalid
from sleuth.models.embedder import file_sha256
from sleuth.settings import Settings
from sleuth.store.contexts.home import SOURCES_MARK, ContextDir, ContextNotFound, Home
from sleuth.store.contexts.lock import check_fence
from sleuth.store.contexts.shared_trees import SharedTrees, blob_key
from sleuth.store.database import Database, dumps, loads, open_database
from sleuth.store.files import prune_empty_dirs, write_json_atomic, write_text_atomic
from sleuth.store.storage import Storage, open_storage

#: Not part of a context's head: versions travel as immutable trees; the caches, the lock and the
#: uploads being staged (the process that stages one consumes it) are the node's own; `LIVE` is the
#: head's live pointer. Names starting with "." are writes in progress.
LOCAL_ONLY = frozenset({"versions", "cache", "staging", "curate.lock", "LIVE"})
STATE_FILE = ".replica.json"  # the files map: read only when the head moved
MARK_FILE = ".replica-head"  # "<revision> <live>": read on every lookup
#: The head's files a copy leaves out until something reads them (`ContextDir.sources`): a node that only
#: answers needs the versions, not the documents they were compiled from.
LAZY_PREFIX = "sources/"
#: Small JSON objects several writers change different keys of: merged per key, not replaced whole.
MERGED_JSON = frozenset({"context.json", "context.extra.json"})

metadata = MetaData()
heads_t = Table(
    "context_heads",
    metadata,
    Column("id", String(80), primary_key=True),
    Column("slug", String(64), nullable=False, unique=True),
    Column("revision", Integer, nullable=False),
    Column("files", Text, nullable=False),  # JSON {path: sha256}
    Column("live_version", String(64)),
    Column("updated", Float, nullable=False),
)


class SlugTaken(Conflict, FileExistsError):
    """Another context, created or renamed on any machine, already has the name."""


@dataclass(frozen=True)
class Head:
    id: str
    slug: str
    revision: int
    live: str | None


@dataclass
class _CopyState:
    """`.replica.json`: the head this working copy last agreed with, and each file's (sha, size,
    mtime_ns) then, so an unchanged file is never hashed again."""

    revision: int = -1
    live: str | None = None
    files: dict[str, list[Any]] = field(default_factory=dict)
    sources: bool = False  # the copy holds the head's sources (else it leaves `LAZY_PREFIX` out)

    @classmethod
    def load(cls, root: Path) -> _CopyState:
        try:
            data = json.loads((root / STATE_FILE).read_text(encoding="utf-8"))
        except (FileNotFoundError, json.JSONDecodeError):
            return cls()
        files = dict(data.get("files") or {})
        sources = data.get("sources", any(rel.startswith(LAZY_PREFIX) for rel in files))  # older copies
        return cls(int(data.get("revision", -1)), data.get("live"), files, bool(sources))

    @staticmethod
    def mark(root: Path) -> tuple[int, str | None]:
        """(revision, live) this copy last agreed with, from the small file (-1: never)."""
        try:
            revision, _, live = (root / MARK_FILE).read_text(encoding="utf-8").partition(" ")
            return int(revision), live.strip() or None
        except (FileNotFoundError, ValueError):
            return -1, None

    def save(self, root: Path) -> None:
        state = {"revision": self.revision, "live": self.live, "files": self.files, "sources": self.sources}
        write_json_atomic(root / STATE_FILE, state)
        write_text_atomic(root / MARK_FILE, f"{self.revision} {self.live or ''}")
        if self.sources:
            (root / SOURCES_MARK).touch()


def _set_live(ctx: ContextDir, version: str | None) -> None:
    """Write the copy's `LIVE` as the head has it (in one rename, as a curate writes it)."""
    if version:
        write_text_atomic(ctx.live_file, version + "\n")
    else:
        ctx.live_file.unlink(missing_ok=True)


def check_head_path(rel: str) -> str:
    """A head's file path, refused when it could leave the working copy or reach what the node keeps
    for itself (a version, its state files): the head comes from the database, trusted no further."""
    parts = rel.split("/")
    if any(p in ("", ".", "..") or p.startswith(".") for p in parts) or parts[0] in LOCAL_ONLY or "\\" in rel:
        raise ValueError(f"unsafe path {rel!r} in a context's head")
    return rel


def _stat(path: Path) -> tuple[int, int]:
    st = path.stat()
    return st.st_size, st.st_mtime_ns


def head_files(root: Path) -> Iterator[str]:
    """The context-level files of a working copy (POSIX paths under `root`), links never followed."""
    for dirpath, dirnames, filenames in os.walk(root):
        here = Path(dirpath)
        top = here == root
        dirnames[:] = sorted(d for d in dirnames if not d.startswith(".") and not (top and d in LOCAL_ONLY))
        for name in sorted(filenames):
            full = here / name
            if name.startswith(".") or (top and name in LOCAL_ONLY) or full.is_symlink():
                continue
            yield full.relative_to(root).as_posix()


class Replica(SharedTrees):
    """The shared contexts of one deployment: heads in `database`, bytes in `storage`."""

    def __init__(self, database: Database, storage: Storage, *, cache_bytes: int = 0) -> None:
        super().__init__(storage, cache_bytes=cache_bytes)
        self.database = database
        database.prepare(metadata)

    # ------------------------------------------------------------------------------ the catalog
    _HEAD = select(heads_t.c.id, heads_t.c.slug, heads_t.c.revision, heads_t.c.live_version)

    def heads(self) -> list[Head]:
        with self.database.reading() as conn:
            return [Head(*row) for row in conn.execute(self._HEAD.order_by(heads_t.c.slug))]

    def head(self, slug_or_id: str) -> Head | None:
        where = or_(heads_t.c.id == slug_or_id, heads_t.c.slug == slug_or_id)
        with self.database.reading() as conn:
            row = conn.execute(self._HEAD.where(where)).first()
        return None if row is None else Head(*row)

    def register(self, ctx_id: str, slug: str) -> None:
        """Claim `slug` for a new context, on every machine at once (`SlugTaken` when it is held)."""
        row = {"id": ctx_id, "slug": slug, "revision": 0, "files": "{}", "live_version": None}
        try:
            with self.database.writing() as conn:
                conn.execute(insert(heads_t).values(**row, updated=self.database.clock(conn)))
        except IntegrityError:
            raise SlugTaken(f"context {slug!r} already exists") from None

    def adopt(self, ctx: ContextDir) -> bool:
        """Share a context of a single-machine home: claim its name, send its files and its live version,
        then point the head at it. False when the catalog already holds the context."""
        info = ctx.info()
        if self.head(info.id) is not None:
            return False
        self.register(info.id, info.slug)
        (ctx.root / STATE_FILE).unlink(missing_ok=True)
        (ctx.root / MARK_FILE).unlink(missing_ok=True)
        try:
            self.push(ContextDir(ctx.root, self))
        except BaseException:
            self.forget(info.id)
            raise
        return True

    def forget(self, ctx_id: str) -> None:
        """Remove the context from the catalog (its blobs stay: other versions may share them)."""
        with self.database.writing() as conn:
            conn.execute(delete(heads_t).where(heads_t.c.id == ctx_id))
        self.storage.delete(list(self.storage.keys(f"versions/{ctx_id}")))

    # ----------------------------------------------------------------------- the working copy
    def pull(self, ctx: ContextDir, head: Head | None = None, *, sources: bool = False) -> None:
        """Bring the working copy of `ctx` up to its head (nothing to do when it already is). Its sources
        come only with `sources` or once the copy holds them (`ContextDir.sources`)."""
        ctx_id = ctx.root.name
        head = head or self.head(ctx_id)
        if head is None:
            raise ContextNotFound(f"context {ctx_id!r} was deleted")
        lacking = sources and not (ctx.root / SOURCES_MARK).is_file()
        if _CopyState.mark(ctx.root) == (head.revision, head.live) and not lacking:
            return
        with self._syncing(ctx_id):
            with self.database.reading() as conn:
                row = conn.execute(select(heads_t).where(heads_t.c.id == ctx_id)).first()
            if row is None:
                raise ContextNotFound(f"context {ctx_id!r} was deleted")
            state = _CopyState.load(ctx.root)
            files = state.files
            with_sources = sources or state.sources
            wanted: dict[str, str] = loads(row.files)
            for rel in wanted:
                check_head_path(rel)
            if not with_sources:
                wanted = {rel: sha for rel, sha in wanted.items() if not rel.startswith(LAZY_PREFIX)}
            fetch = []
            for rel, sha in wanted.items():
                base = files.get(rel)
                if base is not None and base[0] == sha:
                    continue  # the head has not changed it since this copy's base: keep ours
                path = ctx.root / rel
                here = file_sha256(path) if path.is_file() else None
                if here == sha:
                    files[rel] = [sha, *_stat(path)]
                    continue
                if base is not None and here is not None and here != base[0]:
                    # Changed here too, not yet pushed: the push that comes merges it (JSON, per key)
                    # or wins (any other file), as the last push does on one machine.
                    continue
                fetch.append((rel, sha))
            self._download([(blob_key(sha), ctx.root / rel) for rel, sha in fetch])
            for rel, sha in fetch:
                files[rel] = [sha, *_stat(ctx.root / rel)]
            for rel in [
                r for r in files if r not in wanted and (with_sources or not r.startswith(LAZY_PREFIX))
            ]:
                path = ctx.root / rel
                base = files.pop(rel)
                if path.is_file() and list(_stat(path)) == base[1:]:  # untouched here: deleted there
                    path.unlink()
                    prune_empty_dirs(path.parent, ctx.root)
            # The live pointer moves only by a curate, which holds the context's lock: a head that moved
            # it since this copy's base means a flip here that was never pushed is stale.
            if row.live_version != state.live:
                _set_live(ctx, row.live_version)
            ctx.versions.mkdir(parents=True, exist_ok=True)  # folders travel only with files in them
            (ctx.root / "sources").mkdir(exist_ok=True)
            _CopyState(row.revision, row.live_version, files, with_sources).save(ctx.root)

    def push(self, ctx: ContextDir) -> None:
        """Send what changed in this working copy since its last pull or push; publish the live version
        first when this copy moved it, then move the head in one transaction."""
        ctx_id = ctx.root.name
        with self._syncing(ctx_id):
            state = _CopyState.load(ctx.root)
            files = state.files
            bases = {rel: str(entry[0]) for rel, entry in files.items()}
            changes: dict[str, str | None] = {}
            present = set()
            for rel in head_files(ctx.root):
                present.add(rel)
                path = ctx.root / rel
                size, mtime = _stat(path)
                base = files.get(rel)
                if base is not None and base[1:] == [size, mtime]:
                    continue
                sha = file_sha256(path)
                if base is None or base[0] != sha:
                    changes[rel] = sha
                files[rel] = [sha, size, mtime]
            for rel in [r for r in files if r not in present]:
                changes[rel] = None
                del files[rel]
            live = ctx.live_version()
            moved = live != state.live
            state.sources = state.sources or state.revision < 0  # a copy made or adopted here holds them all
            if not changes and not moved:
                state.save(ctx.root)  # the new sizes and times of files that did not change
                return
            self._upload([(ctx.root / rel, sha) for rel, sha in changes.items() if sha is not None])
            if moved and live is not None:
                self.publish_version(ctx_id, ctx.versions / live)
            try:
                row = self._move_head(ctx, changes, bases, live, moved, state.live)
            except IntegrityError:
                self._undo_rename(ctx)
                raise SlugTaken(f"context {ctx.info().slug!r} already exists") from None
            for rel in MERGED_JSON & changes.keys():  # a merge rewrote them here
                if changes[rel] is not None and (ctx.root / rel).is_file():
                    files[rel] = [changes[rel], *_stat(ctx.root / rel)]
            # Up to date only when no other push came between this copy's base and this one; else the
            # next pull merges theirs (the files pushed here already match).
            revision = row.revision + 1 if row.revision == state.revision else state.revision
            if moved and row.live_version != state.live:  # the stale flip is undone here too
                live = row.live_version
                _set_live(ctx, live)
            _CopyState(revision, live if moved else state.live, files, state.sources).save(ctx.root)

    def _move_head(
        self,
        ctx: ContextDir,
        changes: dict[str, str | None],
        bases: dict[str, str],
        live: str | None,
        moved: bool,
        base_live: str | None,
    ) -> Any:
        """Apply `changes` to the head in one transaction; returns the row as it was before. A JSON
        file of `MERGED_JSON` that another machine changed since this copy's base is merged per key
        (`changes` then holds the merged file's sha), so a curate that saved `context.json` does not
        undo a rename made meanwhile, nor an import a guide edited meanwhile."""
        ctx_id = ctx.root.name
        with self.database.writing() as conn:
            row = conn.execute(
                select(heads_t.c.revision, heads_t.c.files, heads_t.c.live_version).where(
                    heads_t.c.id == ctx_id
                )
            ).first()
            if row is None:
                raise ContextNotFound(f"context {ctx_id!r} was deleted")
            merged: dict[str, str] = loads(row.files)
            for rel in MERGED_JSON & changes.keys():
                theirs, ours = merged.get(rel), changes[rel]
                if ours is not None and theirs is not None and theirs not in (bases.get(rel), ours):
                    changes[rel] = self._merge_json(ctx.root / rel, bases.get(rel), theirs)
            slug = ctx.info().slug if changes.get("context.json") else None
            for rel, change in changes.items():
                if change is None:
                    merged.pop(rel, None)
                else:
                    merged[rel] = change
            values: dict[str, Any] = {
                "files": dumps(merged),
                "revision": row.revision + 1,
                "updated": self.database.clock(conn),
            }
            if moved and row.live_version == base_live:  # else a flip here was never pushed: stale
                check_fence(conn, f"curate:{ctx_id}")  # a curate whose lock was taken over publishes nothing
                values["live_version"] = live
            if slug is not None:
                values["slug"] = slug
            conn.execute(update(heads_t).where(heads_t.c.id == ctx_id).values(**values))
        return row

    def _merge_json(self, path: Path, base: str | None, theirs: str) -> str:
        """Three-way, per top-level key: the head's object with the keys this copy changed since its
        base; written here and stored; returns its sha."""

        def fetch(sha: str | None) -> dict[str, Any]:
            if sha is None:
                return {}
            value = json.loads(self.storage.get_bytes(blob_key(sha)))
            return value if isinstance(value, dict) else {}

        old, ours, result = fetch(base), json.loads(path.read_text(encoding="utf-8")), fetch(theirs)
        for key in set(old) | set(ours):
            if key not in ours:
                result.pop(key, None)
            elif ours[key] != old.get(key):
                result[key] = ours[key]
        write_json_atomic(path, result)
        sha = file_sha256(path)
        self.storage.put_file(blob_key(sha), path)
        return sha

    def _undo_rename(self, ctx: ContextDir) -> None:
        """A rename the catalog refused (the name is taken): `context.json` goes back to the head's, so
        this copy's later pushes do not meet the same refusal; its other changes stay to be pushed."""
        with self.database.reading() as conn:
            found = conn.execute(select(heads_t.c.files).where(heads_t.c.id == ctx.root.name)).scalar()
        sha = loads(found or "{}").get("context.json")
        if sha is None:
            return
        self.storage.get_file(blob_key(sha), ctx.info_file)
        state = _CopyState.load(ctx.root)
        state.files["context.json"] = [sha, *_stat(ctx.info_file)]
        state.save(ctx.root)


def context_storage(ctx: ContextDir) -> Storage | None:
    """The storage every machine shares, when `ctx` is a working copy of a shared context."""
    return ctx.shared.storage if isinstance(ctx.shared, Replica) else None


def shared_storage(home: Home) -> Storage | None:
    """The storage every machine shares, when `home` is a working copy of shared contexts."""
    return home.shared.storage if isinstance(home.shared, Replica) else None


def open_home(root: Path | None, settings: Settings) -> Home:
    """The home this process runs with (`root`, else `$SLEUTH_HOME`'s): with the `storage_url` setting
    (and a database) a working copy of the contexts every machine shares, else the contexts on this
    disk alone."""
    home = Home(root)
    if settings.storage_url:
        if not settings.database_url or not settings.database_url.startswith(("postgresql", "postgres:")):
            raise StorageConfigError(
                "SLEUTH_STORAGE_URL needs SLEUTH_DATABASE_URL=postgresql://…: the database holds what the "
                "storage's files are (each context's head and live version) and the curate lock, which "
                "every machine must see"
            )
        home.shared = Replica(
            open_database(settings.database_url),
            open_storage(settings.storage_url),
            cache_bytes=settings.version_cache_mb * 1024 * 1024,
        )
    return home


class StorageConfigError(Invalid, ValueError):
    """A storage URL without the database that says what its files are."""
