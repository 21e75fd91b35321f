"""Reading archives that nobody here trusts (spec/api.md §6.2), for every importer: the API's archive
import (`server/archives.py`) and `sleuth compile x.zip` (`compile/sources.py`). An archive is bounded by
what it expands to, not by its own size:

- Before a member is read: a zip's end record gives its entry count and directory size (`zipfile`
  would otherwise load a directory of any size into memory), and a tar's extended headers (PAX, GNU
  long names) over `MAX_TAR_HEADER_BYTES` are refused before `tarfile` reads them.
- Decompression (issue 22): a compressed tar is one stream, read through `_BoundedStream`, which
  counts the compressed bytes read and the bytes they gave, and refuses the archive as soon as it has
  decompressed more than `max_expansion_ratio` times what it read (past `EXPANSION_ALLOWANCE_BYTES`),
  whether a member is copied or skipped (`tarfile` skips one by decompressing it). A bz2 member of 32
  GiB of zeros is refused after a few MiB. A zip's members are compressed one by one, and `zipfile`
  stops at the size each declares.
- Cancellation: every step of reading a tar's stream calls the caller's `check`, so a cancel takes
  effect within one `STREAM_STEP_BYTES` read.
"""

from __future__ import annotations

import bz2
import datetime
import gzip
import hashlib
import io
import lzma
import os
import struct
import tarfile
import zipfile
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass, fields
from pathlib import Path
from typing import IO, Any, cast

from sleuth.compile.source_paths import MAX_SOURCE_PATH_BYTES
from sleuth.errors import Invalid
from sleuth.settings import Settings

COPY_CHUNK = 1024 * 1024


@dataclass(frozen=True)
class SourceLimits:
    """spec/api.md §12, each a setting (`sleuth.settings`, `$SLEUTH_<NAME>`), from the settings the
    process read at its start."""

    max_file_bytes: int
    max_upload_bytes: int
    max_context_bytes: int
    max_files_per_context: int
    max_expanded_bytes: int  # what one archive may expand to, all members together
    max_archive_members: int  # entries of one archive, directories included
    max_expansion_ratio: int  # decompressed bytes per compressed byte, past `EXPANSION_ALLOWANCE_BYTES`

    @classmethod
    def of_settings(cls, settings: Settings) -> SourceLimits:
        """The limits of these settings (a server's `Server.settings`, a CLI command's own)."""
        return cls(**{item.name: getattr(settings, item.name) for item in fields(cls)})


#: Largest tar extended header (the PAX records or GNU long name of one member) read into memory.
MAX_TAR_HEADER_BYTES = 64 * 1024
#: Rows of the import report; the counts always cover every member.
MAX_RESULT_ROWS = 1000
#: Directory bytes allowed per zip entry: its fixed header, a name of the longest allowed source path,
#: and as much again for the extra field and comment.
ZIP_ENTRY_BYTES = 46 + 2 * MAX_SOURCE_PATH_BYTES
#: Decompressed bytes an archive may give before `max_expansion_ratio` applies: a small archive's
#: headers and padding (a tar ends in 10 KiB of zeros) compress far better than its files do.
EXPANSION_ALLOWANCE_BYTES = 4 * 1024 * 1024
#: The most bytes decompressed between two checks of the limits and of the cancel flag.
STREAM_STEP_BYTES = 64 * 1024
#: Errors of reading the archive's structure (the task fails) or one member's data (the member fails).
READ_ERRORS = (OSError, EOFError, zipfile.BadZipFile, tarfile.TarError, zlib.error, lzma.LZMAError)
#: Reading one member may also meet an encrypted entry or an unknown compression method.
MEMBER_ERRORS = (*READ_ERRORS, RuntimeError, NotImplementedError)

_TAR_EXTENDED = (
    tarfile.XHDTYPE,
    tarfile.XGLTYPE,
    tarfile.SOLARIS_XHDTYPE,
    tarfile.GNUTYPE_LONGNAME,
    tarfile.GNUTYPE_LONGLINK,
)
_EOCD = struct.Struct("<4s4H2LH")  # zip end record: signature, 4 counts, directory size and offset, comment
_ZIP64_LOCATOR = struct.Struct("<4sLQL")
_ZIP64_EOCD = struct.Struct("<4sQ2H2L4Q")


class ArchiveRefused(Invalid, ValueError):
    """The archive as a whole is not imported (unreadable, too many members, expands too far);
    nothing of it is written."""


@dataclass
class Member:
    name: str
    size: int  # as the archive declares it; the bytes read are counted again
    kind: str  # "file", "dir" or "other" (links, devices)
    open: Callable[[], IO[bytes]]
    packed: int | None = None  # its compressed size, where it is compressed alone (a zip entry)
    mtime: float | None = None  # when it was last changed, as the archive says


