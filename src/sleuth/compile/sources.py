"""Bring files into a context's source tree (spec/context.md §2) without ever writing outside it.

`sleuth compile ./filings` mirrors the directory into `uploads/filings/`; a file is copied to
`uploads/<name>`; an archive is expanded under `uploads/<archive name>/`. Every name that comes
from outside (archive members, request paths) passes `safe_relative_path` first.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from sleuth.compile.archives import ArchiveRefused, SourceLimits, member_label, members
from sleuth.compile.source_paths import (
    MAX_COMPONENT_BYTES,
    MAX_PATH_BYTES,
    MAX_PATH_DEPTH,
    MAX_SOURCE_PATH_BYTES,
    MAX_SOURCE_PATH_DEPTH,
    UnsafePath,
    safe_join,
    safe_relative_path,
    safe_source_path,
    shown,
)

__all__ = [  # the names' checks live in `source_paths`; most importers know them from here
    "MAX_COMPONENT_BYTES",
    "MAX_PATH_BYTES",
    "MAX_PATH_DEPTH",
    "MAX_SOURCE_PATH_BYTES",
    "MAX_SOURCE_PATH_DEPTH",
    "ImportReport",
    "UnsafePath",
    "import_sources",
    "safe_join",
    "safe_relative_path",
    "safe_source_path",
    "shown",
]

ARCHIVE_SUFFIXES = (".tar.gz", ".tgz", ".tar", ".zip")


@dataclass
class ImportReport:
    copied: list[str] = field(default_factory=list)
    unchanged: list[str] = field(default_factory=list)
    deleted: list[str] = field(default_factory=list)
    skipped: list[tuple[str, str]] = field(default_factory=list)  # (name, reason)


def is_archive(path: Path) -> bool:
    return path.name.lower().endswith(ARCHIVE_SUFFIXES)


def archive_stem(path: Path) -> str:
    name = path.name
    for suffix in ARCHIVE_SUFFIXES:
        if name.lower().endswith(suffix):
            return name[: -len(suffix)]
    return path.stem


def upload_dir(path: Path) -> str | None:
    """Where a folder or archive is mirrored in a context (`uploads/<name>`); None for a plain file."""
    if path.is_dir():
        return f"uploads/{path.name}"
    if path.is_file() and is_archive(path):
        return f"uploads/{archive_stem(path)}"
    return None


def holds_files(path: Path) -> bool:
    """Whether importing `path` would take a file: a file, or a folder with one the walk takes (hidden
    names and links are left out, as `import_sources` leaves them); stops at the first."""
    return not path.is_dir() or next(_walk_dir(path), None) is not None


def import_sources(source_root: Path, inputs: list[Path], limits: SourceLimits) -> ImportReport:
    """Copy or mirror each input into `source_root/uploads/…`, within the settings' file, upload and
    archive limits (`max_file_bytes`, `max_upload_bytes`, …)."""
    report = ImportReport()
    uploads = source_root / "uploads"
    uploads.mkdir(parents=True, exist_ok=True)
    for given in inputs:
        path = given.resolve()
        if path.is_dir():
            target = safe_join(uploads, path.name)
            _mirror(dict(_walk_dir(path)), target, f"uploads/{path.name}", report, limits)
        elif path.is_file() and is_archive(path):
            stem = archive_stem(path)
            members = _archive_members(path, report, limits)
            _mirror(members, safe_join(uploads, stem), f"uploads/{stem}", report, limits)
        elif path.is_file():
            target = safe_join(uploads, path.name)
            _copy_if_changed(_FileSource(path), target, f"uploads/{path.name}", report, limits)
        else:
            raise FileNotFoundError(f"no such file or directory: {given}")
    return report


class _FileSource:
    def __init__(self, path: Path) -> None:
        self.path = path

    def size(self) -> int:
        return self.path.stat().st_size

    def read(self) -> bytes:
        return self.path.read_bytes()

    def mtime(self) -> float | None:
        return self.path.stat().st_mtime


class _BytesSource:
    def __init__(self, data: bytes, mtime: float | None) -> None:
        self._data = data
        self._mtime = mtime

    def size(self) -> int:
        return len(self._data)

    def read(self) -> bytes:
        return self._data

    def mtime(self) -> float | None:
        return self._mtime


_Source = _FileSource | _BytesSource


def _walk_dir(root: Path) -> Iterator[tuple[str, _Source]]:
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if not d.startswith("."))
        for name in sorted(filenames):
            full = Path(dirpath) / name
            if name.startswith(".") or full.is_symlink() or not full.is_file():
                continue
            yield full.relative_to(root).as_posix(), _FileSource(full)


def _mirror(
    files: dict[str, _Source], target_dir: Path, prefix: str, report: ImportReport, limits: SourceLimits
) -> None:
    target_dir.mkdir(parents=True, exist_ok=True)
    wanted: set[Path] = set()
    for rel, src in files.items():
        try:
            dest = safe_join(target_dir, rel)
        except UnsafePath as exc:
            report.skipped.append((f"{prefix}/{rel}", str(exc)))
            continue
        wanted.add(dest)
        _copy_if_changed(src, dest, f"{prefix}/{rel}", report, limits)
    for dirpath, _dirnames, filenames in os.walk(target_dir):
        for name in filenames:
            full = Path(dirpath) / name
            if full not in wanted:
                full.unlink()
                report.deleted.append(f"{prefix}/{full.relative_to(target_dir).as_posix()}")
    _remove_empty_dirs(target_dir)


def _remove_empty_dirs(root: Path) -> None:
    for dirpath, _dirnames, _filenames in sorted(os.walk(root), key=lambda t: -len(t[0])):
        path = Path(dirpath)
        if path != root and not any(path.iterdir()):
            path.rmdir()


def _copy_if_changed(src: _Source, dest: Path, name: str, report: ImportReport, limits: SourceLimits) -> None:
    size = src.size()
    if size > limits.max_file_bytes:
        report.skipped.append((name, f"file too large ({size} bytes > {limits.max_file_bytes})"))
        return
    data = src.read()
    if dest.is_file() and dest.stat().st_size == size and _sha(dest.read_bytes()) == _sha(data):
        report.unchanged.append(name)
        return
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = dest.with_name(f".{dest.name}.partial")
    tmp.write_bytes(data)
    mtime = src.mtime()
    if mtime is not None:
        os.utime(tmp, (mtime, mtime))
    os.replace(tmp, dest)
    report.copied.append(name)


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _archive_members(path: Path, report: ImportReport, limits: SourceLimits) -> dict[str, _Source]:
    """Regular members with safe names, read as the API's archive import reads them (`compile/archives`:
    the entry count, a tar's headers and its compression ratio bounded before or while reading); each
    member's bytes are counted as they are read, never taken from what the archive declares. Links,
    devices, unsafe names and members over the file limit are skipped and reported; an archive that
    expands past `max_expanded_bytes` is refused."""
    if path.stat().st_size > limits.max_upload_bytes:
        raise ValueError(f"archive too large: {path}")
    found: dict[str, _Source] = {}
    total = 0
    for member in members(path, limits):
        label = member_label(member.name)
        if member.kind == "dir":
            continue
        if member.kind != "file":
            report.skipped.append((label, "not a regular file (link or device)"))
            continue
        try:
            rel = safe_relative_path(member.name)
        except UnsafePath as exc:
            report.skipped.append((label, str(exc)))
            continue
        if member.size > limits.max_file_bytes:
            report.skipped.append((label, f"file too large ({member.size} bytes > {limits.max_file_bytes})"))
            continue
        with member.open() as opened:
            data = opened.read(limits.max_file_bytes + 1)
        if len(data) > limits.max_file_bytes:
            report.skipped.append((label, f"file too large (over {limits.max_file_bytes} bytes)"))
            continue
        total += len(data)
        if total > limits.max_expanded_bytes:
            raise ArchiveRefused(f"{path.name} expands past {limits.max_expanded_bytes} bytes")
        found[str(rel)] = _BytesSource(data, member.mtime)
    return found


def list_source_files(source_root: Path) -> list[str]:
    """Every file in the source tree as a POSIX path relative to it (staging lives elsewhere)."""
    found: list[str] = []
    if not source_root.is_dir():
        return found
    for dirpath, dirnames, filenames in os.walk(source_root):
        dirnames.sort()
        for name in sorted(filenames):
            full = Path(dirpath) / name
            if name.endswith(".partial") or full.is_symlink():
                continue
            found.append(full.relative_to(source_root).as_posix())
    return found
