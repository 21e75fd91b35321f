"""Archive imports (spec/api.md §6.2): the `import` task that expands a staged zip or tar into the source
tree. The host trusts nothing in an archive, so an archive is bounded by what it expands to, not by
its own size, and every check runs before anything reaches `sources/`:

- Before a member is read: a zip's end record gives its entry count and directory size (`zipfile`
  would otherwise load a directory of any size into memory), and a tar's extended headers (PAX, GNU
  long names) over `MAX_TAR_HEADER_BYTES` are refused before `tarfile` reads them.
- While streaming: the entries (`max_archive_members`) and the bytes written (`max_expanded_bytes`)
  of the whole archive, and each member's bytes as actually read (`max_file_bytes`). Passing an
  archive-wide limit fails the import; a member over the per-file limit is skipped.
- Decompression (issue 22): a compressed tar is one stream, read through `_BoundedStream`, which
  counts the compressed bytes read and the bytes they gave, and refuses the archive as soon as it has
  decompressed more than `max_expansion_ratio` times what it read (past `EXPANSION_ALLOWANCE_BYTES`),
  whether a member is copied or skipped (`tarfile` skips one by decompressing it). A bz2 member of 32
  GiB of zeros is refused after a few MiB. A zip's members are compressed one by one, and `zipfile`
  stops at the size each declares: a member declaring more than the ratio allows is skipped unread.
- Cancellation: every read of a member's data (and every step of a skip) checks the task's cancel
  flag, so a cancel takes effect within one `STREAM_STEP_BYTES` read, not after the member.
- Per member: an unsafe name (one over `MAX_SOURCE_PATH_BYTES` or deeper than
  `MAX_SOURCE_PATH_DEPTH` included), a link or a device is skipped, and only a cut of its name is
  kept in the report.

An import is atomic. Members are written to a staging folder beside the archive; only once the whole
archive was read are they moved into the source tree, under the tree lock, after every conflict was
checked: in one rename when the target folder is new, else one rename per file. A failed or cancelled
import leaves the source tree as it was.

The task output is a summary: counts of every member by action, and at most `MAX_RESULT_ROWS` rows
(`truncated: true` when some were left out).
"""

from __future__ import annotations

import bz2
import gzip
import io
import lzma
import os
import struct
import tarfile
import zipfile
import zlib
from collections.abc import Callable, Iterator
from contextlib import suppress
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import IO, Any, cast

from sleuth.api.uploads import SourceLimits, copy_capped
from sleuth.compile.sources import MAX_SOURCE_PATH_BYTES, UnsafePath, safe_join, safe_source_path
from sleuth.errors import Invalid
from sleuth.server.context_files import tree_lock, update_extra
from sleuth.server.task_service import TaskHandle
from sleuth.store.home import ContextDir, now_iso
from sleuth.store.trees import walk_files

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
class SourceUsage:
    """Files and bytes in a source tree."""

    files: int = 0
    bytes: int = 0

    @classmethod
    def of(cls, ctx: ContextDir) -> SourceUsage:
        usage = cls()
        for _rel, st in walk_files(ctx.sources):
            usage.files += 1
            usage.bytes += st.st_size
        return usage


@dataclass
class Member:
    name: str
    size: int  # as the archive declares it; the bytes read are counted again
    kind: str  # "file", "dir" or "other" (links, devices)
    open: Callable[[], IO[bytes]]
    packed: int | None = None  # its compressed size, where it is compressed alone (a zip entry)


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
                f"{_member_label(self.member)!r} decompresses to more than {self.ratio} times the "
                f"compressed bytes read ({self.position} bytes from {read}): refused as a "
                "compression bomb"
            )


class _Checked(io.RawIOBase):
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

            yield Member(info.filename, info.file_size, kind, opener, packed=info.compress_size)


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

    return Member(member.name, member.size, kind, opener)


def members(archive: Path, limits: SourceLimits, check: Callable[[], None]) -> Iterator[Member]:
    """Every entry of a zip or tar, directories included, with a lazy opener; `check` (the task's
    cancel check) runs at every step of reading a tar's stream."""
    if archive.name.lower().endswith(".zip"):
        return _zip_members(archive, limits)
    return _tar_members(archive, limits, check)


# --- the import task ----------------------------------------------------------------------------


class _Report:
    """Counts of every member by action; the first `MAX_RESULT_ROWS` rows."""

    def __init__(self, archive: str) -> None:
        self.archive = archive
        self.rows: list[dict[str, Any]] = []
        self.counts = {"extracted": 0, "skipped": 0, "failed": 0}

    def add(self, row: dict[str, Any]) -> None:
        self.counts[row["action"]] += 1
        if len(self.rows) < MAX_RESULT_ROWS:
            self.rows.append(row)

    def output(self) -> dict[str, Any]:
        return {
            "archive": self.archive,
            "files": self.rows,
            "counts": self.counts,
            "truncated": sum(self.counts.values()) > len(self.rows),
        }


