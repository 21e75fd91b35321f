"""Contexts shared by many machines (`store/contexts/replica.py`): two homes, as two nodes have, over one
database (each backend) and one storage. What one node writes, the other reads; nothing half-made is
ever seen; edits of different files on two nodes both survive."""

from __future__ import annotations

import json
import os
import shutil
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from sleuth.compile.extraction.cache import ExtractionCache
from sleuth.compile.pipeline import compile_context
from sleuth.errors import Invalid
from sleuth.settings import TURN_CAP_SECONDS, current
from sleuth.store.contexts.home import ContextNotFound, Home
from sleuth.store.contexts.replica import (
    Replica,
    SlugTaken,
    heads_t,
    open_home,
)
from sleuth.store.contexts.shared_trees import VersionConflict, version_key
from sleuth.store.database import forget_database, open_database
from sleuth.store.records.replay_log import delete_replay_log, read_replay_log, write_replay_log
from sleuth.store.storage import DirectoryStorage, S3Storage, Storage
from tests.s3 import S3Server


class Nodes:
    """Two nodes' homes over one database and one storage."""

    def __init__(self, root: Path, database_url: str, storage: Storage) -> None:
        self.storage = storage
        database = open_database(database_url)
        self.a = Home(root / "node-a", Replica(database, storage))
        self.b = Home(root / "node-b", Replica(database, storage))


@pytest.fixture
def nodes(database_target: str, tmp_path: Path) -> Iterator[Nodes]:
    yield Nodes(tmp_path, database_target, DirectoryStorage(tmp_path / "shared"))
    forget_database(database_target)


@pytest.fixture
def corpus(tmp_path: Path) -> Path:
    root = tmp_path / "corpus"
    root.mkdir()
    (root / "refunds.md").write_text("# Refunds\n\nRefunds are paid within 30 days of a return.\n")
    (root / "fees.md").write_text("# Fees\n\nThe late fee is 12 dollars a month.\n")
    return root


def _files(directory: Path) -> dict[str, bytes]:
    return {
        p.relative_to(directory).as_posix(): p.read_bytes()
        for p in sorted(directory.rglob("*"))
        if p.is_file() and not p.name.startswith(".")
    }


def test_a_context_made_on_one_node_is_found_on_the_other(nodes: Nodes) -> None:
    made = nodes.a.create("policies", "Policies")
    with made.editing():
        (made.sources / "a.md").write_text("alpha")
        (made.sources / "deep" / "dir").mkdir(parents=True)
        (made.sources / "deep" / "dir" / "b.md").write_text("beta")
    seen = nodes.b.find("policies")
    assert seen.root.name == made.root.name and seen.root != made.root  # same id, another home
    assert seen.info().name == "Policies"
    assert _files(seen.sources) == {"a.md": b"alpha", "deep/dir/b.md": b"beta"}
    assert [info.slug for _ctx, info in nodes.b.contexts()] == ["policies"]
    assert nodes.b.find(made.root.name).root == seen.root  # by id too


def test_a_name_is_taken_once_across_nodes(nodes: Nodes) -> None:
    outcomes: list[str] = []

    def create(home: Home) -> None:
        try:
            home.create("same")
            outcomes.append("made")
        except FileExistsError:
            outcomes.append("taken")
        except Exception as exc:  # recorded, so the assert below shows it
            outcomes.append(repr(exc))

    threads = [threading.Thread(target=create, args=(home,)) for home in (nodes.a, nodes.b) * 3]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(outcomes) == ["made"] + ["taken"] * 5
    assert len(nodes.a.contexts()) == len(nodes.b.contexts()) == 1
    # the losers left no working copy behind
    assert len([p for p in (nodes.a.contexts_dir).iterdir()]) + len(list(nodes.b.contexts_dir.iterdir())) <= 2


def test_edits_of_different_files_on_two_nodes_both_survive(nodes: Nodes) -> None:
    ctx_a = nodes.a.create("c")
    ctx_b = nodes.b.find("c")
    # B starts editing (pulled), then A edits and pushes another file before B pushes
    nodes.b.shared.pull(ctx_b)  # type: ignore[union-attr]
    (ctx_b.sources / "from-b.md").write_text("b")
    with ctx_a.editing():
        (ctx_a.root / "context.extra.json").write_text('{"guide": "from a"}')
    nodes.b.shared.push(ctx_b)  # type: ignore[union-attr]
    for home in (nodes.a, nodes.b):
        ctx = home.find("c")
        assert json.loads((ctx.root / "context.extra.json").read_text()) == {"guide": "from a"}
        assert (ctx.sources / "from-b.md").read_text() == "b"


