"""The connectors (issue 27): a local or mounted folder, a git repository, an S3-compatible bucket,
and web pages (`web`).

Each is built from its configuration (`build`), which is checked first: a folder the API names must
be below a folder the operator allowed (`SLEUTH_CONNECTOR_FOLDERS`), a URL must pass the address
guard (`addresses.check_url`). Their listings are sorted, so a sync is deterministic.
"""

from __future__ import annotations

import fnmatch
import hashlib
import os
import shutil
import stat
import subprocess
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any

from sleuth.compile.connectors.addresses import AllowList, check_url
from sleuth.compile.connectors.base import Connector, ConnectorConfigError, ConnectorError, Item
from sleuth.settings import Settings

KINDS = ("folder", "git", "s3", "web")
#: One git command's longest wait: a clone of a large repository over a slow link is still bounded.
GIT_TIMEOUT_S = 300.0


def _included(path: str, include: tuple[str, ...]) -> bool:
    return not include or any(fnmatch.fnmatch(path, pattern) for pattern in include)


def _patterns(config: Mapping[str, Any]) -> tuple[str, ...]:
    include = config.get("include") or []
    if not isinstance(include, list) or not all(isinstance(p, str) and p for p in include):
        raise ConnectorConfigError("include: a list of glob patterns (`docs/**/*.md`)")
    return tuple(include)


# ----------------------------------------------------------------------------------------- folder
@dataclass
class FolderConnector:
    """Files below a folder of this machine (a mounted share included), polled: a file's size and
    modification time are its version, so an unchanged file is never read again.

    People may write to the folder while it is read, so every item is opened from the root one name at a
    time, relative to its parent, never following a link (`O_NOFOLLOW` at every level): a directory
    swapped for a link mid-sync leads nowhere. Sleuth's own home is never read, even from a folder above it
    (its `secret.key` opens every connector's credentials)."""

    root: Path
    include: tuple[str, ...] = ()
    home: Path | None = None
    kind: str = "folder"

    def _open_root(self) -> int:
        try:
            return os.open(self.root, _DIR_FLAGS)
        except OSError:
            raise ConnectorError(f"{self.root} is not a folder (unmounted, moved or removed?)") from None

    def _home_id(self) -> tuple[int, int] | None:
        try:
            found = os.stat(self.home) if self.home is not None else None
        except OSError:
            return None
        return None if found is None else (found.st_dev, found.st_ino)

    def items(self) -> Iterator[Item]:
        top = self._open_root()
        try:
            yield from self._walk(top, "", self._home_id())
        finally:
            os.close(top)

    def _walk(self, fd: int, prefix: str, home: tuple[int, int] | None) -> Iterator[Item]:
        with os.scandir(fd) as listing:
            names = sorted(entry.name for entry in listing)
        for name in names:
            if name.startswith("."):
                continue
            rel = f"{prefix}{name}"
            try:
                found = os.stat(name, dir_fd=fd, follow_symlinks=False)
            except OSError:
                continue  # gone meanwhile
            if stat.S_ISDIR(found.st_mode):
                if (found.st_dev, found.st_ino) == home:
                    continue
                try:
                    child = os.open(name, _DIR_FLAGS, dir_fd=fd)
                except OSError:
                    continue  # swapped for a link (or removed) since it was listed
                try:
                    yield from self._walk(child, rel + "/", home)
                finally:
                    os.close(child)
            elif stat.S_ISREG(found.st_mode) and _included(rel, self.include):
                yield Item(rel, f"{found.st_size}:{found.st_mtime_ns}", found.st_size, str(self.root / rel))

    def fetch(self, item: Item, max_bytes: int) -> bytes:
        parts = PurePosixPath(item.id).parts
        fd = self._open_root()
        try:
            for part in parts[:-1]:
                below = os.open(part, _DIR_FLAGS, dir_fd=fd)
                os.close(fd)
                fd = below
            handle = os.open(parts[-1], os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK, dir_fd=fd)
        except OSError:
            raise ConnectorError(f"{item.id}: no longer a plain file below {self.root}") from None
        finally:
            os.close(fd)
        with os.fdopen(handle, "rb") as file:
            found = os.fstat(file.fileno())
            if not stat.S_ISREG(found.st_mode):
                raise ConnectorError(f"{item.id}: no longer a plain file below {self.root}")
            data = file.read(max_bytes + 1)
        if len(data) > max_bytes:
            raise ConnectorError(f"{item.id}: over {max_bytes} bytes")
        return data


_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW


