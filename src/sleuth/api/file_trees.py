"""File trees served by the API: a request path resolved inside its root, directory listings, file
responses and sizes. The task routes and the context routes (sources, knowledge, packs) share them.
"""

from __future__ import annotations

import mimetypes
import os
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from fastapi.responses import FileResponse

from sleuth.api.errors import ApiError
from sleuth.compile.sources import UnsafePath, safe_join
from sleuth.store.contexts.trees import hidden as _hidden


def iso(epoch: float | None) -> str | None:
    """RFC 3339 UTC, the format of every `*_at` field (spec/api.md §1)."""
    if epoch is None:
        return None
    return datetime.fromtimestamp(epoch, UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def resolve_in(root: Path, path: str) -> Path:
    """`root/path` for a request path: `400 unsafe_path` for anything that could leave `root`."""
    try:
        return safe_join(root, path)
    except UnsafePath as exc:
        raise ApiError(400, "unsafe_path", str(exc), field="path") from None


def resolve_file(root: Path, path: str) -> Path:
    target = resolve_in(root, path)
    if not target.is_file() or target.is_symlink():
        raise ApiError(404, "path_not_found", f"no file {path!r}", path=path)
    return target


def guess_type(name: str) -> str:
    """`Content-Type` from the name; the knowledge tree's own formats first (mimetypes lacks them)."""
    if name.endswith(".md"):
        return "text/markdown"
    if name.endswith(".jsonl"):
        return "application/x-ndjson"
    kind, _ = mimetypes.guess_type(name)
    return kind or "application/octet-stream"


#: Types a browser shows without running anything of the file's: served as they are.
INERT_TYPES = frozenset(
    {
        "application/pdf",
        "image/png",
        "image/jpeg",
        "image/gif",
        "image/webp",
        "text/plain",
        "text/markdown",
        "text/csv",
        "application/json",
        "application/x-ndjson",
    }
)
#: Every raw read: the response is its own opaque origin (no script runs, nothing loads, no cookie or
#: storage of the console's is reachable) and its type is never sniffed into something active.
RAW_READ_HEADERS = {
    "content-security-policy": "sandbox; default-src 'none'",
    "x-content-type-options": "nosniff",
}


def _textual(kind: str) -> bool:
    """Markup, script and style: what a browser would run or lay out, readable as plain text."""
    return kind.startswith("text/") or kind.endswith(("+xml", "/xml", "javascript", "ecmascript"))


def file_response(target: Path, headers: dict[str, str] | None = None) -> FileResponse:
    """Raw bytes and `Content-Length` (FileResponse streams from disk), safe to open in a browser
    (issue 22, item 8: an uploaded page ran its script on the console's origin). Every read carries
    `RAW_READ_HEADERS`; an `INERT_TYPES` file keeps its guessed type; other text (HTML, SVG, XML,
    JavaScript, CSS …) is served as `text/plain; charset=utf-8`, and anything else as an attachment."""
    kind = guess_type(target.name)
    merged = {**(headers or {}), **RAW_READ_HEADERS}
    if kind in INERT_TYPES:
        return FileResponse(target, media_type=kind, headers=merged)
    if _textual(kind):
        return FileResponse(target, media_type="text/plain; charset=utf-8", headers=merged)
    return FileResponse(
        target, media_type=kind, headers=merged, filename=target.name, content_disposition_type="attachment"
    )


EMPTY_LISTING: dict[str, Any] = {"entries": [], "total": 0, "offset": 0, "limit": 0, "next_offset": None}


def dir_listing(root: Path, path: str, missing_root_is_empty: bool = False) -> dict[str, Any]:
    """`DirListing` of one directory (spec/api.md §6.2): the whole directory in one page."""
    if path.strip("/") == "":
        directory = root
        if not directory.is_dir():
            if missing_root_is_empty:
                return EMPTY_LISTING.copy()
            raise ApiError(404, "path_not_found", "no such directory", path=path)
    else:
        directory = resolve_in(root, path)
        if not directory.is_dir() or directory.is_symlink():
            raise ApiError(404, "path_not_found", f"no directory {path!r}", path=path)
    entries: list[dict[str, Any]] = []
    with os.scandir(directory) as scan:
        for entry in scan:
            if entry.is_symlink() or _hidden(entry.name):
                continue
            st = entry.stat()
            if entry.is_dir():
                entries.append({"name": entry.name, "kind": "dir", "size": 0, "mtime": iso(st.st_mtime)})
            elif entry.is_file():
                entries.append(
                    {"name": entry.name, "kind": "file", "size": st.st_size, "mtime": iso(st.st_mtime)}
                )
    entries.sort(key=lambda e: (e["kind"] != "dir", e["name"]))
    return {
        "entries": entries,
        "total": len(entries),
        "offset": 0,
        "limit": len(entries),
        "next_offset": None,
    }


def tree_stats(root: Path) -> dict[str, int]:
    """`{file_count, dir_count, total_size}` of a tree."""
    files = dirs = size = 0
    if root.is_dir():
        for dirpath, dirnames, filenames in os.walk(root):
            dirs += sum(1 for d in dirnames if not (Path(dirpath) / d).is_symlink())
            for name in filenames:
                full = Path(dirpath) / name
                if _hidden(name) or full.is_symlink():
                    continue
                files += 1
                size += full.stat().st_size
    return {"file_count": files, "dir_count": dirs, "total_size": size}
