"""The connectors (issue 27): a local or mounted folder, a git repository, an S3-compatible bucket,
and web pages (`web`).

Each is built from its configuration (`build`), which is checked first: a folder the API names must
be below a folder the operator allowed (`SLEUTH_CONNECTOR_FOLDERS`), a URL must pass the address
guard (`addresses.check_url`). Their listings are sorted, so a sync is deterministic.
"""

from __future__ import annotations

import fnmatch
import hashlib
import ipaddress
import os
import shutil
import signal
import stat
import subprocess
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any
from urllib.parse import urlsplit

from sleuth.compile.connectors.addresses import AllowList, check_url
from sleuth.compile.connectors.base import Budget, Connector, ConnectorConfigError, ConnectorError, Item
from sleuth.compile.sources import shown
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
    named: str = ""  # the folder as its connector names it: what messages say, never the resolved `root`

    @property
    def _said(self) -> str:
        return self.named or shown(str(self.root))

    def _open_root(self) -> int:
        try:
            return os.open(self.root, _DIR_FLAGS)
        except OSError:
            raise ConnectorError(f"{self._said} is not a folder (unmounted, moved or removed?)") from None

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
            raise ConnectorError(f"{item.id}: no longer a plain file below {self._said}") from None
        finally:
            os.close(fd)
        with os.fdopen(handle, "rb") as file:
            found = os.fstat(file.fileno())
            if not stat.S_ISREG(found.st_mode):
                raise ConnectorError(f"{item.id}: no longer a plain file below {self._said}")
            data = file.read(max_bytes + 1)
        if len(data) > max_bytes:
            raise ConnectorError(f"{item.id}: over {max_bytes} bytes")
        return data


_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW


# -------------------------------------------------------------------------------------------- git
#: How often a running git command's mirror is measured against the sync's byte budget.
GIT_POLL_S = 0.2
#: Where the one ref a git connector reads is kept in its mirror.
GIT_REF = "refs/sleuth/ref"
#: What of the server's environment a git command keeps among `GIT_*` (a certificate authority the
#: operator named); the rest (`GIT_CONFIG_PARAMETERS`, `GIT_SSL_NO_VERIFY`, `GIT_DIR`…) would change
#: what git does behind the connector's back.
GIT_ENV_KEPT = frozenset({"GIT_SSL_CAINFO", "GIT_SSL_CAPATH"})
#: What a branch or tag name given as `ref` never holds: it is the source side of a refspec.
_NOT_IN_REF = frozenset(":^~?*[\\ \t\n\0")


class GitMirrorTooLarge(ConnectorError):
    """A git mirror grew past the sync's byte budget (`SLEUTH_CONNECTOR_MAX_BYTES`) on this disk."""


def _disk_bytes(root: Path) -> int:
    """Bytes of the files below `root`, links not followed: what a mirror holds on this disk now."""
    total = 0
    for folder, _dirs, files in os.walk(root):
        for name in files:
            try:
                total += os.lstat(os.path.join(folder, name)).st_size
            except OSError:
                continue  # a temporary pack git renamed or removed meanwhile
    return total


