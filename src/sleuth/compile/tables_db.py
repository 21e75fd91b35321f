"""`tables.sqlite` (spec/context.md §7.5): system tables for sources, chunks, artifacts, edges,
glossary terms and the cells of the corpus's tables, plus one typed table per `format: sqlite` type.
Finished in rollback-journal mode so a read-only mount can open it."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from sleuth.compile.artifacts import Artifact
from sleuth.compile.glossary import Entry
from sleuth.compile.manifest import Manifest
from sleuth.compile.table_cells import Cell
from sleuth.compile.typed_tables import TypedTable
from sleuth.format.chunks import Chunk

_SCHEMA = """
PRAGMA journal_mode=DELETE;
CREATE TABLE _sources (path TEXT PRIMARY KEY, title TEXT, format TEXT, pages INTEGER,
                       chars INTEGER, sha256 TEXT, size INTEGER, mtime REAL, curated_at TEXT,
                       issuer TEXT, doc_type TEXT, period TEXT, year INTEGER,
                       aliases TEXT, period_start TEXT, period_end TEXT, fiscal_quarter INTEGER,
                       fiscal_differs INTEGER, fiscal_year INTEGER, fiscal_year_end INTEGER,
                       fiscal_basis TEXT, calendar_year INTEGER, calendar_quarter INTEGER,
                       calendar_period TEXT, fiscal_year_named INTEGER);
CREATE TABLE _chunks (id TEXT PRIMARY KEY, source TEXT NOT NULL, page INTEGER NOT NULL,
                      start INTEGER NOT NULL, "end" INTEGER NOT NULL, section_path TEXT,
                      tokens INTEGER);
CREATE INDEX _chunks_source ON _chunks(source, page);
CREATE TABLE _artifacts (id TEXT PRIMARY KEY, name TEXT NOT NULL, type TEXT NOT NULL,
                         kind TEXT NOT NULL, scope TEXT NOT NULL, file TEXT, sources TEXT,
                         mentions INTEGER);
CREATE INDEX _artifacts_name ON _artifacts(name COLLATE NOCASE);
CREATE TABLE _edges (from_id TEXT NOT NULL, from_name TEXT, type TEXT NOT NULL, to_id TEXT NOT NULL,
                     to_name TEXT, attributes TEXT, source TEXT, page INTEGER, start INTEGER,
                     "end" INTEGER);
CREATE INDEX _edges_from ON _edges(from_id, type);
CREATE INDEX _edges_to ON _edges(to_id, type);
CREATE TABLE _glossary (term TEXT NOT NULL, definition TEXT, type TEXT, source TEXT, page INTEGER,
                        start INTEGER, "end" INTEGER);
CREATE TABLE _cells_tables (id INTEGER PRIMARY KEY, source TEXT NOT NULL, page INTEGER NOT NULL,
                            table_no INTEGER NOT NULL, title TEXT, unit TEXT);
CREATE INDEX _cells_tables_source ON _cells_tables(source, page);
CREATE TABLE _cells_columns (table_id INTEGER NOT NULL, column_no INTEGER NOT NULL, header TEXT,
                             year INTEGER, period_end TEXT, period_start TEXT, months INTEGER,
                             PRIMARY KEY (table_id, column_no)) WITHOUT ROWID;
CREATE TABLE _cells_rows (table_id INTEGER NOT NULL, row_no INTEGER NOT NULL, label TEXT,
                          section TEXT, PRIMARY KEY (table_id, row_no)) WITHOUT ROWID;
CREATE TABLE _cells_values (table_id INTEGER NOT NULL, row_no INTEGER NOT NULL,
                            column_no INTEGER NOT NULL, aligned INTEGER NOT NULL, text TEXT,
                            value REAL, start INTEGER NOT NULL, "end" INTEGER NOT NULL,
                            PRIMARY KEY (table_id, row_no, column_no)) WITHOUT ROWID;
CREATE VIEW _cells AS
    SELECT t.source AS source, t.page AS page, t.table_no AS table_no, v.row_no AS row_no,
           v.column_no AS column_no, r.label AS label, r.section AS section, k.header AS header,
           k.year AS year, k.period_end AS period_end, t.unit AS unit, t.title AS title,
           v.text AS text, v.value AS value, v.start AS start, v."end" AS "end",
           k.period_start AS period_start, k.months AS months
    FROM _cells_values v
    JOIN _cells_tables t ON t.id = v.table_id
    JOIN _cells_rows r ON r.table_id = v.table_id AND r.row_no = v.row_no
    LEFT JOIN _cells_columns k ON v.aligned AND k.table_id = v.table_id AND k.column_no = v.column_no;
CREATE TABLE _tables (name TEXT PRIMARY KEY, type TEXT, kind TEXT, scope TEXT, description TEXT,
                      columns TEXT, natural_key TEXT);
