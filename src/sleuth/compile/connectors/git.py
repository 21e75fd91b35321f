"""The git connector: a branch or tag of a git repository, read with the git command line from a bare,
shallow, partial mirror kept in the context. The server is hostile (issue 40, items 5 and 9): git
reaches only the checked address, reads no configuration or credential of this machine, and its
mirror is bounded on disk by the sync's byte budget.
"""

from __future__ import annotations

import ipaddress
import os
import shutil
import signal
import subprocess
import time
from collections.abc import Iterator
from contextlib import suppress
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit

from sleuth.compile.connectors.base import Budget, ConnectorConfigError, ConnectorError, Item, included

#: One git command's longest wait: a clone of a large repository over a slow link is still bounded.
GIT_TIMEOUT_S = 300.0
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


def check_ref(ref: str) -> str:
    """`ref` when it is a branch or tag name (the source side of a refspec); `ConnectorConfigError`
    for anything else (an option, a range, a pattern)."""
    if ref.startswith(("-", "+", "/")) or ".." in ref or any(c in ref for c in _NOT_IN_REF):
        raise ConnectorConfigError("ref: a branch or tag name")
    return ref


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
            if kind != "blob" or mode == "120000" or not included(path, self.include):
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