@dataclass
class GitConnector:
    """A branch or tag of a git repository, read with the git command line from a bare mirror kept in
    the context (`cache`): each sync fetches what is new, lists the tree of the ref, and a file's blob
    id is its version, so only changed blobs are read. The commit is recorded with every item.

    The server is hostile (issue 40, items 5 and 9). Git reaches only the address the guard checked
    (`address`, pinned with curl's resolve list: git never resolves the name again), follows no
    redirect, speaks only the URL's own protocol, and reads no configuration or credential helper of
    this machine. The mirror is a partial, shallow clone of the one ref: its newest commit alone, no
    tags, no blob over the file limit (`max_file_bytes`); a running git is stopped, and the mirror
    removed, once the mirror passes the sync's byte budget (`max_bytes`) on disk. Every git command,
    the lazy fetch of a missing blob included, runs under the same options."""

    url: str
    ref: str
    cache: Path
    include: tuple[str, ...] = ()
    kind: str = "git"
    commit: str = field(default="", init=False)
    address: str | None = None  # the address `check_url` checked (None: a file:// URL or a literal IP)
    max_bytes: int = 2 * 1024**3  # the mirror on disk, at every moment (SLEUTH_CONNECTOR_MAX_BYTES)
    max_file_bytes: int = 250 * 1024**2  # larger blobs are never downloaded (SLEUTH_MAX_FILE_BYTES)
    #: The sync's deadline and stop request (`sync` sets it): a running git is stopped as soon as the
    #: sync's task is cancelled or its time is up, not only after `GIT_TIMEOUT_S`.
    budget: Budget | None = None

    def _scheme(self) -> str:
        return urlsplit(self.url).scheme.casefold()

    def _filter(self) -> str:
        """The partial clone's filter: blobs of at least `max_file_bytes + 1` bytes stay on the server."""
        return f"blob:limit={self.max_file_bytes + 1}"

    def _options(self) -> list[str]:
        """`-c` options for every git command; git hands them to the commands it starts (the lazy
        fetch of a missing blob, the HTTP helper) through its environment."""
        scheme = self._scheme()
        config = [
            "http.followRedirects=false",  # a redirect would leave the checked address
            "protocol.allow=never",
            f"protocol.{scheme}.allow=always",
            "credential.helper=",  # the machine's credentials are not the connector's
            "http.emptyAuth=false",
            "core.hooksPath=/dev/null",
            "gc.auto=0",  # no git left running in the background after a sync
            "maintenance.auto=false",
            "fetch.recurseSubmodules=false",
            "submodule.recurse=false",
        ]
        parts = urlsplit(self.url)
        if self.address is not None and parts.hostname and not _literal_ip(parts.hostname):
            port = parts.port or (443 if scheme == "https" else 80)
            pinned = f"[{self.address}]" if ":" in self.address else self.address
            config.append(f"http.curloptResolve={parts.hostname}:{port}:{pinned}")
        return [arg for option in config for arg in ("-c", option)]

    def _env(self) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_") or k in GIT_ENV_KEPT}
        env.update(
            GIT_TERMINAL_PROMPT="0",
            GIT_ASKPASS="true",
            GIT_CONFIG_NOSYSTEM="1",
            GIT_CONFIG_GLOBAL=os.devnull,
            GIT_ALLOW_PROTOCOL=self._scheme(),  # by name: submodules and lazy fetches included
            GIT_PROTOCOL_FROM_USER="0",
        )
        return env

    def _git(self, *args: str, input_dir: bool = True) -> bytes:
        """Run git (never a shell) in the mirror; measured against the byte budget while it runs and
        stopped, with whatever it started, once the mirror passes it (`GitMirrorTooLarge`)."""
        cwd = str(self.cache) if input_dir else None
        try:
            running = subprocess.Popen(
                ["git", *self._options(), *args],
                cwd=cwd,
                env=self._env(),
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                start_new_session=True,  # its own process group: stopped as one
            )
        except FileNotFoundError:
            raise ConnectorError("the git command is not installed on this machine") from None
        deadline = time.monotonic() + GIT_TIMEOUT_S
        while True:
            try:
                out, err = running.communicate(timeout=GIT_POLL_S)
                break
            except subprocess.TimeoutExpired:
                if time.monotonic() > deadline:
                    _stop(running)
                    raise ConnectorError(f"git {args[0]} took over {GIT_TIMEOUT_S:.0f} s") from None
                if self.budget is not None:
                    try:
                        self.budget.check()
                    except BaseException:
                        _stop(running)
                        raise
                if self.cache.is_dir() and _disk_bytes(self.cache) > self.max_bytes:
                    _stop(running)
                    raise self._too_large() from None
        if running.returncode != 0:
            message = err.decode("utf-8", "replace").strip().splitlines()
            raise ConnectorError(f"git {args[0]}: {message[-1] if message else 'failed'}")
        return out

    def _too_large(self) -> GitMirrorTooLarge:
        return GitMirrorTooLarge(
            f"the git mirror of {self.ref!r} passed {self.max_bytes} bytes (SLEUTH_CONNECTOR_MAX_BYTES)"
        )

    def _current(self) -> bool:
        """Whether the mirror there is one this connector made: the same URL and blob filter."""
        if not (self.cache / "HEAD").is_file():
            return False
        try:
            listed = self._git("config", "--local", "--list").decode("utf-8", "replace").splitlines()
        except ConnectorError:
            return False
        config = dict(line.partition("=")[::2] for line in listed)
        return (
            config.get("remote.origin.url") == self.url
            and config.get("remote.origin.partialclonefilter") == self._filter()
            and config.get("extensions.partialclone") == "origin"
        )

    def _create(self) -> None:
        """An empty bare mirror whose remote is a promisor (a partial clone), with no hooks or
        templates: a mirror is data, never code that runs here."""
        shutil.rmtree(self.cache, ignore_errors=True)
        self.cache.parent.mkdir(parents=True, exist_ok=True)
        self._git("init", "--quiet", "--bare", "--template=", "--", str(self.cache), input_dir=False)
        for key, value in (
            ("core.repositoryformatversion", "1"),
            ("extensions.partialClone", "origin"),
            ("remote.origin.url", self.url),
            ("remote.origin.promisor", "true"),
            ("remote.origin.partialclonefilter", self._filter()),
        ):
            self._git("config", key, value)

    def _fetch(self) -> None:
        """The ref's newest commit alone (shallow), its trees and the blobs under the file limit."""
        try:
            self._git(
                "fetch",
                "--quiet",
                "--no-tags",
                "--no-write-fetch-head",
                "--recurse-submodules=no",
                "--depth=1",
                f"--filter={self._filter()}",
                "--",
                "origin",
                f"+{self.ref}:{GIT_REF}",
            )
        except GitMirrorTooLarge:
            raise
        except ConnectorError as exc:
            if "couldn't find remote ref" in str(exc):
                raise ConnectorError(f"no branch or tag {self.ref!r} in {self.url}") from None
            raise
        if _disk_bytes(self.cache) > self.max_bytes:
            raise self._too_large()

    def _update(self) -> None:
        """Fetch what is new into the mirror. A mirror past the budget is begun again from the ref
        alone (older commits' blobs stay in it otherwise); one that is still past it is removed."""
        kept = self._current()
        for fresh in (False, True) if kept else (True,):
            if fresh:
                self._create()
            try:
                self._fetch()
                return
            except GitMirrorTooLarge:
                if fresh:
                    shutil.rmtree(self.cache, ignore_errors=True)
                    raise

    def items(self) -> Iterator[Item]:
        self._update()
        self.commit = (
            self._git("rev-parse", "--verify", "--end-of-options", f"{GIT_REF}^{{commit}}").decode().strip()
        )
        # Sizes from the objects here, never `ls-tree --long`: that would fetch every missing blob.
        present: dict[str, int] = {}
        every = self._git(
            "cat-file", "--batch-all-objects", "--batch-check=%(objectname) %(objecttype) %(objectsize)"
        )
        for line in every.decode().splitlines():
            oid, kind, shown_size = line.split()
            if kind == "blob":
                present[oid] = int(shown_size)
        listing = self._git("ls-tree", "-r", "-z", "--full-tree", self.commit)
        for entry in listing.split(b"\0"):
            if not entry:
                continue
            meta, _tab, raw_path = entry.partition(b"\t")
            mode, kind, blob = meta.decode().split()
            path = raw_path.decode("utf-8", "replace")
            if kind != "blob" or mode == "120000" or not _included(path, self.include):
                continue  # submodules, trees and symbolic links are not files to read
            # a blob the filter left on the server is over the file limit: its size is at least that
            size = present.get(blob, self.max_file_bytes + 1)
            yield Item(path, blob, size, f"{self.commit}:{path}")

    def fetch(self, item: Item, max_bytes: int) -> bytes:
        if item.size is not None and item.size > max_bytes:
            raise ConnectorError(f"{item.id}: {item.size} bytes, over {max_bytes}")
        data = self._git("cat-file", "blob", item.version)  # a missing blob: fetched under the same options
        if len(data) > max_bytes:
            raise ConnectorError(f"{item.id}: {len(data)} bytes, over {max_bytes}")
        return data


