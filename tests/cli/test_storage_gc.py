"""`sleuth storage gc` (issue 42): what nothing refers to leaves the shared storage after the grace;
what a head, a version index or a task names stays, and so does anything younger, or a blob named until
less than the grace ago. Real parts: a `file://` storage in tmp_path (whose files' times, and the marks
of a collection, the tests set back as if days had passed), PostgreSQL and SQLite."""

from __future__ import annotations

import hashlib
import json
import os
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from typer.testing import CliRunner

from sleuth.cli import app
from sleuth.server.storage_gc import GcRefused, GraceTooShort, collect
from sleuth.store.contexts.home import Home
from sleuth.store.contexts.replica import Replica
from sleuth.store.contexts.shared_trees import blob_key
from sleuth.store.database import Database, forget_database, open_database
from sleuth.store.records.tasks import TaskStore
from sleuth.store.storage import DirectoryStorage
from tests.postgres import Postgres

DAY = 86400.0


def _blob(data: bytes) -> str:
    return blob_key(hashlib.sha256(data).hexdigest())


def _age(storage: DirectoryStorage, days: float = 2.0) -> None:
    """Every object written `days` ago, as if a day had passed since each was stored."""
    stamp = time.time() - days * DAY
    for path in storage.root.rglob("*"):
        if path.is_file():
            os.utime(path, (stamp, stamp))


def _age_marks(storage: DirectoryStorage, days: float = 2.0) -> None:
    """The blobs a collection marked as named by nothing, marked `days` earlier."""
    for key in storage.keys("gc/marks"):
        marks = json.loads(storage.get_bytes(key))
        storage.put_bytes(key, json.dumps({blob: when - days * DAY for blob, when in marks.items()}).encode())


def _tree(folder: Path, name: str, data: bytes) -> Path:
    folder.mkdir(parents=True)
    (folder / name).write_bytes(data)
    return folder


@dataclass
class World:
    """A deployment's storage with one of each thing `storage gc` decides on."""

    storage: DirectoryStorage
    database: Database
    replica: Replica
    kept: set[str]  # what must stay
    gone: set[str]  # what must go

    def stored(self) -> set[str]:
        """Every object but the collection's own marks."""
        return {key for key in self.storage.keys("") if not key.startswith("gc/")}


def build(tmp_path: Path, database_url: str) -> World:
    storage = DirectoryStorage(tmp_path / "shared")
    database = open_database(database_url)
    replica = Replica(database, storage)
    tasks = TaskStore(database)
    ctx = Home(tmp_path / "node", replica).create("kept")
    with ctx.editing():
        (ctx.sources / "a.md").write_bytes(b"a source of a live context")
    ctx_id = ctx.root.name
    replica.publish_version(ctx_id, _tree(tmp_path / "live" / "v000001", "index.bin", b"the live version"))
    replica.publish_version("ctx_deleted", _tree(tmp_path / "old" / "v000001", "index.bin", b"a deleted one"))
    pack = tasks.create("pack", context_id=ctx_id, context_slug="kept", created_by=None, state="completed")
    replica.put_tree(f"tasks/{pack['id']}/files.json", _tree(tmp_path / "pack", "pack.zip", b"a task's pack"))
    storage.put_bytes(f"tasks/{pack['id']}/vectors/0.npz", b"vectors a helper left")
    replica.put_tree(
        "tasks/tsk_gone/files.json", _tree(tmp_path / "gone", "report.md", b"a gone task's file")
    )
    waiting = tasks.create("import", context_id=ctx_id, context_slug="kept", created_by=None)
    tasks.set_job(
        waiting["id"], {"kind": "import", "args": {"upload": waiting["id"], "input": "a.zip"}, "phases": []}
    )
    storage.put_bytes(f"uploads/{waiting['id']}/a.zip", b"an upload a queued task waits for")
    storage.put_bytes("uploads/tsk_done/b.zip", b"an upload whose task ended")
    storage.put_bytes(_blob(b"nobody's"), b"nobody's")
    _age(storage)
    storage.put_bytes(_blob(b"just uploaded"), b"just uploaded")  # a curate in flight's
    gone = {
        "versions/ctx_deleted/v000001.json",
        _blob(b"a deleted one"),
        f"tasks/{pack['id']}/vectors/0.npz",
        "tasks/tsk_gone/files.json",
        _blob(b"a gone task's file"),
        "uploads/tsk_done/b.zip",
        _blob(b"nobody's"),
    }
    everything = set(storage.keys(""))
    assert gone < everything
    return World(storage, database, replica, everything - gone, gone)


@pytest.fixture
def pg_world(
    postgres: Postgres, tmp_path: Path, home: Home, monkeypatch: pytest.MonkeyPatch
) -> Iterator[World]:
    url = postgres.create_database()
    world = build(tmp_path, url)
    monkeypatch.setenv("SLEUTH_DATABASE_URL", url)
    monkeypatch.setenv("SLEUTH_STORAGE_URL", world.storage.url)
    yield world
    forget_database(url)
    postgres.drop_database(url)


