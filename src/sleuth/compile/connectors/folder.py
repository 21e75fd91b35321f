"""The folder connector: files below a folder of this machine (a mounted share included), read by
name from the folder's root without following links, so what people write there while it is read can
neither lead outside it nor into Sleuth's own home.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from sleuth.compile.connectors.base import ConnectorError, Item, included
from sleuth.compile.sources import shown

_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW


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
            elif stat.S_ISREG(found.st_mode) and included(rel, self.include):
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