def _literal_ip(host: str) -> bool:
    try:
        ipaddress.ip_address(host)
    except ValueError:
        return False
    return True


def _stop(running: subprocess.Popen[bytes]) -> None:
    """Stop a git command and what it started (the HTTP helper, index-pack), then reap it."""
    with suppress(ProcessLookupError):
        os.killpg(running.pid, signal.SIGKILL)
    running.communicate()


# --------------------------------------------------------------------------------------------- s3
@dataclass
class S3Connector:
    """Objects below a prefix of an S3-compatible bucket, through boto3; the etag is the version.

    An item's id is its key below the prefix as the bucket spells it: a key no path can hold
    (`prefix//name`, `../name`) keeps an id the sync refuses, so that item is skipped with its reason
    instead of failing the sync. Each item is fetched by the key it was listed under (`_keys`), never a
    key rebuilt from its id, which `//` would not survive. The client library's errors (a bucket that is
    not there, a refusal) are this connector's errors, with the bucket's own words."""

    bucket: str
    prefix: str
    client: Any
    include: tuple[str, ...] = ()
    kind: str = "s3"
    _keys: dict[str, str] = field(default_factory=dict, init=False, repr=False)

    def _below_prefix(self, key: str) -> str:
        rel = key[len(self.prefix) :]
        if self.prefix and not self.prefix.endswith("/") and rel.startswith("/"):
            rel = rel[1:]  # prefix `docs` names the folder `docs/`
        return rel

    def items(self) -> Iterator[Item]:
        self._keys.clear()
        pages = self.client.get_paginator("list_objects_v2").paginate(Bucket=self.bucket, Prefix=self.prefix)
        with _s3_errors(f"listing s3://{self.bucket}/{self.prefix}"):
            for page in pages:
                for obj in page.get("Contents", []):
                    key = str(obj["Key"])
                    rel = self._below_prefix(key)
                    if not rel or key.endswith("/") or not _included(rel, self.include):
                        continue
                    self._keys[rel] = key
                    yield Item(
                        rel, str(obj["ETag"]).strip('"'), int(obj["Size"]), f"s3://{self.bucket}/{key}"
                    )

    def fetch(self, item: Item, max_bytes: int) -> bytes:
        if item.size is not None and item.size > max_bytes:
            raise ConnectorError(f"{item.id}: {item.size} bytes, over {max_bytes}")
        key = self._keys.get(item.id)
        if key is None:
            raise ConnectorError(f"{item.id}: not listed by this sync")
        with _s3_errors(f"reading s3://{self.bucket}/{key}"):
            body = self.client.get_object(Bucket=self.bucket, Key=key)["Body"]
            data: bytes = body.read(max_bytes + 1)
        if len(data) > max_bytes:
            raise ConnectorError(f"{item.id}: over {max_bytes} bytes")
        return data


