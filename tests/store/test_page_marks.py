"""The marks of one page (`store.page_marks`): chunks and artifact quotes, from a version's own records,
and nothing followed outside the version however a row names its file."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

from sleuth.store.version.page_marks import page_marks

SOURCE = "uploads/a.md"


def _artifact(path: Path, provenance: list[object]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    front = json.dumps({"id": path.stem, "provenance": provenance})  # JSON is YAML
    path.write_text(f"---\n{front}\n---\nbody\n", encoding="utf-8")


def test_marks_come_from_the_version_and_never_from_outside_it(tmp_path: Path) -> None:
    version = tmp_path / "v000001"
    knowledge = version / "knowledge"
    quote = {"source": SOURCE, "page": 1, "start": 0, "end": 5, "quote": "Alpha"}
    _artifact(knowledge / "artifacts" / "note" / "good.md", [quote, {"source": SOURCE}, "not a mapping"])
    _artifact(tmp_path / "outside.md", [quote])  # a file beside the version, not in it
    db = sqlite3.connect(version / "tables.sqlite")
    db.executescript(
        'CREATE TABLE _chunks (id TEXT, source TEXT, page INTEGER, start INTEGER, "end" INTEGER, '
        "section_path TEXT, tokens INTEGER);"
        "CREATE TABLE _artifacts (id TEXT, name TEXT, type TEXT, kind TEXT, scope TEXT, file TEXT, "
        "sources TEXT, mentions INTEGER);"
    )
    db.executemany(
        "INSERT INTO _chunks VALUES (?, ?, ?, ?, ?, ?, ?)",
        [
            ("c2", SOURCE, 1, 6, 20, '["A"]', 4),
            ("c1", SOURCE, 1, 0, 10, "[]", 3),
            ("c3", SOURCE, 2, 0, 9, "[]", 2),
        ],
    )
    sources = json.dumps([SOURCE])
    db.executemany(
        "INSERT INTO _artifacts VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
        [
            ("good", "Good", "Note", "summary", "document", "artifacts/note/good.md", sources, 1),
            ("escape", "Escape", "Note", "summary", "document", "../../outside.md", sources, 1),
            ("gone", "Gone", "Note", "summary", "document", "artifacts/note/missing.md", sources, 1),
        ],
    )
    db.commit()
    db.close()
    marks = page_marks(version, SOURCE, 1)
    assert [c.id for c in marks.chunks] == ["c1", "c2"]  # this page's, in page order
    assert marks.chunks[1].section_path == ["A"]
    assert [(a.id, a.start, a.end, a.quote) for a in marks.artifacts] == [("good", 0, 5, "Alpha")]
    assert page_marks(version, "uploads/other.md", 1).artifacts == []
    assert page_marks(tmp_path / "no-version", SOURCE, 1).chunks == []
