"""Where files live that every machine of a deployment shares (docs/deploy.md): a directory
(`file:///…`, e.g. an NFS, EFS or RWX volume) or S3-compatible object storage (`s3://bucket/prefix`).

A port of whole-object operations and nothing more, so the two backends cannot drift: no append, no
rename, no partial read. Every object is written under its final key in one atomic step (a rename in a
directory, one PUT or one completed multipart upload in S3), so a reader sees an object whole or not at
all; `replica.Replica` builds immutable, content-addressed trees on top of it.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import time
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any, NamedTuple, Protocol
from urllib.parse import unquote, urlsplit

from sleuth.errors import Invalid, NotFound
from sleuth.store.files import atomic_file


class StorageUrlError(Invalid, ValueError):
    """`SLEUTH_STORAGE_URL` names something other than a directory or an S3 bucket."""


class ObjectMissing(NotFound, KeyError):
    """No object under that key."""


class Listed(NamedTuple):
    """One object of a listing: its key, its size in bytes, and when it was last written (seconds since
    the epoch, by the storage's clock)."""

    key: str
    size: int
    modified: float


class Storage(Protocol):
    """Objects by key (`a/b/c`, no `..`, no leading `/`)."""

    url: str

    def put_file(self, key: str, path: Path) -> None: ...
    def put_bytes(self, key: str, data: bytes) -> None: ...
    def get_file(self, key: str, dest: Path) -> None:
        """Write the object to `dest` atomically; `ObjectMissing` when there is none."""
        ...

    def get_bytes(self, key: str) -> bytes: ...
    def exists(self, key: str) -> bool: ...
    def delete(self, keys: Iterable[str]) -> None: ...
    def keys(self, prefix: str) -> Iterator[str]: ...
    def listing(self, prefix: str) -> Iterator[Listed]:
        """`keys(prefix)` with each object's size and last write: what `storage gc` needs to spare what
        is younger than its grace."""
        ...

    def freshen(self, key: str, older_than_s: float) -> bool:
        """Whether the object is there; if it was last written more than `older_than_s` ago, its last
        write becomes now. A publish that reuses a blob freshens it, so the blob is then as young as
        one it uploads, and `storage gc` spares both for its grace."""
        ...

    def ping(self) -> None:
        """Raise when the storage cannot be reached (readiness)."""
        ...


def check_key(key: str) -> str:
    parts = key.split("/")
    if not key or key.startswith("/") or any(p in ("", ".", "..") for p in parts) or "\\" in key:
        raise ValueError(f"invalid storage key {key!r}")
    return key


class DirectoryStorage:
    """Objects as files under `root`: written to a temporary name beside the target and renamed, which
    is atomic on a local disk and on NFS (the rename happens on the server)."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.url = root.as_uri()
        root.mkdir(parents=True, exist_ok=True)

    def _path(self, key: str) -> Path:
        return self.root / check_key(key)

    def put_file(self, key: str, path: Path) -> None:
        with path.open("rb") as src, atomic_file(self._path(key)) as dest:
            shutil.copyfileobj(src, dest, 1024 * 1024)

    def put_bytes(self, key: str, data: bytes) -> None:
        with atomic_file(self._path(key)) as dest:
            dest.write(data)

    def get_file(self, key: str, dest: Path) -> None:
        try:
            src = self._path(key).open("rb")
        except FileNotFoundError:
            raise ObjectMissing(key) from None
        with src, atomic_file(dest) as out:
            shutil.copyfileobj(src, out, 1024 * 1024)

    def get_bytes(self, key: str) -> bytes:
        try:
            return self._path(key).read_bytes()
        except FileNotFoundError:
            raise ObjectMissing(key) from None

    def exists(self, key: str) -> bool:
        return self._path(key).is_file()

    def delete(self, keys: Iterable[str]) -> None:
        for key in keys:
            self._path(key).unlink(missing_ok=True)

    def _files(self, prefix: str) -> Iterator[Path]:
        base = self.root / prefix.rstrip("/") if prefix else self.root
        if not base.is_dir():
            return
        for dirpath, _dirs, files in os.walk(base):
            for name in sorted(files):
                if not name.startswith("."):  # a write in progress
                    yield Path(dirpath) / name

    def keys(self, prefix: str) -> Iterator[str]:
        for path in self._files(prefix):
            yield path.relative_to(self.root).as_posix()

    def listing(self, prefix: str) -> Iterator[Listed]:
        for path in self._files(prefix):
            try:
                st = path.stat()
            except FileNotFoundError:  # deleted since it was listed
                continue
            yield Listed(path.relative_to(self.root).as_posix(), st.st_size, st.st_mtime)

    def freshen(self, key: str, older_than_s: float) -> bool:
        path = self._path(key)
        try:
            if time.time() - path.stat().st_mtime <= older_than_s:
                return True
            os.utime(path)
        except FileNotFoundError:
            return False
        except PermissionError:  # another uid's file (only its owner may set its time): rewrite it
            self.put_file(key, path)
        return True

    def ping(self) -> None:
        if not self.root.is_dir():
            raise OSError(f"storage directory {self.root} is not there")
        with tempfile.NamedTemporaryFile(dir=self.root, prefix=".ping-"):
            pass


#: Seconds an S3 call waits to connect, and for each read, and how many times it is made in all.
STORAGE_TIMEOUT_S = 10.0
STORAGE_ATTEMPTS = 3


class S3Storage:
    """Objects in an S3-compatible bucket through boto3, the field's client: uploads and downloads go
    through its transfer manager (multipart for large files, retries). The endpoint and credentials come
    from boto3's own configuration (`AWS_ENDPOINT_URL`, `AWS_ACCESS_KEY_ID`, a profile, an instance role)."""

    def __init__(self, bucket: str, prefix: str = "", client: Any = None) -> None:
        if client is None:
            try:
                import boto3
            except ImportError:  # pragma: no cover - the extra is installed with dev
                raise StorageUrlError("s3:// storage needs boto3: pip install 'sleuth[s3]'") from None
            from botocore.config import Config

            # A hung endpoint fails a call in about a minute, not the default's minutes of retries.
            timeouts = Config(
                connect_timeout=STORAGE_TIMEOUT_S,
                read_timeout=STORAGE_TIMEOUT_S,
                retries={"max_attempts": STORAGE_ATTEMPTS, "mode": "standard"},
            )
            client = boto3.client("s3", config=timeouts)
        self.client = client
        self.bucket = bucket
        self.prefix = prefix.strip("/")
        self.url = f"s3://{bucket}/{self.prefix}" if self.prefix else f"s3://{bucket}"

    def _key(self, key: str) -> str:
        check_key(key)
        return f"{self.prefix}/{key}" if self.prefix else key

    @staticmethod
    def _missing(exc: Exception) -> bool:
        code = str((getattr(exc, "response", None) or {}).get("Error", {}).get("Code", ""))
        return code in ("404", "NoSuchKey", "NotFound")

    def put_file(self, key: str, path: Path) -> None:
        self.client.upload_file(str(path), self.bucket, self._key(key))

    def put_bytes(self, key: str, data: bytes) -> None:
        self.client.put_object(Bucket=self.bucket, Key=self._key(key), Body=data)

    def get_file(self, key: str, dest: Path) -> None:
        dest.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{dest.name}.", dir=dest.parent)
        os.close(fd)
        try:
            self.client.download_file(self.bucket, self._key(key), tmp)
            os.chmod(tmp, 0o644)
            os.replace(tmp, dest)
        except Exception as exc:
            Path(tmp).unlink(missing_ok=True)
            if self._missing(exc):
                raise ObjectMissing(key) from None
            raise

    def get_bytes(self, key: str) -> bytes:
        try:
            reply = self.client.get_object(Bucket=self.bucket, Key=self._key(key))
        except Exception as exc:
            if self._missing(exc):
                raise ObjectMissing(key) from None
            raise
        data: bytes = reply["Body"].read()
        return data

    def exists(self, key: str) -> bool:
        try:
            self.client.head_object(Bucket=self.bucket, Key=self._key(key))
        except Exception as exc:
            if self._missing(exc):
                return False
            raise
        return True

    def delete(self, keys: Iterable[str]) -> None:
        batch = [{"Key": self._key(k)} for k in keys]
        for begin in range(0, len(batch), 1000):  # the API's limit per request
            reply = self.client.delete_objects(
                Bucket=self.bucket, Delete={"Objects": batch[begin : begin + 1000]}
            )
            if reply.get("Errors"):  # per key: a missing permission is not an exception
                first = reply["Errors"][0]
                raise OSError(
                    f"could not delete {first.get('Key')}: {first.get('Code')} {first.get('Message')}"
                )

    def keys(self, prefix: str) -> Iterator[str]:
        for item in self.listing(prefix):
            yield item.key

    def listing(self, prefix: str) -> Iterator[Listed]:
        full = self._key(prefix.rstrip("/")) + "/" if prefix else (f"{self.prefix}/" if self.prefix else "")
        skip = len(self.prefix) + 1 if self.prefix else 0
        for page in self.client.get_paginator("list_objects_v2").paginate(Bucket=self.bucket, Prefix=full):
            for item in page.get("Contents", []):
                yield Listed(str(item["Key"])[skip:], int(item["Size"]), item["LastModified"].timestamp())

    def freshen(self, key: str, older_than_s: float) -> bool:
        full = self._key(key)
        try:
            head = self.client.head_object(Bucket=self.bucket, Key=full)
            if time.time() - head["LastModified"].timestamp() > older_than_s:
                # A copy onto itself is S3's only way to move an object's time (server-side, in parts
                # for a large one); it must change something, so its metadata is "replaced" as it was.
                source = {"Bucket": self.bucket, "Key": full}
                self.client.copy(source, self.bucket, full, ExtraArgs={"MetadataDirective": "REPLACE"})
        except Exception as exc:
            if self._missing(exc):
                return False
            raise
        return True

    def ping(self) -> None:
        self.client.head_bucket(Bucket=self.bucket)


def open_storage(url: str) -> DirectoryStorage | S3Storage:
    """The storage `url` names: `file:///absolute/path` or `s3://bucket[/prefix]`."""
    parts = urlsplit(url)
    if parts.scheme == "file":
        if parts.netloc not in ("", "localhost") or not parts.path.startswith("/"):
            raise StorageUrlError(f"a file:// storage URL needs an absolute path: {url!r}")
        return DirectoryStorage(Path(unquote(parts.path)))
    if parts.scheme == "s3":
        if not parts.netloc:
            raise StorageUrlError(f"an s3:// storage URL needs a bucket: {url!r}")
        return S3Storage(parts.netloc, unquote(parts.path))
    raise StorageUrlError(f"SLEUTH_STORAGE_URL must start with file:/// or s3://, not {url!r}")