"""


def _q(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def write_tables(
    path: Path,
    manifest: Manifest,
    sources: Iterable[dict[str, Any]],
    chunks: Iterable[Chunk],
    artifacts: list[Artifact],
    artifact_files: dict[str, str],
    glossary: list[tuple[str, Entry]],
    typed: list[TypedTable],
    cells: Iterable[Cell] = (),
) -> None:
    path.unlink(missing_ok=True)
    db = sqlite3.connect(path)
    try:
        db.executescript(_SCHEMA)
        with db:
            db.executemany(
                "INSERT INTO _sources VALUES (:path, :title, :format, :pages, :chars, :sha256, "
                ":size, :mtime, :curated_at, :issuer, :doc_type, :period, :year, :aliases, "
                ":period_start, :period_end, :fiscal_quarter, :fiscal_differs, :fiscal_year, "
                ":fiscal_year_end, :fiscal_basis, :calendar_year, :calendar_quarter, :calendar_period, "
                ":fiscal_year_named)",
                list(sources),
            )
            db.executemany(
                "INSERT INTO _chunks VALUES (?, ?, ?, ?, ?, ?, ?)",
                (
                    (c.id, c.source_path, c.page, c.start, c.end, json.dumps(c.heading_path), c.tokens)
                    for c in chunks
                ),
            )
            db.executemany(
                "INSERT INTO _artifacts VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    (
                        a.id,
                        a.name,
                        a.type,
                        a.kind,
                        a.scope,
                        artifact_files.get(a.id),
                        json.dumps(a.sources),
                        a.mentions,
                    )
                    for a in artifacts
                ),
            )
            db.executemany(
                "INSERT INTO _edges VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    (
                        a.id,
                        a.name,
                        e.type,
                        e.to_id,
                        e.to,
                        json.dumps(e.attributes),
                        e.evidence.source_path if e.evidence else None,
                        e.evidence.page if e.evidence else None,
                        e.evidence.start if e.evidence else None,
                        e.evidence.end if e.evidence else None,
                    )
                    for a in artifacts
                    for e in a.edges
                ),
            )
            db.executemany(
                "INSERT INTO _glossary VALUES (?, ?, ?, ?, ?, ?, ?)",
                (
                    (
                        e.term,
                        e.definition,
                        type_name,
                        e.span.source_path,
                        e.span.page,
                        e.span.start,
                        e.span.end,
                    )
                    for type_name, e in glossary
                ),
            )
            db.executemany(
                "INSERT INTO _tables VALUES (?, ?, ?, ?, ?, ?, ?)",
                (
                    (
                        t.table_name,
                        t.name,
                        t.kind,
                        t.resolved_scope,
                        t.description,
                        json.dumps([c.model_dump() for c in t.columns]),
                        json.dumps(t.natural_key),
                    )
                    for t in manifest.curate.artifacts.artifact_types
                    if t.format == "sqlite"
                ),
            )
            _write_cells(db, cells)
            for table in typed:
                _write_typed(db, table)
        db.execute("VACUUM")
    finally:
        db.close()


def _write_cells(db: sqlite3.Connection, cells: Iterable[Cell]) -> None:
    """`_cells` is a view over four tables (a table's caption and unit, a column's header and period,
    a row's label and group are stored once, not once a cell: a third of the flat table's size)."""
    key: tuple[str, int, int] | None = None
    table_id = 0
    for c in cells:
        if (c.source_path, c.page, c.table_no) != key:
            key = (c.source_path, c.page, c.table_no)
            table_id += 1
            db.execute(
                "INSERT INTO _cells_tables VALUES (?, ?, ?, ?, ?, ?)",
                (table_id, c.source_path, c.page, c.table_no, c.title, c.unit),
            )
        aligned = c.header is not None
        if aligned:
            db.execute(
                "INSERT OR IGNORE INTO _cells_columns VALUES (?, ?, ?, ?, ?, ?, ?)",
                (table_id, c.column_no, c.header, c.year, c.period_end, c.period_start, c.months),
            )
        db.execute(
            "INSERT OR IGNORE INTO _cells_rows VALUES (?, ?, ?, ?)", (table_id, c.row_no, c.label, c.section)
        )
        db.execute(
            "INSERT INTO _cells_values VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
            (table_id, c.row_no, c.column_no, int(aligned), c.text, c.value, c.start, c.end),
        )


def _write_typed(db: sqlite3.Connection, table: TypedTable) -> None:
    cols = ", ".join(f"{_q(c.name)} {c.type}" for c in table.columns)
    db.execute(
        f"CREATE TABLE {_q(table.name)} (_row_id INTEGER PRIMARY KEY, {cols}, _sources TEXT, "
        "_provenance TEXT, _conflicts TEXT)"
    )
    if table.natural_key:
        keys = ", ".join(_q(k) for k in table.natural_key)
        db.execute(f"CREATE UNIQUE INDEX {_q(table.name + '_natural_key')} ON {_q(table.name)} ({keys})")
    names = [c.name for c in table.columns]
    marks = ", ".join("?" * (len(names) + 3))
    sql = (
        f"INSERT INTO {_q(table.name)} ({', '.join(_q(n) for n in names)}, _sources, _provenance, "
        f"_conflicts) VALUES ({marks})"
    )
    for row in table.rows:
        db.execute(
            sql,
            (
                *(row.values.get(n) for n in names),
                json.dumps(row.sources),
                json.dumps([p.to_json() for p in row.provenance]),
                json.dumps(row.conflicts),
            ),
        )