@contextmanager
def _s3_errors(doing: str) -> Iterator[None]:
    """boto3's errors as `ConnectorError`: what the bucket said (`AccessDenied`, `NoSuchBucket`), or
    that it could not be reached."""
    from botocore.exceptions import BotoCoreError, ClientError

    try:
        yield
    except ClientError as exc:
        error = exc.response.get("Error", {})
        code = error.get("Code") or exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode")
        raise ConnectorError(f"{doing}: {code}: {error.get('Message') or 'refused'}") from None
    except BotoCoreError as exc:
        raise ConnectorError(f"{doing}: {exc}") from None


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
    `any_folder`: the CLI, run by the machine's own user, which lifts the folder allow list and signs
    an S3 connector without keys with the user's own AWS credentials. `adding`: the
    connector is being added, so a folder must be there now (a sync of one that went away later
    fails that sync, as an unmounted share does). `home`: Sleuth's home, which a folder never reads."""
    allow = AllowList.parse(settings.connector_allow)
    include = _patterns(config)
    if kind == "folder":
        # Every message names the folder as the client gave it: the resolved path (links followed, `~`
        # expanded) would tell the client how this machine is laid out.
        given = _text(config, "path")
        said = given if given.isprintable() and len(given) <= 400 else shown(given, 400)
        root = Path(given).expanduser()
        if not root.is_absolute():
            raise ConnectorConfigError("path: an absolute path")
        root = root.resolve()
        allowed = [Path(p.strip()).resolve() for p in settings.connector_folders.split(",") if p.strip()]
        if not any_folder and not any(root == a or a in root.parents for a in allowed):
            raise ConnectorError(
                f"{said} is not below a folder SLEUTH_CONNECTOR_FOLDERS allows (the operator lists the "
                "folders the server may read)"
            )
        # only after the allow list: what exists outside the allowed folders is not for a client to learn
        if adding and not root.is_dir():
            raise ConnectorConfigError(
                f"path: {said} is not a folder" if root.exists() else f"path: there is no folder {said}"
            )
        if home is not None and (root == home.resolve() or home.resolve() in root.parents):
            raise ConnectorError(f"{said} is inside Sleuth's home: its files are not a source")
        return FolderConnector(root, include, home, named=said)
    if kind == "git":
        url = _text(config, "url")
        address = check_url(url, allow, schemes=("https", "http", "file"))
        ref = _text(config, "ref", "main")
        if ref.startswith(("-", "+", "/")) or ".." in ref or any(c in ref for c in _NOT_IN_REF):
            raise ConnectorConfigError("ref: a branch or tag name")
        # One mirror per URL: a mirror an older Sleuth made (full history) is replaced at its next sync.
        mirror = workdir / hashlib.sha256(url.encode()).hexdigest()[:16]
        return GitConnector(
            url,
            ref,
            mirror,
            include,
            address=None if address is None else str(address),
            max_bytes=settings.connector_max_bytes,
            max_file_bytes=settings.max_file_bytes,
        )
    if kind == "s3":
        bucket = _text(config, "bucket")
        prefix = str(config.get("prefix") or "").lstrip("/")
        endpoint = config.get("endpoint_url")
        if endpoint is not None:
            check_url(_text(config, "endpoint_url"), allow)
        chain = settings.connector_s3_instance_credentials or any_folder  # the CLI: the user's own keys
        return S3Connector(bucket, prefix, _s3_client(config, secret, endpoint, chain), include)
    if kind == "web":
        return _web(config, allow, settings)
    raise ConnectorConfigError(f"kind: {kind!r} is not a connector here; one of {', '.join(KINDS)}")


