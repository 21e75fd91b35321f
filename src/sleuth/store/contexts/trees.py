"""Walking a tree of a context's files as the API and the services list them: regular files only,
never a link or an upload's partial write."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path


def hidden(name: str) -> bool:
    """Files a listing never shows: partial writes of an upload in progress."""
    return name.endswith(".partial")


def walk_files(root: Path) -> Iterator[tuple[str, os.stat_result]]:
    """Every regular file under `root` (no symlinks, no partial writes) as (POSIX path, stat)."""
    if not root.is_dir():
        return
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames.sort()
        base = Path(dirpath)
        for name in sorted(filenames):
            full = base / name
            if hidden(name) or full.is_symlink():
                continue
            yield full.relative_to(root).as_posix(), full.stat()
