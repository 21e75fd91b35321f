"""Trees of files kept in the shared storage: every file a content-addressed blob (`blobs/<sha>`,
written once and shared by every tree that holds the same bytes), and each tree an index of its
files (path → sha, size) stored after its blobs, so an index never names a blob that is not there.

A context's versions are such trees (`versions/<context id>/<version>.json`): published once, never
changed, fetched whole the first time a node reads one and kept in a cache bounded by age and size
(`fetch_version`). A task's files travel the same way
(`put_tree`, `get_tree`). `store.replica.Replica` adds the heads, the part of a context that changes.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from sleuth.errors import Conflict
from sleuth.models.embedder import file_sha256
from sleuth.settings import TURN_CAP_SECONDS
from sleuth.store.files import write_text_atomic
from sleuth.store.storage import ObjectMissing, Storage

TRANSFERS = 8  # objects moved at once: object storage is latency-bound
#: A blob a publish reuses that was last written longer ago than this is written again (`freshen`), so
#: `storage gc`, which spares what is younger than its grace, never takes a blob a publish is about to
#: name: its grace must be longer than this plus the longest publish (`server.storage_gc.MIN_GRACE_S`).
FRESHEN_AFTER_S = 3600.0


class VersionConflict(Conflict, RuntimeError):
    """A version name already published with other content (it must never be reused)."""


def blob_key(sha: str) -> str:
    return f"blobs/{sha[:2]}/{sha}"


def version_key(ctx_id: str, version: str) -> str:
    return f"versions/{ctx_id}/{version}.json"


def _raise(error: OSError) -> None:
    raise error


def _index(directory: Path) -> tuple[dict[str, list[Any]], list[tuple[Path, str]]]:
    """(path → [sha, size], (file, sha) to upload) of every regular file under `directory`; an error
    reading it raises, so a missing or half-removed directory never becomes a short index."""
    if not directory.is_dir():
        raise FileNotFoundError(f"no directory {directory}")
    index: dict[str, list[Any]] = {}
    items = []
    for dirpath, _dirs, names in os.walk(directory, onerror=_raise):
        for name in names:
            full = Path(dirpath) / name
            if full.is_symlink() or not full.is_file():
                continue
            sha = file_sha256(full)
            index[full.relative_to(directory).as_posix()] = [sha, full.stat().st_size]
            items.append((full, sha))
    return index, items


def _live(ctx_root: Path) -> str:
    try:
        return (ctx_root / "LIVE").read_text(encoding="utf-8").strip()
    except FileNotFoundError:
        return ""


def _marked_size(mark: Path, entry: Path) -> int:
    """A fetched version's size, from its mark (counted once, when a mark from before sizes were kept
    names none)."""
    try:
        return int(mark.read_text(encoding="utf-8"))
    except ValueError:
        size = sum(p.stat().st_size for p in entry.rglob("*") if p.is_file())
        write_text_atomic(mark, str(size))
        return size


def _drop(entry: Path, mark: Path) -> None:
    """Remove a fetched version: renamed aside first, so a reader never finds it half removed."""
    aside = entry.parent / f".{entry.name}.evict-{secrets.token_hex(4)}"
    try:
        os.rename(entry, aside)
    except OSError:
        return
    mark.unlink(missing_ok=True)
    shutil.rmtree(aside, ignore_errors=True)


class SharedTrees:
    """The trees of one deployment's shared storage."""

    def __init__(self, storage: Storage, *, cache_bytes: int = 0) -> None:
        self.storage = storage
        self.cache_bytes = cache_bytes  # fetched versions on this node's disk, at most (0: no bound)
        self._guard = threading.Lock()
        self._locks: dict[str, threading.Lock] = {}

    @contextmanager
    def _syncing(self, ctx_id: str) -> Iterator[None]:
        """One pull or push of a context at a time in this process."""
        with self._guard:
            lock = self._locks.setdefault(ctx_id, threading.Lock())
        with lock:
            yield

    # -------------------------------------------------------------------------------- versions
    def versions(self, ctx_id: str) -> list[str]:
        """The names of the context's published versions (a curate numbers its own past all of them, so
        a version that was published but never made live is not named twice)."""
        prefix = f"versions/{ctx_id}/"
        return [key[len(prefix) :].removesuffix(".json") for key in self.storage.keys(prefix.rstrip("/"))]

    def publish_version(self, ctx_id: str, directory: Path) -> None:
        """Upload a finished version once: its blobs, then its index (the index is what makes it exist).
        An index already there under the name must be this version's, or the publish is refused."""
        key = version_key(ctx_id, directory.name)
        index, items = _index(directory)
        try:
            stored = json.loads(self.storage.get_bytes(key))
        except ObjectMissing:
            self._upload(items, self._published_blobs(ctx_id, directory.name))
            self.storage.put_bytes(key, json.dumps(index, sort_keys=True).encode())
            return
        if stored != index:
            raise VersionConflict(f"context {ctx_id}: another {directory.name} was published")

    def _published_blobs(self, ctx_id: str, version: str) -> frozenset[str]:
        """The blobs of the context's latest other published version: there, and kept there while its
        index is (an incremental curate shares most of them), so a publish neither checks nor freshens
        them."""
        others = sorted(name for name in self.versions(ctx_id) if name != version)
        if not others:
            return frozenset()
        try:
            index = json.loads(self.storage.get_bytes(version_key(ctx_id, others[-1])))
        except ObjectMissing:  # the context was deleted meanwhile: its publish fails at its head
            return frozenset()
        return frozenset(str(entry[0]) for entry in index.values())

    def fetch_version(self, ctx_id: str, directory: Path) -> None:
        """Make the version at `directory` local if the storage has it: fetched once (other readers here
        wait for it) into a hidden temporary directory, renamed into place whole. Room is made first
        (`_evict`), so the cache holds what is in use."""
        if directory.is_dir():
            os.utime(directory)  # read now: kept by the eviction below
            return
        with self._syncing(f"{ctx_id}/{directory.name}"):
            if directory.is_dir():
                return
            try:
                index = json.loads(self.storage.get_bytes(version_key(ctx_id, directory.name)))
            except ObjectMissing:
                return
            size = sum(int(entry[1]) for entry in index.values())
            self._evict(directory, incoming=size)
            self._place(index, directory)
            write_text_atomic(directory.parent / f".{directory.name}.fetched", str(size))

    def _evict(self, keep: Path, incoming: int = 0) -> None:
        """Make room among the versions this node fetched (each marked `.<name>.fetched`, holding its
        size), in every context of the home. Dropped: any not read for `TURN_CAP_SECONDS` that is not its
        context's live one; then, while the cache and `incoming` exceed `cache_bytes`, the least recently
        read live ones not read for as long. A version read within a turn's longest run is never
        dropped (a turn may still be reading it), nor one this node built (its curate collects those):
        the bound is met unless what running turns read exceeds it. A dropped live version is fetched
        again on its next read."""
        contexts = keep.parent.parent.parent
        cutoff = time.time() - TURN_CAP_SECONDS
        kept: list[tuple[float, int, Path, Path]] = []  # (read at, size, version, mark)
        total = 0
        for mark in contexts.glob("*/versions/.*.fetched"):
            entry = mark.parent / mark.name[1:].removesuffix(".fetched")
            try:
                read_at = entry.stat().st_mtime
            except FileNotFoundError:
                mark.unlink(missing_ok=True)
                continue
            size = _marked_size(mark, entry)
            live = entry.name == _live(entry.parent.parent)
            if entry != keep and not live and read_at < cutoff:
                _drop(entry, mark)
                continue
            total += size
            if entry != keep and read_at < cutoff:
                kept.append((read_at, size, entry, mark))
        if not self.cache_bytes:
            return
        for _read_at, size, entry, mark in sorted(kept, key=lambda item: item[0]):
            if total + incoming <= self.cache_bytes:
                break
            _drop(entry, mark)
            total -= size

    # ---------------------------------------------------------------------------------- trees
    def put_tree(self, key: str, directory: Path) -> None:
        """Upload every file under `directory` as blobs, then `key`: an index of path → [sha, size]."""
        index, items = _index(directory)
        self._upload(items)
        self.storage.put_bytes(key, json.dumps(index, sort_keys=True).encode())

    def get_tree(self, key: str, directory: Path) -> bool:
        """Fetch the tree `key` indexes into `directory` (`_place`); False when there is no such tree."""
        try:
            index = json.loads(self.storage.get_bytes(key))
        except ObjectMissing:
            return False
        self._place(index, directory)
        return True

    def _place(self, index: dict[str, list[Any]], directory: Path) -> None:
        """The files `index` names, fetched into a hidden directory beside `directory` and renamed into
        place whole, so a reader never sees half of them; a directory placed first by another thread
        or process wins."""
        temporary = directory.parent / f".{directory.name}.fetch-{secrets.token_hex(4)}"
        try:
            self._get_index(index, temporary)
            try:
                os.rename(temporary, directory)
            except OSError:
                if not directory.is_dir():
                    raise
        finally:
            shutil.rmtree(temporary, ignore_errors=True)

    def _get_index(self, index: dict[str, list[Any]], directory: Path) -> None:
        directory.mkdir(parents=True, exist_ok=True)
        targets = []
        for rel, (sha, _size) in index.items():
            target = (directory / rel).resolve()
            if not target.is_relative_to(directory.resolve()):
                raise ValueError(f"unsafe path {rel!r} in a stored tree")
            targets.append((blob_key(sha), target))
        self._download(targets)

    def _upload(self, items: list[tuple[Path, str]], present: frozenset[str] = frozenset()) -> None:
        """Every blob of `items` the storage lacks; one it has is freshened (`FRESHEN_AFTER_S`), except
        those of `present`, which a published index already names."""

        def one(item: tuple[Path, str]) -> None:
            path, sha = item
            if not self.storage.freshen(blob_key(sha), FRESHEN_AFTER_S):
                self.storage.put_file(blob_key(sha), path)

        unique = list({sha: (path, sha) for path, sha in items if sha not in present}.values())
        with ThreadPoolExecutor(TRANSFERS) as pool:
            list(pool.map(one, unique))

    def _download(self, items: list[tuple[str, Path]]) -> None:
        with ThreadPoolExecutor(TRANSFERS) as pool:
            list(pool.map(lambda item: self.storage.get_file(*item), items))