def _member_label(name: str) -> str:
    """The member's name as the report shows it: whole when it could be a source path, else cut."""
    return name if len(name) <= MAX_SOURCE_PATH_BYTES else f"{name[:200]}… ({len(name)} characters)"


def _blocked(root: Path, rel: PurePosixPath) -> str | None:
    """Why `rel` cannot be written under `root`: a directory at the path or a file above it."""
    dest = root.joinpath(*rel.parts)
    if dest.is_dir():
        return "a directory exists at that path"
    for parent in rel.parents:
        if str(parent) != "." and root.joinpath(*parent.parts).is_file():
            return "a parent of the path is a file"
    return None


class _Expansion:
    """One archive expanded into `staging` (paths relative to `target`), with the running totals the
    limits are checked against."""

    def __init__(
        self,
        ctx: ContextDir,
        staging: Path,
        target: PurePosixPath,
        limits: SourceLimits,
        check: Callable[[], None],
    ) -> None:
        self.ctx, self.staging, self.target, self.limits = ctx, staging, target, limits
        self.check = check  # the task's cancel check, run before every read of a member's data
        self.usage = SourceUsage.of(ctx)  # the tree before the import; re-counted at the commit
        self.staged: dict[PurePosixPath, int] = {}  # path below the target → size
        self.entries = 0
        self.expanded = 0
        self.new_files = 0
        self.new_bytes = 0

    def entry(self, member: Member) -> dict[str, Any] | None:
        """Stage one entry; its report row (None for a directory). `ArchiveRefused` past an
        archive-wide limit."""
        self.entries += 1
        if self.entries > self.limits.max_archive_members:
            raise ArchiveRefused(f"the archive has more than {self.limits.max_archive_members} members")
        if member.kind == "dir":
            return None
        row: dict[str, Any] = {
            "member": _member_label(member.name),
            "path": None,
            "action": "skipped",
            "reason": None,
        }
        if member.kind != "file":
            row["reason"] = "not a regular file (link or device)"
            return row
        try:
            inner = safe_source_path(member.name)
            rel = safe_source_path(str(self.target / inner))
        except UnsafePath as exc:
            row["reason"] = str(exc)
            return row
        row["path"] = str(rel)
        row["reason"] = self._refusal(member, inner, rel)
        if row["reason"] is None:
            try:
                row.update(self._write(member, inner), action="extracted")
            except _Skip as skip:
                row["reason"] = str(skip)
            except MEMBER_ERRORS as exc:
                row["action"], row["reason"] = "failed", str(exc)[:500] or type(exc).__name__
        return row

    def _refusal(self, member: Member, inner: PurePosixPath, rel: PurePosixPath) -> str | None:
        """Why a member is skipped before it is read, from what the archive declares."""
        limits = self.limits
        if member.size > limits.max_file_bytes:
            return f"file_too_large: over {limits.max_file_bytes} bytes"
        if member.packed is not None and member.size > EXPANSION_ALLOWANCE_BYTES + (
            limits.max_expansion_ratio * member.packed
        ):
            return (
                f"compression_ratio: {member.size} bytes from {member.packed} compressed, over "
                f"{limits.max_expansion_ratio}:1"
            )
        if self.expanded + member.size > limits.max_expanded_bytes:
            raise ArchiveRefused(f"the archive expands beyond {limits.max_expanded_bytes} bytes")
        blocked = _blocked(self.staging, inner) or _blocked(self.ctx.sources, rel)
        if blocked is not None:
            return blocked
        return self._over_context(inner, rel, member.size)

    def _over_context(self, inner: PurePosixPath, rel: PurePosixPath, size: int) -> str | None:
        limits = self.limits
        old = self._old_size(inner, rel)
        files = self.usage.files + self.new_files + (1 if old is None else 0)
        if files > limits.max_files_per_context:
            return (
                f"context_file_limit: the context would hold {files} files; "
                f"the limit is {limits.max_files_per_context}"
            )
        if self.usage.bytes + self.new_bytes - (old or 0) + size > limits.max_context_bytes:
            return f"context_byte_limit: the context would hold more than {limits.max_context_bytes} bytes"
        return None

    def _old_size(self, inner: PurePosixPath, rel: PurePosixPath) -> int | None:
        """The size this member replaces: an earlier member of the same name, or a source file."""
        if inner in self.staged:
            return self.staged[inner]
        live = self.ctx.sources.joinpath(*rel.parts)
        return live.stat().st_size if live.is_file() else None

    def _write(self, member: Member, inner: PurePosixPath) -> dict[str, Any]:
        limits = self.limits
        budget = limits.max_expanded_bytes - self.expanded
        cap = min(limits.max_file_bytes, budget)
        tmp = self.staging.parent / f"{os.urandom(8).hex()}.partial"
        try:
            with member.open() as opened:
                src = cast(IO[bytes], _Checked(opened, self.check))
                try:
                    size, sha = copy_capped(src, tmp, cap)
                except OverflowError:
                    if budget < limits.max_file_bytes:
                        raise ArchiveRefused(
                            f"the archive expands beyond {limits.max_expanded_bytes} bytes"
                        ) from None
                    raise _Skip(f"file_too_large: over {limits.max_file_bytes} bytes") from None
            rel = self.target / inner
            reason = self._over_context(inner, rel, size)  # the bytes read, not the size declared
            if reason is not None:
                raise _Skip(reason)
            dest = self.staging.joinpath(*inner.parts)
            dest.parent.mkdir(parents=True, exist_ok=True)
            os.chmod(tmp, 0o644)
            os.replace(tmp, dest)
        finally:
            tmp.unlink(missing_ok=True)
        old = self._old_size(inner, rel)
        self.new_files += 1 if old is None else 0
        self.new_bytes += size - (old or 0)
        self.expanded += size
        self.staged[inner] = size
        return {"size": size, "sha256": sha}

    def commit(self) -> None:
        """Move every staged file into the source tree, or nothing (`ArchiveRefused`)."""
        if not self.staged:
            return
        sources = self.ctx.sources
        with tree_lock(self.ctx):
            if not self.ctx.info_file.exists():
                raise ArchiveRefused("the context was deleted during the import")
            usage = SourceUsage.of(self.ctx)  # other uploads may have landed meanwhile
            files, size = usage.files, usage.bytes
            moves: list[tuple[Path, Path]] = []
            for inner, staged_size in self.staged.items():
                rel = self.target / inner
                dest = safe_join(sources, str(rel))
                blocked = _blocked(sources, rel)
                if blocked is not None:
                    raise ArchiveRefused(f"{rel}: {blocked}")
                old = dest.stat().st_size if dest.is_file() else None
                files += 1 if old is None else 0
                size += staged_size - (old or 0)
                moves.append((self.staging.joinpath(*inner.parts), dest))
            if files > self.limits.max_files_per_context:
                raise ArchiveRefused(f"context_file_limit: the context would hold {files} files")
            if size > self.limits.max_context_bytes:
                raise ArchiveRefused(f"context_byte_limit: the context would hold {size} bytes")
            root = safe_join(sources, str(self.target))
            if not root.exists():
                root.parent.mkdir(parents=True, exist_ok=True)
                os.replace(self.staging, root)  # the whole archive appears at once
                return
            for src, dest in moves:
                dest.parent.mkdir(parents=True, exist_ok=True)
                os.replace(src, dest)


