"""The replay log `queries/<qry_id>/replay.jsonl.gz` (spec/context.md §7, spec/api.md §8.6).

One JSON record per line: every model response and host-function result of a turn, so the turn can be
re-run deterministically (spec/runtime.md §11). The file is written once, when the turn ends, to a temporary
name and renamed into place, so a reader never sees half a log. The gzip header carries no name and
mtime 0, so the same records always give the same bytes (replays and packs can compare them).

With shared storage (many machines, `SLEUTH_STORAGE_URL`) the log is also stored there under the same
path, since the worker that ran the turn and the server asked to replay it have homes of their own.
"""

from __future__ import annotations

import gzip
import json
import re
import shutil
from collections.abc import Iterable
from contextlib import suppress
from pathlib import Path
from typing import Any

from sleuth.errors import Invalid
from sleuth.store.files import atomic_file
from sleuth.store.storage import ObjectMissing, Storage
from sleuth.store.text import clean_text

QUERY_ID_PATTERN = re.compile(r"qry_[0-9a-f-]{8,64}")
REPLAY_FILE = "replay.jsonl.gz"


class InvalidQueryId(Invalid, ValueError):
    """A query id that is not `qry_<hex>`; refused so a path built from it never leaves the home."""


def check_query_id(query_id: str) -> str:
    # fullmatch, not `^…$`: `$` would accept a trailing newline.
    if not isinstance(query_id, str) or not QUERY_ID_PATTERN.fullmatch(query_id):
        raise InvalidQueryId(f"invalid query id {query_id!r}: expected 'qry_' and 8-64 of [0-9a-f-]")
    return query_id


def query_dir(root: Path, query_id: str) -> Path:
    """`<root>/queries/<qry_id>/`, the per-turn directory under the home root."""
    return Path(root) / "queries" / check_query_id(query_id)


def replay_log_path(root: Path, query_id: str) -> Path:
    return query_dir(root, query_id) / REPLAY_FILE


def _key(query_id: str) -> str:
    return f"queries/{check_query_id(query_id)}/{REPLAY_FILE}"


def write_replay_log(
    root: Path, query_id: str, records: Iterable[dict[str, Any]], storage: Storage | None = None
) -> Path:
    """Write (or replace) the turn's replay log atomically, here and in `storage`; returns its path."""
    path = replay_log_path(root, query_id)
    # filename="" keeps the temporary name out of the gzip header; mtime=0 keeps the time out.
    with (
        atomic_file(path) as raw,
        gzip.GzipFile(filename="", mode="wb", fileobj=raw, mtime=0, compresslevel=6) as gz,
    ):
        for record in records:
            if not isinstance(record, dict):
                raise TypeError(f"replay records must be dicts, got {type(record).__name__}")
            line = clean_text(json.dumps(record, ensure_ascii=False, separators=(",", ":"), allow_nan=False))
            gz.write(line.encode("utf-8") + b"\n")
    if storage is not None:
        storage.put_file(_key(query_id), path)
    return path


def read_replay_log(root: Path, query_id: str, storage: Storage | None = None) -> list[dict[str, Any]]:
    """All records of the turn's replay log, in the order they were written (fetched from `storage`
    first when another machine wrote it)."""
    path = replay_log_path(root, query_id)
    if storage is not None and not path.is_file():
        with suppress(ObjectMissing):
            storage.get_file(_key(query_id), path)
    try:
        with gzip.open(path, "rt", encoding="utf-8") as fh:
            return [json.loads(line) for line in fh if line.strip()]
    except FileNotFoundError:
        raise FileNotFoundError(
            f"no replay log for query {query_id} (expected {path}); the turn may predate replay logs, "
            "still be running, or its session was deleted"
        ) from None


def delete_replay_log(root: Path, query_id: str, storage: Storage | None = None) -> bool:
    """Remove the turn's whole `queries/<qry_id>/` directory (and its log in `storage`); False when
    there was nothing to remove here."""
    if storage is not None:
        storage.delete([_key(query_id)])
    directory = query_dir(root, query_id)
    if directory.is_symlink():
        directory.unlink()
        return True
    if not directory.exists():
        return False
    shutil.rmtree(directory)
    return True
