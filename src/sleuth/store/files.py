"""Files written whole: every file Sleuth keeps is written under a temporary name and renamed into
place, so a crash never leaves half a file behind; and trees shared by hard links, safe because a file
is always replaced, never rewritten in place."""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, BinaryIO


def write_json_atomic(path: Path, data: Any) -> None:
    write_text_atomic(path, json.dumps(data, ensure_ascii=False, indent=2) + "\n")


@contextmanager
def atomic_file(path: Path) -> Iterator[BinaryIO]:
    """A binary file that replaces `path` only when the block ends without error: written under a
    temporary name in the same directory, fsynced, then renamed over `path`; removed on error."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    os.fchmod(fd, 0o644)  # mkstemp makes 0600; the sandbox's unprivileged uid must read these
    try:
        with os.fdopen(fd, "wb") as fh:
            yield fh
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def write_text_atomic(path: Path, text: str) -> None:
    """Replace `path` with `text` (UTF-8) in one rename, so a crash never leaves half a file."""
    with atomic_file(path) as fh:
        fh.write(text.encode("utf-8"))


def link_file(src: Path, dest: Path) -> None:
    """`dest` as a hard link to `src` (a copy where a link cannot be made: another device, a file
    system without links). Safe because Sleuth replaces files, never rewrites one in place."""
    dest.parent.mkdir(parents=True, exist_ok=True)
    try:
        os.link(src, dest)
    except OSError:
        shutil.copy2(src, dest)


def link_tree(src: Path, dest: Path) -> None:
    """`dest` as a tree of hard links to `src`'s files (`link_file`)."""
    for path in sorted(src.rglob("*")):
        target = dest / path.relative_to(src)
        if path.is_dir():
            target.mkdir(parents=True, exist_ok=True)
        else:
            link_file(path, target)
    dest.mkdir(parents=True, exist_ok=True)


def prune_empty_dirs(directory: Path, root: Path) -> None:
    """Remove `directory` and its parents while they are empty, up to `root` (kept)."""
    while directory != root and directory.is_relative_to(root):
        try:
            directory.rmdir()
        except OSError:
            return
        directory = directory.parent