def test_deletes_travel_and_an_edit_not_yet_pushed_survives_a_pull(nodes: Nodes) -> None:
    ctx_a = nodes.a.create("c")
    with ctx_a.editing():
        (ctx_a.sources / "gone.md").write_text("x")
        (ctx_a.sources / "kept.md").write_text("y")
    ctx_b = nodes.b.find("c")
    (ctx_b.sources / "draft.md").write_text("not pushed yet")  # an upload under way on B
    with ctx_a.editing():
        (ctx_a.sources / "gone.md").unlink()
    ctx_b = nodes.b.find("c")  # pulls A's delete
    assert sorted(_files(ctx_b.sources)) == ["draft.md", "kept.md"]
    assert ctx_b.info().slug == "c"


def test_a_curate_on_one_node_is_read_whole_on_the_other(nodes: Nodes, corpus: Path) -> None:
    report = compile_context("c", [corpus], home=nodes.a, settings=current())
    assert report.flipped and report.version == "v000001"
    assert nodes.storage.exists(version_key(nodes.a.find("c").root.name, "v000001"))
    ctx_b = nodes.b.find("c")
    assert ctx_b.live_version() == "v000001"
    fetched = ctx_b.version_dir("v000001")
    assert _files(fetched) == _files(nodes.a.find("c").version_dir("v000001"))
    assert sorted(p.name for p in ctx_b.versions.iterdir()) == [".v000001.fetched", "v000001"]  # no temporary
    # the next curate runs on B, from A's ledger: only the new source is parsed
    with ctx_b.editing():
        (ctx_b.sources / "hours.md").write_text("# Hours\n\nThe office opens at 9.\n")
    again = compile_context("c", home=nodes.b, settings=current())
    assert again.version == "v000002" and again.new == ["hours.md"] and again.unchanged
    assert nodes.a.find("c").live_version() == "v000002"


def test_the_live_pointer_moves_only_once_the_version_is_whole(nodes: Nodes, corpus: Path) -> None:
    compile_context("c", [corpus], home=nodes.a, settings=current())
    ctx_a = nodes.a.find("c")
    (ctx_a.sources / "new.md").write_text("# New\n\nA new rule.\n")
    put_bytes = nodes.storage.put_bytes

    def no_index(key: str, data: bytes) -> None:  # the storage fails as the index goes up
        if key.startswith("versions/"):
            raise OSError("storage full")
        put_bytes(key, data)

    nodes.storage.put_bytes = no_index  # type: ignore[method-assign]
    with pytest.raises(OSError, match="storage full"):
        compile_context("c", home=nodes.a, settings=current())
    nodes.storage.put_bytes = put_bytes  # type: ignore[method-assign]
    ctx_b = nodes.b.find("c")
    assert ctx_b.live_version() == "v000001"  # B never sees a pointer to the version with no index
    assert ctx_b.version_dir("v000001").is_dir() and not ctx_b.version_dir("v000002").exists()
    nodes.a.shared.push(ctx_a)  # type: ignore[union-attr]  # the next push publishes it whole
    assert nodes.b.find("c").live_version() == "v000002"