# -------------------------------------------------------------------------------------------- git
@dataclass
class GitConnector:
    """A branch or tag of a git repository, read with the git command line from a bare mirror kept in
    the context (`cache`): each sync fetches what is new, lists the tree of the ref, and a file's blob
    id is its version, so only changed blobs are read. The commit is recorded with every item."""

    url: str
    ref: str
    cache: Path
    include: tuple[str, ...] = ()
    kind: str = "git"
    commit: str = field(default="", init=False)

    def _git(self, *args: str, input_dir: bool = True) -> bytes:
        cwd = str(self.cache) if input_dir else None
        env = {**os.environ, "GIT_TERMINAL_PROMPT": "0", "GIT_ASKPASS": "true", "GIT_CONFIG_NOSYSTEM": "1"}
        try:
            done = subprocess.run(  # git with its arguments, never a shell
                ["git", *args], cwd=cwd, env=env, capture_output=True, timeout=GIT_TIMEOUT_S, check=False
            )
        except FileNotFoundError:
            raise ConnectorError("the git command is not installed on this machine") from None
        except subprocess.TimeoutExpired:
            raise ConnectorError(f"git {args[0]} took over {GIT_TIMEOUT_S:.0f} s") from None
        if done.returncode != 0:
            message = done.stderr.decode("utf-8", "replace").strip().splitlines()
            raise ConnectorError(f"git {args[0]}: {message[-1] if message else 'failed'}")
        return done.stdout

    def _update(self) -> None:
        if not (self.cache / "HEAD").is_file():
            shutil.rmtree(self.cache, ignore_errors=True)
            self.cache.parent.mkdir(parents=True, exist_ok=True)
            # No hooks, no submodules, no checkout: a bare mirror is data, never code that runs here.
            self._git(
                "clone",
                "--bare",
                "--quiet",
                "--no-recurse-submodules",
                "--",
                self.url,
                str(self.cache),
                input_dir=False,
            )
        self._git(
            "fetch",
            "--quiet",
            "--prune",
            "--force",
            "--",
            self.url,
            "+refs/heads/*:refs/heads/*",
            "+refs/tags/*:refs/tags/*",
        )

    def items(self) -> Iterator[Item]:
        self._update()
        try:
            self.commit = (
                self._git("rev-parse", "--verify", "--end-of-options", f"{self.ref}^{{commit}}")
                .decode()
                .strip()
            )
        except ConnectorError:
            raise ConnectorError(f"no branch or tag {self.ref!r} in {self.url}") from None
        listing = self._git("ls-tree", "-r", "-z", "--long", "--full-tree", self.commit)
        for entry in listing.split(b"\0"):
            if not entry:
                continue
            meta, _tab, raw_path = entry.partition(b"\t")
            mode, kind, blob, size = meta.split()
            path = raw_path.decode("utf-8", "replace")
            if kind != b"blob" or mode == b"120000" or not _included(path, self.include):
                continue  # submodules, trees and symbolic links are not files to read
            yield Item(path, blob.decode(), int(size), f"{self.commit}:{path}")

    def fetch(self, item: Item, max_bytes: int) -> bytes:
        if item.size is not None and item.size > max_bytes:
            raise ConnectorError(f"{item.id}: {item.size} bytes, over {max_bytes}")
        return self._git("cat-file", "blob", item.version)


# --------------------------------------------------------------------------------------------- s3
@dataclass
class S3Connector:
    """Objects below a prefix of an S3-compatible bucket, through boto3; the etag is the version."""

    bucket: str
    prefix: str
    client: Any
    include: tuple[str, ...] = ()
    kind: str = "s3"

    def items(self) -> Iterator[Item]:
        pages = self.client.get_paginator("list_objects_v2").paginate(Bucket=self.bucket, Prefix=self.prefix)
        for page in pages:
            for obj in page.get("Contents", []):
                key = str(obj["Key"])
                rel = key[len(self.prefix) :].lstrip("/")
                if not rel or key.endswith("/") or not _included(rel, self.include):
                    continue
                yield Item(rel, str(obj["ETag"]).strip('"'), int(obj["Size"]), f"s3://{self.bucket}/{key}")

    def fetch(self, item: Item, max_bytes: int) -> bytes:
        if item.size is not None and item.size > max_bytes:
            raise ConnectorError(f"{item.id}: {item.size} bytes, over {max_bytes}")
        key = f"{self.prefix.rstrip('/')}/{item.id}" if self.prefix else item.id
        body = self.client.get_object(Bucket=self.bucket, Key=key)["Body"]
        data: bytes = body.read(max_bytes + 1)
        if len(data) > max_bytes:
            raise ConnectorError(f"{item.id}: over {max_bytes} bytes")
        return data


