"""Typed-table rows read from tables in the corpus, without a model (spec/context.md §4.1).

A `format: sqlite` type takes the rows of every corpus table (CSV sources; Markdown, HTML and
DOCX tables) whose header holds each declared column. Values are coerced to the column type; rows
sharing a `natural_key` merge, the most recently modified source winning and the others recorded
in `_conflicts`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from sleuth.compile.manifest import ArtifactType, snake_case
from sleuth.compile.pages import Page
from sleuth.format.spans import Provenance

_NUMBER = re.compile(r"^[+-]?(?:\d{1,3}(?:,\d{3})+|\d+)?(?:\.\d+)?$")


@dataclass(frozen=True)
class ColumnSpec:
    name: str  # snake_case
    type: str
    description: str | None


@dataclass
class Row:
    values: dict[str, Any]
    sources: list[str]
    provenance: list[Provenance]
    conflicts: list[dict[str, Any]] = field(default_factory=list)


@dataclass
class ProseRows:
    """Rows a model found in prose, already coerced, and how many it proposed that were screened."""

    rows: list[Row] = field(default_factory=list)
    screened: int = 0


@dataclass
class TypedTable:
    type: ArtifactType
    columns: list[ColumnSpec]
    natural_key: list[str]
    rows: list[Row]
    screened: int = 0
    warnings: list[str] = field(default_factory=list)

    @property
    def name(self) -> str:
        return self.type.table_name


def resolve_columns(art_type: ArtifactType) -> tuple[list[ColumnSpec], list[str]]:
    """snake_case column names; a later name that normalizes like an earlier one is dropped."""
    columns: list[ColumnSpec] = []
    warnings: list[str] = []
    seen: set[str] = set()
    for col in art_type.columns:
        name = snake_case(col.name)
        if name in seen:
            warnings.append(
                f"type {art_type.name!r}: column {col.name!r} normalizes to {name!r}, "
                "which an earlier column already uses; it is ignored"
            )
            continue
        seen.add(name)
        columns.append(ColumnSpec(name, col.type, col.description))
    return columns, warnings


def coerce(value: str, column_type: str) -> tuple[Any, bool]:
    """(value, ok): `"1,234.5"` → 1234.5, `"12%"` → 12, `"(370)"` → -370; empty → NULL."""
    text = value.strip()
    if column_type == "TEXT":
        return (text or None), True
    if not text or text in {"-", "—", "–", "n/a", "N/A"}:
        return None, True
    negative = text.startswith("(") and text.endswith(")")
    cleaned = text.strip("()").replace("$", "").replace("€", "").replace("£", "").strip()
    cleaned = cleaned.removesuffix("%").strip().replace(" ", "")
    if not cleaned or not _NUMBER.match(cleaned) or not any(ch.isdigit() for ch in cleaned):
        return None, False
    number = float(cleaned.replace(",", ""))
    if negative:
        number = -number
    if column_type == "INTEGER":
        return (int(number), True) if number.is_integer() else (None, False)
    if column_type == "NUMERIC" and number.is_integer():
        return int(number), True
    return number, True


def build_table(
    art_type: ArtifactType,
    pages_by_source: dict[str, list[Page]],
    mtimes: dict[str, float],
    prose: ProseRows | None = None,
) -> TypedTable:
    """The rows read from tables in the corpus (§4.1), plus `prose`, the rows a model found in
    running text (§5.4), merged by the natural key together."""
    columns, warnings = resolve_columns(art_type)
    key = [snake_case(k) for k in art_type.natural_key]
    table = TypedTable(art_type, columns, key, [], warnings=warnings)
    wanted = [c.name for c in columns]
    found: list[Row] = []
    for source in sorted(pages_by_source):
        for page in pages_by_source[source]:
            for corpus_table in page.tables:
                header = [snake_case(c) for c in corpus_table.rows[0].cells]
                if not all(name in header for name in wanted):
                    continue
                index = {name: header.index(name) for name in wanted}
                for row in corpus_table.rows[1:]:
                    values: dict[str, Any] = {}
                    for col in columns:
                        i = index[col.name]
                        raw = row.cells[i] if i < len(row.cells) else ""
                        value, ok = coerce(raw, col.type)
                        if not ok:
                            table.screened += 1
                        values[col.name] = value
                    if all(v is None for v in values.values()):
                        continue
                    span = Provenance.of(source, page.page, page.text, row.start, row.end)
                    found.append(Row(values, [source], [span]))
    if prose is not None:
        found.extend(prose.rows)
        table.screened += prose.screened
    table.rows = _merge(found, key, mtimes) if key else found
    return table


def _merge(rows: list[Row], key: list[str], mtimes: dict[str, float]) -> list[Row]:
    groups: dict[tuple[Any, ...], list[Row]] = {}
    loose: list[Row] = []
    for row in rows:
        values = tuple(row.values.get(k) for k in key)
        if any(v is None for v in values):
            loose.append(row)
            continue
        norm = tuple(v.casefold() if isinstance(v, str) else v for v in values)
        groups.setdefault(norm, []).append(row)
    merged: list[Row] = []
    for members in groups.values():
        # Most recently modified source first: its non-null values win.
        ordered = sorted(members, key=lambda r: -mtimes.get(r.sources[0], 0.0))
        winner = Row(dict(ordered[0].values), [], [], [])
        for row in ordered:
            for col, value in row.values.items():
                if col in key:
                    continue  # equal up to case by construction of the group
                current = winner.values.get(col)
                if current is None:
                    winner.values[col] = value
                elif value is not None and value != current:
                    span = row.provenance[0]
                    winner.conflicts.append(
                        {
                            "column": col,
                            "value": value,
                            "source": span.source_path,
                            "page": span.page,
                            "start": span.start,
                            "end": span.end,
                        }
                    )
            for source in row.sources:
                if source not in winner.sources:
                    winner.sources.append(source)
            winner.provenance.extend(row.provenance)
        merged.append(winner)
    return merged + loose
