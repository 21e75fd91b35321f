"""The storage port's conformance suite: every backend (`file://` directory, `s3://` through boto3
against moto's S3 server) passes the same tests."""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from sleuth.store.storage import (
    DirectoryStorage,
    ObjectMissing,
    S3Storage,
    Storage,
    StorageUrlError,
    open_storage,
)
from tests.s3 import S3Server


@pytest.fixture(params=["directory", "s3"])
def storage(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Storage]:
    if request.param == "directory":
        yield DirectoryStorage(tmp_path / "shared")
        return
    server: S3Server = request.getfixturevalue("s3_server")
    yield S3Storage(server.new_bucket(), "deploy/one", client=server.client())


def test_an_object_put_is_read_back_whole(storage: Storage, tmp_path: Path) -> None:
    storage.put_bytes("a/b/c.json", b'{"x": 1}')
    big = tmp_path / "big.bin"
    big.write_bytes(bytes(range(256)) * 40_000)  # 10 MB: boto3 uploads it in parts
    storage.put_file("blobs/big", big)
    assert storage.get_bytes("a/b/c.json") == b'{"x": 1}'
    out = tmp_path / "out" / "big.bin"
    storage.get_file("blobs/big", out)
    assert out.read_bytes() == big.read_bytes()
    assert storage.exists("blobs/big") and not storage.exists("blobs/other")


def test_a_missing_object_is_object_missing_and_leaves_no_file(storage: Storage, tmp_path: Path) -> None:
    with pytest.raises(ObjectMissing):
        storage.get_bytes("nope")
    dest = tmp_path / "dest" / "file"
    with pytest.raises(ObjectMissing):
        storage.get_file("nope", dest)
    assert not dest.exists()
    assert not dest.parent.exists() or list(dest.parent.iterdir()) == []  # no temporary left behind


def test_keys_lists_a_prefix_and_delete_removes(storage: Storage) -> None:
    for key in ("t/1/a", "t/1/b/c", "t/2/a", "tx/a"):
        storage.put_bytes(key, key.encode())
    assert sorted(storage.keys("t/1")) == ["t/1/a", "t/1/b/c"]
    assert sorted(storage.keys("t")) == ["t/1/a", "t/1/b/c", "t/2/a"]  # a prefix is a folder, not a stem
    storage.delete(["t/1/a", "t/1/b/c", "never/was"])
    assert sorted(storage.keys("t")) == ["t/2/a"]
    assert list(storage.keys("empty")) == []


def test_listing_gives_each_object_its_size_and_last_write(storage: Storage) -> None:
    before = time.time()
    for key, data in (("t/1/a", b"x"), ("t/1/b/c", b"yyy"), ("tx/a", b"zz")):
        storage.put_bytes(key, data)
    listed = sorted(storage.listing("t"))
    assert [(item.key, item.size) for item in listed] == [("t/1/a", 1), ("t/1/b/c", 3)]
    for item in listed:  # the storage's clock, which may be a little off ours (S3 keeps whole seconds)
        assert before - 5 <= item.modified <= time.time() + 5
    assert sorted(item.key for item in storage.listing("")) == ["t/1/a", "t/1/b/c", "tx/a"]
    assert list(storage.listing("empty")) == []


def test_freshen_says_whether_an_object_is_there_and_moves_an_old_ones_time(
    storage: Storage, tmp_path: Path
) -> None:
    assert storage.freshen("blobs/none", 0) is False
    storage.put_bytes("blobs/a", b"abc")
    (first,) = storage.listing("blobs")
    assert storage.freshen("blobs/a", 3600) is True  # young enough: left as it is
    assert list(storage.listing("blobs")) == [first]
    if isinstance(storage, DirectoryStorage):
        os.utime(storage.root / "blobs/a", (first.modified - 86400, first.modified - 86400))
    else:
        time.sleep(1.1)  # S3 keeps whole seconds, and no call sets an object's time but a write
    (old,) = storage.listing("blobs")
    assert storage.freshen("blobs/a", 0.5) is True
    (fresh,) = storage.listing("blobs")
    assert fresh.modified > old.modified and fresh.size == 3
    assert storage.get_bytes("blobs/a") == b"abc"


def test_a_replaced_object_is_read_old_or_new_never_half(storage: Storage) -> None:
    old, new = b"o" * 300_000, b"n" * 300_000
    storage.put_bytes("k", old)
    seen: set[bytes] = set()
    stop = threading.Event()

    def read() -> None:
        while not stop.is_set():
            seen.add(storage.get_bytes("k"))

    reader = threading.Thread(target=read)
    reader.start()
    for _ in range(10):
        storage.put_bytes("k", new)
        storage.put_bytes("k", old)
    stop.set()
    reader.join()
    assert seen <= {old, new}


@pytest.mark.parametrize("key", ["", "/abs", "a/../b", "a//b", "./a", "a\\b"])
def test_unsafe_keys_are_refused(storage: Storage, key: str) -> None:
    with pytest.raises(ValueError, match="invalid storage key"):
        storage.put_bytes(key, b"x")


def test_ping_answers(storage: Storage) -> None:
    storage.ping()


def test_urls_choose_the_backend(tmp_path: Path) -> None:
    directory = open_storage((tmp_path / "d").as_uri())
    assert isinstance(directory, DirectoryStorage) and directory.root == tmp_path / "d"
    for bad in ("relative/path", "file://host/x", "s3://", "ftp://x/y", "file:relative"):
        with pytest.raises(StorageUrlError):
            open_storage(bad)
