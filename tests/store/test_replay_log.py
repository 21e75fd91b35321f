"""The replay log: round trip, byte-stable output, atomic replace, and ids that could escape the home."""

from __future__ import annotations

import gzip
from pathlib import Path
from typing import Any

import pytest

from sleuth.store.records.replay_log import (
    InvalidQueryId,
    delete_replay_log,
    read_replay_log,
    replay_log_path,
    write_replay_log,
)

QID = "qry_0193a0c4-7a1e-7c3b-9d2e-5f0a1b2c3d4e"
RECORDS: list[dict[str, Any]] = [
    {"kind": "model", "step": 1, "response": "print('héllo')"},
    {"kind": "host", "fn": "search_source", "result": [{"score": 0.5, "text": "a\nb"}]},
]


def test_round_trip(tmp_path: Path) -> None:
    path = write_replay_log(tmp_path, QID, iter(RECORDS))
    assert path == tmp_path / "queries" / QID / "replay.jsonl.gz" == replay_log_path(tmp_path, QID)
    assert read_replay_log(tmp_path, QID) == RECORDS
    assert [p.name for p in path.parent.iterdir()] == ["replay.jsonl.gz"]  # no temporary left behind


def test_bytes_are_deterministic(tmp_path: Path) -> None:
    first = write_replay_log(tmp_path / "a", QID, RECORDS).read_bytes()
    second = write_replay_log(tmp_path / "b", QID, RECORDS).read_bytes()
    assert first == second
    assert first[4:8] == b"\x00\x00\x00\x00"  # gzip mtime field
    assert gzip.decompress(first).decode().count("\n") == 2


def test_rewrite_replaces(tmp_path: Path) -> None:
    write_replay_log(tmp_path, QID, RECORDS)
    write_replay_log(tmp_path, QID, RECORDS[:1])
    assert read_replay_log(tmp_path, QID) == RECORDS[:1]


def test_failed_write_keeps_old_log(tmp_path: Path) -> None:
    write_replay_log(tmp_path, QID, RECORDS)
    with pytest.raises(TypeError):
        write_replay_log(tmp_path, QID, [RECORDS[0], "not a dict"])  # type: ignore[list-item]
    assert read_replay_log(tmp_path, QID) == RECORDS
    assert len(list((tmp_path / "queries" / QID).iterdir())) == 1


def test_missing_log(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="no replay log for query"):
        read_replay_log(tmp_path, QID)


def test_delete(tmp_path: Path) -> None:
    write_replay_log(tmp_path, QID, RECORDS)
    assert delete_replay_log(tmp_path, QID) is True
    assert not (tmp_path / "queries" / QID).exists()
    assert delete_replay_log(tmp_path, QID) is False


@pytest.mark.parametrize(
    "bad",
    [
        "../etc",
        "qry_../../x",
        "qry_ABCDEF12",
        "qry_0193a0c4/..",
        "ses_0193a0c4-7a1e",
        "qry_abc",
        f"{QID}\n",
        "",
    ],
)
def test_bad_id_rejected(tmp_path: Path, bad: str) -> None:
    with pytest.raises(InvalidQueryId):
        write_replay_log(tmp_path, bad, RECORDS)
    with pytest.raises(InvalidQueryId):
        read_replay_log(tmp_path, bad)
    with pytest.raises(InvalidQueryId):
        delete_replay_log(tmp_path, bad)
    assert not (tmp_path / "queries").exists()