def test_gc_removes_what_nothing_names_after_the_grace(pg_world: World) -> None:
    assert _blob(b"a source of a live context") in pg_world.kept
    assert _blob(b"just uploaded") in pg_world.kept
    sizes = {item.key: item.size for item in pg_world.storage.listing("")}
    blob_bytes = sum(sizes[key] for key in pg_world.gone if key.startswith("blobs/"))
    other_bytes = sum(sizes[key] for key in pg_world.gone if not key.startswith("blobs/"))

    dry = CliRunner().invoke(app, ["storage", "gc", "--dry-run"])
    assert dry.exit_code == 0, dry.output
    assert dry.output.splitlines()[0] == "blobs: 0 would go (0 bytes), 4 kept within the grace (24h)"
    assert dry.output.splitlines()[-1] == f"{other_bytes} bytes would be freed (--dry-run: nothing removed)"
    assert set(pg_world.storage.keys("")) == pg_world.kept | pg_world.gone  # not even a mark

    first = CliRunner().invoke(app, ["storage", "gc"])  # the blobs nothing names are marked
    assert first.exit_code == 0, first.output
    assert first.output.splitlines() == [
        "blobs: 0 removed (0 bytes), 4 kept within the grace (24h)",
        f"version indexes: 1 removed ({sizes['versions/ctx_deleted/v000001.json']} bytes)",
        f"task files: 2 removed ({sum(sizes[k] for k in pg_world.gone if k.startswith('tasks/'))} bytes)",
        f"uploads: 1 removed ({sizes['uploads/tsk_done/b.zip']} bytes)",
        "extraction caches: 0 removed (0 bytes)",
        f"{other_bytes} bytes freed",
    ]
    _age_marks(pg_world.storage)
    done = CliRunner().invoke(app, ["storage", "gc"])
    assert done.exit_code == 0, done.output
    assert (
        done.output.splitlines()[0] == f"blobs: 3 removed ({blob_bytes} bytes), 1 kept within the grace (24h)"
    )
    assert done.output.splitlines()[-1] == f"{blob_bytes} bytes freed"
    assert pg_world.stored() == pg_world.kept  # the young blob, marked days ago, is still too young
    assert (
        CliRunner().invoke(app, ["storage", "gc", "--grace", "1h"]).exit_code == 2
    )  # shorter than a publish


def test_a_blob_a_head_named_until_lately_is_kept_for_the_grace(tmp_path: Path) -> None:
    """A working copy merges its next push against the blob of its base, which the head may have
    stopped naming since: the blob stays until nothing has named it for the grace, however old it is."""
    world = build(tmp_path, str(tmp_path / "server.sqlite"))
    ctx = Home(tmp_path / "node", world.replica).find("kept")
    before = _blob(b"a source of a live context")
    with ctx.editing():
        (ctx.sources / "a.md").write_bytes(b"the source, edited")
    assert collect(world.storage, world.database).kinds["blobs"].removed == 0
    assert before in world.stored()
    _age_marks(world.storage)
    assert collect(world.storage, world.database).kinds["blobs"].removed == 4
    assert before not in world.stored() and _blob(b"the source, edited") in world.stored()
    forget_database(str(tmp_path / "server.sqlite"))


def test_a_blob_a_publish_reuses_is_freshened(tmp_path: Path) -> None:
    world = build(tmp_path, str(tmp_path / "server.sqlite"))
    orphan = world.storage.root / _blob(b"nobody's")
    aged = orphan.stat().st_mtime
    (ctx_id,) = (head.id for head in world.replica.heads())
    # A curate whose version holds the orphan's bytes finds the blob there and reuses it: the blob is
    # made as young as an upload, so a collection that runs before its index is written spares it.
    world.replica.publish_version(ctx_id, _tree(tmp_path / "next" / "v000002", "same.bin", b"nobody's"))
    assert orphan.stat().st_mtime > aged + DAY
    collect(world.storage, world.database)
    _age_marks(world.storage)
    assert collect(world.storage, world.database).kinds["blobs"].removed == 2
    assert world.stored() == world.kept | {_blob(b"nobody's"), f"versions/{ctx_id}/v000002.json"}
    forget_database(str(tmp_path / "server.sqlite"))


def test_a_publish_leaves_the_blobs_of_the_previous_version_alone(tmp_path: Path) -> None:
    world = build(tmp_path, str(tmp_path / "server.sqlite"))
    (ctx_id,) = (head.id for head in world.replica.heads())
    shared = _blob(b"the live version")
    before = world.storage.root / shared
    stamp = before.stat().st_mtime
    world.replica.publish_version(
        ctx_id, _tree(tmp_path / "next" / "v000002", "index.bin", b"the live version")
    )
    assert before.stat().st_mtime == stamp  # named by v000001's index: neither checked nor freshened
    report = collect(world.storage, world.database)
    assert shared in world.stored() and report.kinds["version indexes"].removed == 1
    forget_database(str(tmp_path / "server.sqlite"))


def test_gc_refuses_a_database_that_names_none_of_the_storage_and_a_short_grace(tmp_path: Path) -> None:
    world = build(tmp_path, str(tmp_path / "server.sqlite"))
    other = open_database(tmp_path / "other.sqlite")
    Replica(other, world.storage)
    TaskStore(other)
    with pytest.raises(GcRefused, match="none of the 2 contexts in the storage has a head in this database"):
        collect(world.storage, other)
    with pytest.raises(GraceTooShort, match="at least 6 h"):
        collect(world.storage, world.database, grace_s=3600)
    bare = open_database(tmp_path / "bare.sqlite")
    with pytest.raises(GcRefused, match="no context_heads, tasks table"):
        collect(world.storage, bare)
    assert world.stored() == world.kept | world.gone
    for path in ("server.sqlite", "other.sqlite", "bare.sqlite"):
        forget_database(str(tmp_path / path))