class _Counted(io.RawIOBase):
    """The archive file, counting the bytes read from it: what a decompressor has consumed."""

    def __init__(self, raw: io.BufferedReader) -> None:
        super().__init__()
        self._raw = raw
        self.count = 0

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        n = self._raw.readinto(buffer)
        self.count += n
        return n


class _BoundedStream:
    """A tar's decompressed stream, read forward only in steps of at most `STREAM_STEP_BYTES`; after
    each step the task's cancel flag and the expansion ratio are checked (`ArchiveRefused` naming
    `member`, the member whose data is being read or skipped). Plain tars have no ratio to check."""

    def __init__(self, raw: io.BufferedReader, ratio: int, check: Callable[[], None]) -> None:
        magic = raw.read(6)
        raw.seek(0)
        self._counted = _Counted(raw)
        counted = cast(IO[bytes], self._counted)
        self._data: IO[bytes]
        # Each decompressor reads `counted` and is closed by `close()` (not a `with`: it outlives this).
        if magic.startswith(b"\x1f\x8b"):
            self._data = cast(IO[bytes], gzip.GzipFile(fileobj=counted, mode="rb"))
        elif magic.startswith(b"BZh"):
            self._data = cast(IO[bytes], bz2.BZ2File(counted))
        elif magic == b"\xfd7zXZ\x00":
            self._data = cast(IO[bytes], lzma.LZMAFile(counted))  # noqa: SIM115
        else:
            self._data = raw
        self.compressed = self._data is not raw
        self.ratio = ratio
        self.check = check
        self.position = 0  # bytes decompressed so far
        self.member = ""

    def read(self, size: int = -1) -> bytes:
        """`size` bytes (fewer only at the end of the data), in checked steps."""
        parts: list[bytes] = []
        wanted = size if size >= 0 else 1 << 62
        while wanted > 0:
            piece = self._data.read(min(wanted, STREAM_STEP_BYTES))
            if not piece:
                break
            parts.append(piece)
            wanted -= len(piece)
            self._advanced(len(piece))
        return b"".join(parts)

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        """Forward only, by reading (what a decompressor does anyway), so a skip is checked too."""
        if whence != io.SEEK_SET or offset < self.position:
            raise OSError("the archive is read forward only")
        while self.position < offset:
            if not self.read(min(offset - self.position, STREAM_STEP_BYTES)):
                break
        return self.position

    def tell(self) -> int:
        return self.position

    def close(self) -> None:
        self._data.close()

    def _advanced(self, n: int) -> None:
        self.position += n
        self.check()
        if not self.compressed:
            return
        read = self._counted.count
        if self.position > EXPANSION_ALLOWANCE_BYTES + self.ratio * read:
            raise ArchiveRefused(
                f"{member_label(self.member)!r} decompresses to more than {self.ratio} times the "
                f"compressed bytes read ({self.position} bytes from {read}): refused as a "
                "compression bomb"
            )


class Checked(io.RawIOBase):
    """A member's data, checking the task's cancel flag before every read."""

    def __init__(self, src: IO[bytes], check: Callable[[], None]) -> None:
        super().__init__()
        self._src = src
        self._check = check

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        self._check()
        data = self._src.read(min(len(buffer), STREAM_STEP_BYTES))
        buffer[: len(data)] = data
        return len(data)


# --- reading archives ---------------------------------------------------------------------------


class _BoundedTarInfo(tarfile.TarInfo):
    """Refuses an extended header over `MAX_TAR_HEADER_BYTES` before `tarfile` reads it whole
    (`_proc_member` is the hook `tarfile` documents for subclasses)."""

    def _proc_member(self, archive: tarfile.TarFile) -> tarfile.TarInfo:
        if self.type in _TAR_EXTENDED and self.size > MAX_TAR_HEADER_BYTES:
            raise ArchiveRefused(
                f"a member header of {self.size} bytes (over {MAX_TAR_HEADER_BYTES}): "
                "a name or attribute far over the limits"
            )
        member: tarfile.TarInfo = super()._proc_member(archive)  # type: ignore[misc]
        return member


class _StreamedTar(tarfile.TarFile):
    """A tar read one member at a time: `next()` forgets the members it has returned, where
    `TarFile` keeps them all (and their names) until it is closed."""

    tarinfo = _BoundedTarInfo

    def next(self) -> tarfile.TarInfo | None:
        member = super().next()
        self.members: list[tarfile.TarInfo] = []
        return member