class _Skip(Exception):
    """This member is skipped (the message is the reason); the import goes on."""


def expand_archive(
    ctx: ContextDir, archive: Path, target: PurePosixPath, limits: SourceLimits, handle: TaskHandle
) -> dict[str, Any]:
    """The import task: expand `archive` (staged in its own folder) under `target` in the source
    tree, all of it or nothing."""
    report = _Report(archive.name)
    total = 0
    if archive.name.lower().endswith(".zip"):
        with suppress(ArchiveRefused, OSError):
            total = zip_directory(archive)[0]
    handle.start("extract", total)
    staging = archive.parent / "expanded"
    staging.mkdir()
    expansion = _Expansion(ctx, staging, target, limits, handle.check)
    try:
        for member in members(archive, limits, handle.check):
            handle.advance("extract")  # also the cancel check
            row = expansion.entry(member)
            if row is not None:
                report.add(row)
    except READ_ERRORS as exc:
        raise ArchiveRefused(f"{archive.name} is not a readable archive: {exc}") from None
    except RecursionError:  # a chain of extended headers
        raise ArchiveRefused(f"{archive.name} is not a readable archive: headers nested too deep") from None
    except ArchiveRefused as exc:
        raise ArchiveRefused(f"{archive.name}: {exc}; nothing was imported") from None
    expansion.commit()
    handle.finish("extract")
    if report.counts["extracted"]:
        with suppress(FileNotFoundError):
            update_extra(ctx, last_source_import_at=now_iso())
    return report.output()
