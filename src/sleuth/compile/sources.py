"""Bring files into a context's source tree (spec/context.md §2) without ever writing outside it.

`sleuth compile ./filings` mirrors the directory into `uploads/filings/`; a file is copied to
`uploads/<name>`; an archive is expanded under `uploads/<archive name>/`. Every name that comes
from outside (archive members, request paths) passes `safe_relative_path` first.
"""

from __future__ import annotations

import hashlib
import os
import tarfile
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

from sleuth.errors import Invalid
from sleuth.format.text import BIDI_CONTROLS, hidden_in_name
from sleuth.settings import Settings, current

ARCHIVE_SUFFIXES = (".tar.gz", ".tgz", ".tar", ".zip")

#: Any relative path a request or an archive names: a component is at most 255 bytes (spec/api.md §4), the
#: whole path at most `MAX_PATH_BYTES` bytes and `MAX_PATH_DEPTH` components, so a path always fits
#: the operating system's limits below a context's directory and a `mkdir(parents=True)` is shallow.
MAX_COMPONENT_BYTES = 255
MAX_PATH_BYTES = 2048
MAX_PATH_DEPTH = 64
#: A source's own path (an upload, an archive member) is held tighter, so the knowledge paths derived
#: from it (`knowledge/chunks/<path>.jsonl`, pack members) stay within the general limits.
MAX_SOURCE_PATH_BYTES = 1024
MAX_SOURCE_PATH_DEPTH = 32


class UnsafePath(Invalid, ValueError):
    """A path is absolute, contains `..`, a backslash, NUL, control, bidirectional control or invisible
    characters, a component over 255 bytes, or is too long or too deep (spec/api.md §4,
    `unsafe_path`)."""


def shown(name: str, limit: int = 80) -> str:
    """`name` quoted for a message, cut to `limit` characters: a message never carries a whole
    hostile name."""
    if len(name) <= limit:
        return repr(name)
    return f"{name[:limit]!r}… ({len(name)} characters)"


def safe_relative_path(
    name: str, *, max_bytes: int = MAX_PATH_BYTES, max_depth: int = MAX_PATH_DEPTH
) -> PurePosixPath:
    """`name` as a relative POSIX path, or `UnsafePath`. The one check every outside name passes."""
    try:
        size = len(name.encode("utf-8"))
    except UnicodeEncodeError:  # a name that was not UTF-8 (tar keeps its bytes as surrogates)
        raise UnsafePath(f"unsafe path {shown(name)}: not valid UTF-8") from None
    if size > max_bytes:
        raise UnsafePath(f"unsafe path {shown(name)}: over {max_bytes} bytes")
    if not name or name.startswith("/") or "\\" in name:
        raise UnsafePath(f"unsafe path {shown(name)}: absolute or contains a backslash")
    if any(ord(ch) < 32 or ord(ch) == 127 for ch in name):
        raise UnsafePath(f"unsafe path {shown(name)}: contains NUL or control characters")
    if any(ch in BIDI_CONTROLS for ch in name):
        raise UnsafePath(f"unsafe path {shown(name)}: contains bidirectional control characters")
    if (hidden := hidden_in_name(name)) is not None:  # `a\u200bb.md` looks like `ab.md`
        raise UnsafePath(f"unsafe path {shown(name)}: contains an invisible character (U+{ord(hidden):04X})")
    parts = [p for p in name.split("/") if p not in ("", ".")]
    if not parts:
        raise UnsafePath(f"unsafe path {shown(name)}: empty")
    if len(parts) > max_depth:
        raise UnsafePath(f"unsafe path {shown(name)}: deeper than {max_depth} components")
    for part in parts:
        if part == "..":
            raise UnsafePath(f"unsafe path {shown(name)}: contains '..'")
        if len(part.encode("utf-8")) > MAX_COMPONENT_BYTES:
            raise UnsafePath(f"unsafe path {shown(name)}: a component is over {MAX_COMPONENT_BYTES} bytes")
    return PurePosixPath(*parts)


def safe_source_path(name: str) -> PurePosixPath:
    """A source's path: `safe_relative_path` with the tighter source limits."""
    return safe_relative_path(name, max_bytes=MAX_SOURCE_PATH_BYTES, max_depth=MAX_SOURCE_PATH_DEPTH)


def safe_join(root: Path, name: str) -> Path:
    """`root / name`, refusing anything that would land outside `root` (symlinks included). The refusal
    names the path as it was given, never `root` or where a link leads: this machine's layout is not
    for a client to learn."""
    relative = safe_relative_path(name)
    target = root.joinpath(*relative.parts)
    resolved_root = root.resolve()
    if not target.resolve().is_relative_to(resolved_root):
        raise UnsafePath(f"unsafe path {shown(name)}: leads out of its folder (through a link)")
    return target


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


def import_sources(source_root: Path, inputs: list[Path]) -> ImportReport:
    """Copy or mirror each input into `source_root/uploads/…`, within the settings' file and upload
    limits (`max_file_bytes`, `max_upload_bytes`)."""
    limits = current()
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
    files: dict[str, _Source], target_dir: Path, prefix: str, report: ImportReport, limits: Settings
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


def _copy_if_changed(src: _Source, dest: Path, name: str, report: ImportReport, limits: Settings) -> None:
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


def _archive_members(path: Path, report: ImportReport, limits: Settings) -> dict[str, _Source]:
    """Regular members with safe names; links, devices and unsafe names are skipped and reported."""
    if path.stat().st_size > limits.max_upload_bytes:
        raise ValueError(f"archive too large: {path}")
    members: dict[str, _Source] = {}
    total = 0
    if path.name.lower().endswith(".zip"):
        with zipfile.ZipFile(path) as archive:
            for info in archive.infolist():
                if info.is_dir():
                    continue
                mode = (info.external_attr >> 16) & 0o170000
                if mode and mode != 0o100000:
                    report.skipped.append((info.filename, "not a regular file (link or device)"))
                    continue
                if _check_member(info.filename, info.file_size, total, report, limits):
                    total += info.file_size
                    mtime = _zip_mtime(info)
                    members[str(safe_relative_path(info.filename))] = _BytesSource(archive.read(info), mtime)
    else:
        with tarfile.open(path) as archive:
            for member in archive.getmembers():
                if member.isdir():
                    continue
                if not member.isfile():
                    report.skipped.append((member.name, "not a regular file (link or device)"))
                    continue
                if _check_member(member.name, member.size, total, report, limits):
                    total += member.size
                    handle = archive.extractfile(member)
                    data = handle.read() if handle else b""
                    members[str(safe_relative_path(member.name))] = _BytesSource(data, float(member.mtime))
    return members


def _check_member(name: str, size: int, total: int, report: ImportReport, limits: Settings) -> bool:
    try:
        safe_relative_path(name)
    except UnsafePath as exc:
        report.skipped.append((name, str(exc)))
        return False
    if size > limits.max_file_bytes:
        report.skipped.append((name, f"file too large ({size} bytes > {limits.max_file_bytes})"))
        return False
    if total + size > limits.max_upload_bytes:
        report.skipped.append((name, "archive expands beyond the upload limit"))
        return False
    return True


def _zip_mtime(info: zipfile.ZipInfo) -> float | None:
    import datetime as dt

    try:
        return dt.datetime(*info.date_time).timestamp()
    except ValueError:
        return None


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