def _s3_client(config: Mapping[str, Any], secret: Mapping[str, str], endpoint: Any, chain: bool) -> Any:
    """A boto3 client that signs with the connector's own keys, and with nothing else: without them its
    requests are unsigned (public buckets only), since boto3's own chain would sign with whatever this
    machine holds (the environment, ~/.aws, the instance role: with shared storage on S3, the keys of
    the bucket that holds every context). `chain`: the operator allowed that chain
    (`SLEUTH_CONNECTOR_S3_INSTANCE_CREDENTIALS`), or the CLI runs as the machine's own user. Only the
    endpoint the connector names is used, never one from the environment (`AWS_ENDPOINT_URL`)."""
    try:
        import boto3
        from botocore import UNSIGNED
        from botocore.config import Config
    except ImportError:
        raise ConnectorError("s3 connectors need boto3: pip install 'sleuth[s3]'") from None
    key_id, key = secret.get("access_key_id") or None, secret.get("secret_access_key") or None
    if (key_id is None) != (key is None):
        raise ConnectorConfigError("secret: both access_key_id and secret_access_key, or neither")
    options: dict[str, Any] = {"ignore_configured_endpoint_urls": True}
    if key_id is None and not chain:
        options["signature_version"] = UNSIGNED
    return boto3.client(
        "s3",
        endpoint_url=endpoint,
        region_name=str(config.get("region") or "us-east-1"),
        aws_access_key_id=key_id,
        aws_secret_access_key=key,
        aws_session_token=(secret.get("session_token") or None) if key_id else None,
        config=Config(**options),
    )


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