def zip_directory(archive: Path) -> tuple[int, int]:
    """(entries, directory bytes) of a zip from its end record (zip64 included), read before
    `zipfile` loads the directory."""
    with archive.open("rb") as fh:
        size = fh.seek(0, os.SEEK_END)
        start = max(0, size - _EOCD.size - 0xFFFF)
        fh.seek(start)
        tail = fh.read()
        at = tail.rfind(b"PK\x05\x06")
        if at < 0 or len(tail) - at < _EOCD.size:
            raise ArchiveRefused("not a readable archive: no zip end record")
        fields = _EOCD.unpack_from(tail, at)
        entries, directory = int(fields[4]), int(fields[5])
        locator_at = start + at - _ZIP64_LOCATOR.size
        if (entries == 0xFFFF or directory == 0xFFFFFFFF) and locator_at >= 0:
            fh.seek(locator_at)
            locator = fh.read(_ZIP64_LOCATOR.size)
            if locator[:4] == b"PK\x06\x07":
                fh.seek(_ZIP64_LOCATOR.unpack(locator)[2])
                record = fh.read(_ZIP64_EOCD.size)
                if len(record) == _ZIP64_EOCD.size and record[:4] == b"PK\x06\x06":
                    values = _ZIP64_EOCD.unpack(record)
                    entries, directory = int(values[7]), int(values[8])
    return entries, directory


def _zip_members(archive: Path, limits: SourceLimits) -> Iterator[Member]:
    entries, directory = zip_directory(archive)
    if entries > limits.max_archive_members:
        raise ArchiveRefused(f"the archive has {entries} members; the limit is {limits.max_archive_members}")
    if directory > max(1, entries) * ZIP_ENTRY_BYTES:
        raise ArchiveRefused(
            f"the archive directory is {directory} bytes for {entries} members: "
            "names or fields far over the limits"
        )
    with zipfile.ZipFile(archive) as zf:
        for info in zf.infolist():
            mode = (info.external_attr >> 16) & 0o170000
            kind = "dir" if info.is_dir() else "file" if not mode or mode == 0o100000 else "other"

            def opener(zi: zipfile.ZipInfo = info, z: zipfile.ZipFile = zf) -> IO[bytes]:
                return z.open(zi)

            yield Member(
                info.filename, info.file_size, kind, opener, packed=info.compress_size, mtime=_zip_mtime(info)
            )


def _tar_members(archive: Path, limits: SourceLimits, check: Callable[[], None]) -> Iterator[Member]:
    with archive.open("rb") as raw:
        stream = _BoundedStream(raw, limits.max_expansion_ratio, check)
        fileobj = cast(IO[bytes], stream)
        try:
            with _StreamedTar.open(fileobj=fileobj, mode="r:") as tf:
                while (member := tf.next()) is not None:
                    stream.member = member.name  # its data is read or skipped from here on
                    yield _tar_member(tf, member)
        finally:
            stream.close()


def _tar_member(tf: tarfile.TarFile, member: tarfile.TarInfo) -> Member:
    kind = "dir" if member.isdir() else "file" if member.isfile() else "other"

    def opener() -> IO[bytes]:
        handle = tf.extractfile(member)
        if handle is None:
            raise OSError("member has no data")
        return handle

    return Member(member.name, member.size, kind, opener, mtime=float(member.mtime))


def members(archive: Path, limits: SourceLimits, check: Callable[[], None] | None = None) -> Iterator[Member]:
    """Every entry of a zip or tar, directories included, with a lazy opener; `check` (the task's
    cancel check) runs at every step of reading a tar's stream."""
    check = check or _keep_going
    if archive.name.lower().endswith(".zip"):
        return _zip_members(archive, limits)
    return _tar_members(archive, limits, check)


def copy_capped(src: IO[bytes], dest: Path, cap: int) -> tuple[int, str]:
    """Copy at most `cap` bytes into `dest`; returns (size, sha256). `OverflowError` past the cap."""
    digest = hashlib.sha256()
    size = 0
    with dest.open("wb") as out:
        while chunk := src.read(COPY_CHUNK):
            size += len(chunk)
            if size > cap:
                raise OverflowError(f"more than {cap} bytes")
            digest.update(chunk)
            out.write(chunk)
        out.flush()
        os.fsync(out.fileno())
    return size, digest.hexdigest()


def member_label(name: str) -> str:
    """The member's name as the report shows it: whole when it could be a source path, else cut."""
    return name if len(name) <= MAX_SOURCE_PATH_BYTES else f"{name[:200]}… ({len(name)} characters)"


def _zip_mtime(info: zipfile.ZipInfo) -> float | None:
    try:
        return datetime.datetime(*info.date_time).timestamp()
    except ValueError:
        return None


def _keep_going() -> None:
    """A reader nobody can stop (`sleuth compile`): its check never raises."""