# ------------------------------------------------------------------------------------------ build
def _text(config: Mapping[str, Any], key: str, default: str | None = None) -> str:
    value = config.get(key, default)
    if not isinstance(value, str) or not value.strip():
        raise ConnectorConfigError(f"{key}: required, a non-empty string")
    return value.strip()


def build(
    kind: str,
    config: Mapping[str, Any],
    secret: Mapping[str, str],
    settings: Settings,
    workdir: Path,
    *,
    any_folder: bool = False,
    adding: bool = False,
    home: Path | None = None,
) -> Connector:
    """The connector `kind` with `config` (and its `secret`: credentials, never in `config`), checked
    against the operator's settings. `workdir` is where it may keep a cache (a git mirror);
    `any_folder` lifts the folder allow list (the CLI, run by the machine's own user). `adding`: the
    connector is being added, so a folder must be there now (a sync of one that went away later
    fails that sync, as an unmounted share does). `home`: Sleuth's home, which a folder never reads."""
    allow = AllowList.parse(settings.connector_allow)
    include = _patterns(config)
    if kind == "folder":
        root = Path(_text(config, "path")).expanduser()
        if not root.is_absolute():
            raise ConnectorConfigError("path: an absolute path")
        root = root.resolve()
        allowed = [Path(p.strip()).resolve() for p in settings.connector_folders.split(",") if p.strip()]
        if not any_folder and not any(root == a or a in root.parents for a in allowed):
            raise ConnectorError(
                f"{root} is not below a folder SLEUTH_CONNECTOR_FOLDERS allows (the operator lists the "
                "folders the server may read)"
            )
        # only after the allow list: what exists outside the allowed folders is not for a client to learn
        if adding and not root.is_dir():
            raise ConnectorConfigError(
                f"path: {root} is not a folder" if root.exists() else f"path: there is no folder {root}"
            )
        if home is not None and (root == home.resolve() or home.resolve() in root.parents):
            raise ConnectorError(f"{root} is inside Sleuth's home: its files are not a source")
        return FolderConnector(root, include, home)
    if kind == "git":
        url = _text(config, "url")
        check_url(url, allow, schemes=("https", "http", "file"))
        ref = _text(config, "ref", "main")
        if ref.startswith("-"):
            raise ConnectorConfigError("ref: a branch or tag name")
        mirror = workdir / hashlib.sha256(url.encode()).hexdigest()[:16]
        return GitConnector(url, ref, mirror, include)
    if kind == "s3":
        bucket = _text(config, "bucket")
        prefix = str(config.get("prefix") or "").lstrip("/")
        endpoint = config.get("endpoint_url")
        if endpoint is not None:
            check_url(_text(config, "endpoint_url"), allow)
        try:
            import boto3
        except ImportError:
            raise ConnectorError("s3 connectors need boto3: pip install 'sleuth[s3]'") from None
        client = boto3.client(
            "s3",
            endpoint_url=endpoint,
            region_name=str(config.get("region") or "us-east-1"),
            aws_access_key_id=secret.get("access_key_id"),
            aws_secret_access_key=secret.get("secret_access_key"),
        )
        return S3Connector(bucket, prefix, client, include)
    if kind == "web":
        return _web(config, allow, settings)
    raise ConnectorConfigError(f"kind: {kind!r} is not a connector here; one of {', '.join(KINDS)}")


def _web(config: Mapping[str, Any], allow: AllowList, settings: Settings) -> Connector:
    from sleuth.compile.connectors.web import WebConnector

    urls = config.get("urls") or []
    sitemap = config.get("sitemap")
    if not isinstance(urls, list) or not all(isinstance(u, str) for u in urls) or len(urls) > 1000:
        raise ConnectorConfigError("urls: a list of up to 1,000 page URLs")
    if not urls and not sitemap:
        raise ConnectorConfigError("urls or sitemap: where the pages are")
    prefix = config.get("prefix")
    for url in [*urls, *([sitemap] if sitemap else []), *([prefix] if prefix else [])]:
        check_url(str(url), allow)
    max_pages = config.get("max_pages", 200)
    delay = config.get("delay_s", 1.0)
    if not isinstance(max_pages, int) or not 1 <= max_pages <= settings.connector_max_items:
        raise ConnectorConfigError(f"max_pages: 1 to {settings.connector_max_items}")
    if not isinstance(delay, int | float) or not 0 <= delay <= 60:
        raise ConnectorConfigError("delay_s: 0 to 60 seconds between requests to one host")
    return WebConnector(
        list(urls), allow, str(sitemap) if sitemap else None, str(prefix) if prefix else None, max_pages,
        float(delay), settings.max_file_bytes,
    )  # fmt: skip
