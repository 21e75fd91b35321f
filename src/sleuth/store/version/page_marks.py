"""What a version holds about one page of a source: the chunks cut from it and the artifacts that cite
it, with their offsets into the stored page text (issue 14, item 3: a source read page by page).

Both come from the version's own records: chunks from `tables.sqlite`'s `_chunks` (indexed by source
and page), artifacts from `_artifacts.sources`, whose files' provenance gives each quote's span. Only
the artifacts that name the source are opened, so a page of a large corpus reads a handful of files.
"""

from __future__ import annotations

import json
import sqlite3
from dataclasses import dataclass
from pathlib import Path

from sleuth.format.figures import cell_caption
from sleuth.format.front_matter import read_front_matter
from sleuth.format.spans import Provenance


@dataclass(frozen=True)
class ChunkMark:
    id: str
    start: int
    end: int
    section_path: list[str]
    tokens: int


@dataclass(frozen=True)
class ArtifactMark:
    """One span of the page that an artifact quotes as its evidence."""

    id: str
    name: str
    type: str
    kind: str
    file: str  # under the version's knowledge/, as the knowledge API names it
    start: int
    end: int
    quote: str


@dataclass(frozen=True)
class PageMarks:
    chunks: list[ChunkMark]
    artifacts: list[ArtifactMark]


def page_marks(version_dir: Path, source_path: str, page: int) -> PageMarks:
    """The chunks and artifact quotes on `page` of `source_path`, each in the order of its start."""
    path = version_dir / "tables.sqlite"
    if not path.is_file():
        return PageMarks([], [])
    db = sqlite3.connect(f"file:{path}?mode=ro&immutable=1", uri=True)
    try:
        chunks = [
            ChunkMark(cid, start, end, json.loads(section or "[]"), tokens or 0)
            for cid, start, end, section, tokens in db.execute(
                'SELECT id, start, "end", section_path, tokens FROM _chunks WHERE source = ? AND page = ? '
                "ORDER BY start, id",
                (source_path, page),
            )
        ]
        citing = db.execute(
            "SELECT id, name, type, kind, file FROM _artifacts "
            "WHERE EXISTS (SELECT 1 FROM json_each(_artifacts.sources) WHERE value = ?) ORDER BY type, name",
            (source_path,),
        ).fetchall()
    finally:
        db.close()
    knowledge = (version_dir / "knowledge").resolve()
    artifacts: list[ArtifactMark] = []
    for art_id, name, type_, kind, file in citing:
        artifact_file = (knowledge / str(file)).resolve()
        if not artifact_file.is_relative_to(knowledge) or not artifact_file.is_file():
            continue  # a row naming a file outside the version is not followed
        front = read_front_matter(artifact_file.read_text("utf-8", errors="replace"))
        provenance = front.get("provenance")
        for raw in provenance if isinstance(provenance, list) else []:
            try:
                at = Provenance.from_json(raw)
            except (KeyError, TypeError, ValueError):
                continue  # a damaged entry marks nothing; the rest of the page still shows
            if at.source_path == source_path and at.page == page:
                artifacts.append(
                    ArtifactMark(art_id, name, type_, kind, str(file), at.start, at.end, at.quote)
                )
    artifacts.sort(key=lambda a: (a.start, a.type, a.name))
    return PageMarks(chunks, artifacts)


def cell_at(version_dir: Path, source_path: str, page: int, start: int, end: int) -> str | None:
    """The table cell at exactly that span, said as its row, period and figure (`format.figures`);
    None when the span is not one cell of `_cells` (a version before it, or prose)."""
    path = version_dir / "tables.sqlite"
    if not path.is_file():
        return None
    db = sqlite3.connect(f"file:{path}?mode=ro&immutable=1", uri=True)
    try:
        row = db.execute(
            "SELECT label, section, header, text FROM _cells "
            'WHERE source = ? AND page = ? AND start = ? AND "end" = ? LIMIT 1',
            (source_path, page, start, end),
        ).fetchone()
    except sqlite3.Error:  # no `_cells` in this version
        return None
    finally:
        db.close()
    if row is None or not row[0]:
        return None
    label, section, header, text = row
    return cell_caption(str(label), section, header, str(text))