def test_concurrent_readers_fetch_one_whole_version(nodes: Nodes, corpus: Path) -> None:
    compile_context("c", [corpus], home=nodes.a, settings=current())
    expected = _files(nodes.a.find("c").version_dir("v000001"))
    ctx_b = nodes.b.find("c")
    seen: list[dict[str, bytes]] = []
    threads = [
        threading.Thread(target=lambda: seen.append(_files(ctx_b.version_dir("v000001")))) for _ in range(6)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert seen == [expected] * 6
    assert sorted(p.name for p in ctx_b.versions.iterdir()) == [".v000001.fetched", "v000001"]


def test_a_context_deleted_on_one_node_is_gone_from_the_other(nodes: Nodes) -> None:
    nodes.a.create("c")
    copy = nodes.b.find("c").root
    nodes.a.delete(nodes.a.find("c"))
    with pytest.raises(ContextNotFound):
        nodes.b.find("c")
    assert nodes.b.contexts() == [] and not copy.exists()  # the listing drops the stale copy


def test_a_rename_travels_and_cannot_take_a_used_name(nodes: Nodes) -> None:
    ctx = nodes.a.create("old")
    nodes.a.create("taken")
    with ctx.editing():
        info = ctx.info()
        info.slug = "new"
        ctx.save_info(info)
    assert nodes.b.find("new").info().slug == "new"
    with pytest.raises(ContextNotFound):
        nodes.b.find("old")
    with pytest.raises(SlugTaken), ctx.editing():
        info = ctx.info()
        info.slug = "taken"
        ctx.save_info(info)
        (ctx.sources / "kept.md").write_text("an upload in the same change")
    assert ctx.info().slug == "new"  # the refused rename is undone here, so later pushes go through
    with ctx.editing():
        pass
    seen = nodes.b.find("new")
    assert (seen.sources / "kept.md").read_text() == "an upload in the same change"


def test_caches_and_logs_a_node_made_are_read_on_the_other(nodes: Nodes) -> None:
    ctx_a = nodes.a.create("c")
    ExtractionCache.of(ctx_a).put("ab" * 32, {"answer": 42}, model="m")
    cache_b = ExtractionCache.of(nodes.b.find("c"))
    assert cache_b.get("ab" * 32) == {"answer": 42} and cache_b.get("cd" * 32) is None
    cache_b.clear()  # a forced curate on B re-extracts everywhere
    assert (
        ExtractionCache(ctx_a.extraction_cache.parent / "fresh", nodes.storage, cache_b.prefix).get("ab" * 32)
        is None
    )
    query = "qry_0123456789abcdef"
    write_replay_log(nodes.a.root, query, [{"kind": "turn", "n": 1}], nodes.storage)
    assert read_replay_log(nodes.b.root, query, nodes.storage) == [{"kind": "turn", "n": 1}]
    delete_replay_log(nodes.b.root, query, nodes.storage)
    with pytest.raises(FileNotFoundError):
        read_replay_log(nodes.b.root / "elsewhere", query, nodes.storage)


def test_s3_storage_carries_a_curate_between_nodes(s3_server: S3Server, tmp_path: Path, corpus: Path) -> None:
    storage = S3Storage(s3_server.new_bucket(), "sleuth", client=s3_server.client())
    two = Nodes(tmp_path, str(tmp_path / "server.sqlite"), storage)
    compile_context("c", [corpus], home=two.a, settings=current())
    ctx_b = two.b.find("c")
    assert _files(ctx_b.version_dir(ctx_b.live_version() or "")) == _files(
        two.a.find("c").version_dir("v000001")
    )
    assert any(key.startswith("blobs/") for key in storage.keys(""))


def test_a_storage_url_needs_a_database(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("SLEUTH_STORAGE_URL", (tmp_path / "shared").as_uri())
    monkeypatch.delenv("SLEUTH_DATABASE_URL", raising=False)
    with pytest.raises(Invalid, match="needs SLEUTH_DATABASE_URL"):
        open_home(tmp_path / "home", current())
    monkeypatch.setenv("SLEUTH_DATABASE_URL", f"sqlite:///{tmp_path / 'db.sqlite'}")
    with pytest.raises(Invalid, match="postgresql"):  # a SQLite file is one machine's
        open_home(tmp_path / "home", current())
    monkeypatch.delenv("SLEUTH_STORAGE_URL")
    assert open_home(tmp_path / "home", current()).shared is None  # the single-machine default is unchanged


def test_a_curate_saving_context_json_keeps_a_rename_made_meanwhile(nodes: Nodes) -> None:
    """Per-key merge of the small JSON files: a worker's curate saves `context.json` (its timestamps)
    from the copy it pulled; a rename pushed meanwhile from another server survives, and so do both
    sides' keys of `context.extra.json`."""
    ctx_a = nodes.a.create("before")
    with ctx_a.editing():
        (ctx_a.root / "context.extra.json").write_text('{"guide": "g0", "kind": "search"}')
    worker = nodes.b.find("before")
    info = worker.info()
    info.last_curated_at = "2026-12-02T00:00:00.000000Z"
    worker.save_info(info)
    (worker.root / "context.extra.json").write_text('{"guide": "g0", "kind": "search", "last_import": "x"}')
    with ctx_a.editing():  # the rename and a guide edit are pushed first
        renamed = ctx_a.info()
        renamed.slug = "after"
        ctx_a.save_info(renamed)
        (ctx_a.root / "context.extra.json").write_text('{"guide": "g1", "kind": "search"}')
    nodes.b.shared.push(worker)  # type: ignore[union-attr]
    for home in (nodes.a, nodes.b):
        seen = home.find("after")
        assert seen.info().slug == "after" and seen.info().last_curated_at == "2026-12-02T00:00:00.000000Z"
        extra = json.loads((seen.root / "context.extra.json").read_text())
        assert extra == {"guide": "g1", "kind": "search", "last_import": "x"}
    with pytest.raises(ContextNotFound):
        nodes.a.find("before")


def test_a_changed_file_not_yet_pushed_survives_a_pull_and_its_push_wins(nodes: Nodes) -> None:
    ctx_a = nodes.a.create("c")
    with ctx_a.editing():
        (ctx_a.sources / "doc.md").write_text("one")
    ctx_b = nodes.b.find("c")
    (ctx_b.sources / "doc.md").write_text("b's edit, not pushed")
    with ctx_a.editing():
        (ctx_a.sources / "doc.md").write_text("a's edit")
    ctx_b = nodes.b.find("c")  # the head changed the file too: B's own edit is kept
    assert (ctx_b.sources / "doc.md").read_text() == "b's edit, not pushed"
    nodes.b.shared.push(ctx_b)  # type: ignore[union-attr]
    assert (nodes.a.find("c").sources / "doc.md").read_text() == "b's edit, not pushed"  # the last push


def test_a_version_published_but_never_made_live_is_never_named_again(nodes: Nodes, corpus: Path) -> None:
    compile_context("c", [corpus], home=nodes.a, settings=current())
    ctx_a = nodes.a.find("c")
    (ctx_a.sources / "new.md").write_text("# New\n\nA new rule.\n")
    replica = nodes.a.shared
    assert isinstance(replica, Replica)
    move = replica._move_head

    def database_gone(*args: object, **kwargs: object) -> object:
        raise ConnectionError("the database went away")

    replica._move_head = database_gone  # type: ignore[method-assign]
    with pytest.raises(ConnectionError):
        compile_context("c", home=nodes.a, settings=current())  # v000002 is published, the head never moves
    replica._move_head = move  # type: ignore[method-assign]
    ctx_id = ctx_a.root.name
    assert nodes.storage.exists(version_key(ctx_id, "v000002"))
    ctx_b = nodes.b.find("c")
    assert ctx_b.live_version() == "v000001"
    (ctx_b.sources / "newer.md").write_text("# Newer\n\nAnother rule.\n")
    report = compile_context("c", home=nodes.b, settings=current())
    assert report.version == "v000003"  # past the orphan, whose index no one points at
    assert nodes.a.find("c").live_version() == "v000003"
    impostor = ctx_b.root.parent / "elsewhere" / "v000001"  # other files under a published name
    shutil.copytree(nodes.b.find("c").version_dir("v000003"), impostor)
    with pytest.raises(VersionConflict):  # an index is never replaced by another version's
        replica.publish_version(ctx_id, impostor)
    with pytest.raises(FileNotFoundError):
        replica.put_tree("tasks/x/files.json", ctx_b.root / "no-such-dir")


def test_fetched_versions_not_read_for_a_turn_cap_are_evicted_but_never_the_live_one(
    nodes: Nodes, corpus: Path
) -> None:
    compile_context("c", [corpus], home=nodes.a, settings=current())
    ctx_b = nodes.b.find("c")
    first = ctx_b.version_dir("v000001")
    old = time.time() - 2 * TURN_CAP_SECONDS
    os.utime(first, (old, old))
    ctx_a = nodes.a.find("c")
    (ctx_a.sources / "new.md").write_text("# New\n\nA new rule.\n")
    compile_context("c", home=nodes.a, settings=current())
    ctx_b = nodes.b.find("c")
    assert ctx_b.live_version() == "v000002"
    ctx_b.version_dir("v000002")  # fetching it drops v000001: fetched, unread for long, not live
    assert not first.exists() and ctx_b.version_dir("v000002").is_dir()
    live = ctx_b.version_dir("v000002")
    os.utime(live, (old, old))
    (ctx_b.versions / "v000009").mkdir()  # a version this node built itself: never evicted
    nodes.b.shared._evict(ctx_b.versions / "v000001")  # type: ignore[union-attr]
    assert live.is_dir() and (ctx_b.versions / "v000009").is_dir()


@pytest.mark.parametrize("bad", ["../escape", "sources/../LIVE", ".replica.json", "versions/v1/x", "a//b"])
def test_a_head_that_points_outside_the_copy_is_refused(nodes: Nodes, bad: str) -> None:
    ctx = nodes.a.create("c")
    replica = nodes.b.shared
    assert isinstance(replica, Replica)
    with replica.database.writing() as conn:
        conn.execute(
            heads_t.update()
            .where(heads_t.c.id == ctx.root.name)
            .values(files=json.dumps({bad: "0" * 64}), revision=99)
        )
    with pytest.raises(ValueError, match="unsafe path"):
        nodes.b.find("c")


def test_a_node_copies_a_contexts_sources_only_when_it_reads_them(nodes: Nodes, corpus: Path) -> None:
    compile_context("c", [corpus], home=nodes.a, settings=current())
    nodes.b.contexts()  # what a fresh API server's `GET /contexts` does
    ctx_b = nodes.b.find("c")
    assert ctx_b.live_version() == "v000001" and ctx_b.manifest_file.is_file()
    assert not any((ctx_b.root / "sources").iterdir())  # it answers from the version alone
    assert _names(ctx_b.sources) == ["fees.md", "refunds.md"]  # read here: fetched
    ctx_a = nodes.a.find("c")
    with ctx_a.editing():
        (ctx_a.sources / "hours.md").write_text("# Hours\n\nThe office opens at 9.\n")
        next(ctx_a.sources.rglob("fees.md")).unlink()
    ctx_b = nodes.b.find("c")  # a copy that holds its sources keeps them up to date
    assert _names(ctx_b.root / "sources") == ["hours.md", "refunds.md"]
    with ctx_b.editing():
        (ctx_b.sources / "more.md").write_text("# More\n")
    assert _names(nodes.a.find("c").sources) == ["hours.md", "more.md", "refunds.md"]


def _names(directory: Path) -> list[str]:
    return sorted(p.name for p in directory.rglob("*") if p.is_file())


def test_a_lazy_copys_push_never_drops_the_sources_it_left_out(nodes: Nodes, corpus: Path) -> None:
    compile_context("c", [corpus], home=nodes.a, settings=current())
    ctx_b = nodes.b.find("c")
    with ctx_b.editing():  # pulls the sources first (an edit may change them)
        info = ctx_b.info()
        info.description = "renamed on b"
        ctx_b.save_info(info)
    replica = nodes.b.shared
    assert isinstance(replica, Replica)
    ctx_c = Home(ctx_b.root.parent.parent.parent / "node-c", replica).find("c")
    assert _names(ctx_c.root / "sources") == []
    ctx_c.manifest_file.write_text('{"description": "edited on c"}')
    replica.push(ctx_c)  # a copy without its sources pushes what it changed, and deletes none of them
    assert nodes.a.find("c").manifest_data() == {"description": "edited on c"}
    assert _names(nodes.a.find("c").sources) == ["fees.md", "refunds.md"]


def test_fetched_versions_are_bounded_by_size_least_recently_read_first(nodes: Nodes, tmp_path: Path) -> None:
    for slug, words in (("one", "alpha"), ("two", "beta"), ("three", "gamma")):
        corpus = tmp_path / slug
        corpus.mkdir()
        (corpus / "doc.md").write_text(f"# {words}\n\n" + f"{words} rule. " * 200)
        compile_context(slug, [corpus], home=nodes.a, settings=current())
    replica = nodes.b.shared
    assert isinstance(replica, Replica)
    old = time.time() - 2 * TURN_CAP_SECONDS
    first = nodes.b.find("one").version_dir("v000001")
    size = sum(p.stat().st_size for p in first.rglob("*") if p.is_file())
    replica.cache_bytes = int(size * 2.5)  # room for two versions of this size
    os.utime(first, (old - 10, old - 10))  # live, but read long ago
    second = nodes.b.find("two").version_dir("v000001")
    os.utime(second, (old, old))
    third = nodes.b.find("three").version_dir("v000001")  # no room: the least recently read goes
    assert not first.exists() and second.is_dir() and third.is_dir()
    assert nodes.b.find("one").version_dir("v000001").is_dir()  # a live version dropped is fetched again
    assert not second.exists()  # and made room in turn
    recent = nodes.b.find("three").version_dir("v000001")
    replica.cache_bytes = 1  # a version read within a turn's longest run is never dropped
    replica._evict(tmp_path / "none" / "versions" / "x")
    assert recent.is_dir()
