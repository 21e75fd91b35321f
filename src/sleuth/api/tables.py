"""Routes: a context's SQL tables for the console's table browser (issue 14, item 3; issue 26, item 8):
paged, sorted, filtered by column, faceted, exported as CSV or JSON, and queried with read-only SQL.

Read through the SDK's hardened read-only connection (`sdk.sql.ReadOnlyDatabase`), whose caps bound
what any one statement can cost; a table or column named in a request must be one the version has
(looked up, never interpolated unchecked), and every value is a bound parameter. The filters follow
datasette's spelling, `?column__op=value` (`?column=value` is `exact`), so a link to a filtered table
reads the same in both.
"""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Query, Request
from fastapi.responses import StreamingResponse
from pydantic import BaseModel, ConfigDict, Field

from sleuth.api.auth import AnyKey
from sleuth.api.context_files import find_context, live_version_dir
from sleuth.api.errors import ApiError
from sleuth.api.state import api_state
from sleuth.sdk.errors import QueryError
from sleuth.sdk.sql import MAX_ROWS, ReadOnlyDatabase, quote_identifier

router = APIRouter()
PAGE_MAX = 500
#: Values a facet lists, most frequent first; the rest are counted as "more".
FACET_VALUES = 30
MAX_FACETS = 5
#: Rows one export writes. Read a page at a time, so memory stays at one page whatever the table.
EXPORT_MAX_ROWS = 100_000
_EXPORT_PAGE = 1000
#: `?column__op=value` → the SQL comparison (the value bound as a parameter).
_OPS: dict[str, str] = {
    "exact": "= ?",
    "not": "!= ?",
    "contains": "LIKE ? ESCAPE '\\'",
    "startswith": "LIKE ? ESCAPE '\\'",
    "gt": "> ?",
    "gte": ">= ?",
    "lt": "< ?",
    "lte": "<= ?",
    "isnull": "IS NULL",
    "notnull": "IS NOT NULL",
}
_RESERVED = frozenset({"offset", "limit", "order", "desc", "facet", "format"})


def _database(request: Request, slug: str) -> ReadOnlyDatabase:
    return ReadOnlyDatabase(live_version_dir(find_context(api_state(request), slug)) / "tables.sqlite")


def _visible(schema: dict[str, list[tuple[str, str]]]) -> dict[str, list[tuple[str, str]]]:
    """The tables a person browses: not the keyword index's own shadow tables."""
    return {name: cols for name, cols in schema.items() if "fts" not in name.casefold()}


def _count(db: ReadOnlyDatabase, table: str, where: str = "", params: tuple[Any, ...] = ()) -> int:
    _c, rows, _t = db.execute(f"SELECT count(*) FROM {quote_identifier(table)}{where}", params)
    return int(rows[0][0])


def _run(
    db: ReadOnlyDatabase, sql: str, params: tuple[Any, ...], max_rows: int
) -> tuple[list[str], list[Any]]:
    try:
        names, rows, _truncated = db.execute(sql, params, max_rows=max_rows)
    except QueryError as exc:
        raise ApiError(400, "query_error", str(exc)) from None
    return names, [_cells(r) for r in rows]


def _cells(row: tuple[Any, ...]) -> list[Any]:
    """A row as JSON can carry it: a blob as its size, not its bytes."""
    return [f"<{len(v)} bytes>" if isinstance(v, bytes) else v for v in row]


@dataclass(frozen=True)
class Filter:
    column: str
    op: str
    value: str

    def clause(self) -> tuple[str, tuple[Any, ...]]:
        sql = f"{quote_identifier(self.column)} {_OPS[self.op]}"
        if self.op in ("isnull", "notnull"):
            return sql, ()
        if self.op in ("contains", "startswith"):
            escaped = self.value.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
            return sql, (f"%{escaped}%" if self.op == "contains" else f"{escaped}%",)
        return sql, (_typed(self.value),)

    def to_json(self) -> dict[str, str]:
        return {"column": self.column, "op": self.op, "value": self.value}


def _typed(value: str) -> Any:
    """A filter's value as the number it spells, so `price_usd__gt=100` compares numbers even over a
    view, whose columns have no type affinity to convert text."""
    for kind in (int, float):
        try:
            return kind(value)
        except ValueError:
            continue
    return value


def _filters(request: Request, columns: list[str]) -> list[Filter]:
    """The request's `column__op=value` parameters, each checked against the table's columns."""
    found: list[Filter] = []
    for key, value in request.query_params.multi_items():
        if key in _RESERVED:
            continue
        column, _sep, op = key.rpartition("__") if "__" in key else (key, "", "exact")
        if op not in _OPS:
            column, op = key, "exact"  # a column whose own name has `__` in it
        if column not in columns:
            raise ApiError(400, "invalid_request", f"filter {key!r}: no column {column!r}", field=key)
        if len(value) > 1000:
            raise ApiError(
                400, "invalid_request", f"filter {key!r}: a value of at most 1,000 characters", field=key
            )
        found.append(Filter(column, op, value))
    if len(found) > 20:
        raise ApiError(400, "invalid_request", "at most 20 filters", field="filter")
    return found


def _where(filters: list[Filter]) -> tuple[str, tuple[Any, ...]]:
    if not filters:
        return "", ()
    clauses = [f.clause() for f in filters]
    return " WHERE " + " AND ".join(c for c, _p in clauses), tuple(p for _c, ps in clauses for p in ps)


def _facet(
    db: ReadOnlyDatabase, table: str, column: str, where: str, params: tuple[Any, ...]
) -> dict[str, Any]:
    """The most frequent values of `column` among the filtered rows, with their counts."""
    name = quote_identifier(column)
    sql = (
        f"SELECT {name}, count(*) AS n FROM {quote_identifier(table)}{where} "
        f"GROUP BY {name} ORDER BY n DESC, {name} LIMIT ?"
    )
    _names, rows = _run(db, sql, (*params, FACET_VALUES + 1), FACET_VALUES + 1)
    values = [{"value": value, "count": int(n)} for value, n in rows[:FACET_VALUES]]
    return {"column": column, "values": values, "truncated": len(rows) > FACET_VALUES}


def _table(db: ReadOnlyDatabase, name: str) -> list[str]:
    schema = _visible(db.schema())
    if name not in schema:
        raise ApiError(404, "table_not_found", f"no table {name!r} in the live version", table=name)
    return [c for c, _t in schema[name]]


@router.get("/contexts/{slug}/tables")
def list_tables(request: Request, slug: str, _who: AnyKey) -> dict[str, Any]:
    db = _database(request, slug)
    try:
        tables = []
        for name, columns in _visible(db.schema()).items():
            tables.append(
                {
                    "name": name,
                    "columns": [{"name": c, "type": t} for c, t in columns],
                    "rows": _count(db, name),
                }
            )
        return {"tables": tables}
    finally:
        db.close()


@router.get("/contexts/{slug}/tables/{name}", response_model=None)
def read_table(
    request: Request,
    slug: str,
    name: str,
    _who: AnyKey,
    offset: Annotated[int, Query(ge=0, le=10_000_000)] = 0,
    limit: Annotated[int, Query(ge=1, le=PAGE_MAX)] = 50,
    order: str | None = None,
    desc: bool = False,
    facet: Annotated[list[str] | None, Query(max_length=MAX_FACETS)] = None,
    format: Literal["json", "csv", "rows"] = "json",
) -> dict[str, Any] | StreamingResponse:
    """A page of rows (`format=json`), or every filtered row as a download (`csv`, or `rows`: JSON
    objects, one array), up to `EXPORT_MAX_ROWS`."""
    db = _database(request, slug)
    streaming = False
    try:
        columns = _table(db, name)
        if order is not None and order not in columns:
            raise ApiError(400, "invalid_request", f"order: no column {order!r} in {name}", field="order")
        for column in facet or []:
            if column not in columns:
                raise ApiError(
                    400, "invalid_request", f"facet: no column {column!r} in {name}", field="facet"
                )
        filters = _filters(request, columns)
        where, params = _where(filters)
        sql = f"SELECT * FROM {quote_identifier(name)}{where}"
        if order is not None:
            sql += f" ORDER BY {quote_identifier(order)} {'DESC' if desc else 'ASC'}"
        if format != "json":
            streaming = True
            return _export(db, name, sql, params, format)
        try:
            total = _count(db, name, where, params)
        except QueryError as exc:
            raise ApiError(400, "query_error", str(exc)) from None
        names, rows = _run(db, sql + " LIMIT ? OFFSET ?", (*params, limit, offset), limit)
        return {
            "name": name,
            "columns": names,
            "rows": rows,
            "total": total,
            "offset": offset,
            "limit": limit,
            "order": order,
            "desc": desc,
            "filters": [f.to_json() for f in filters],
            "facets": [_facet(db, name, column, where, params) for column in facet or []],
        }
    finally:
        if not streaming:
            db.close()


def _export(
    db: ReadOnlyDatabase, name: str, sql: str, params: tuple[Any, ...], format: str
) -> StreamingResponse:
    """Every row `sql` selects, a page at a time (each page one statement under `query_db`'s caps),
    as CSV or as one JSON array of objects; the connection closes when the download ends."""

    def pages() -> Iterator[tuple[list[str], list[Any]]]:
        try:
            for offset in range(0, EXPORT_MAX_ROWS, _EXPORT_PAGE):
                names, rows = _run(
                    db, sql + " LIMIT ? OFFSET ?", (*params, _EXPORT_PAGE, offset), _EXPORT_PAGE
                )
                yield names, rows
                if len(rows) < _EXPORT_PAGE:
                    return
        finally:
            db.close()

    def as_csv() -> Iterator[str]:
        first = True
        for names, rows in pages():
            out = io.StringIO()
            writer = csv.writer(out)
            if first:
                writer.writerow(names)
                first = False
            writer.writerows(rows)
            yield out.getvalue()

    def as_rows() -> Iterator[str]:
        yield "["
        first = True
        for names, rows in pages():
            for row in rows:
                yield ("" if first else ",\n") + json.dumps(dict(zip(names, row, strict=True)), default=str)
                first = False
        yield "]\n"

    kind = "csv" if format == "csv" else "json"
    return StreamingResponse(
        as_csv() if format == "csv" else as_rows(),
        media_type="text/csv; charset=utf-8" if format == "csv" else "application/json",
        headers={"content-disposition": f'attachment; filename="{_file_name(name)}.{kind}"'},
    )


def _file_name(name: str) -> str:
    return "".join(c if c.isalnum() or c in "-_" else "_" for c in name) or "table"


class SqlRequest(BaseModel):
    """A read-only statement over the live version's tables (the SQL box)."""

    model_config = ConfigDict(extra="forbid")

    sql: str = Field(min_length=1, max_length=20_000, description="One SELECT (or WITH) statement.")
    params: list[str | int | float | None] = Field(
        default_factory=list, max_length=100, description="Values bound to the statement's `?`s."
    )
    max_rows: int = Field(200, ge=1, le=MAX_ROWS, description="Rows returned at most.")


@router.post("/contexts/{slug}/sql")
def run_sql(request: Request, slug: str, body: SqlRequest, _who: AnyKey) -> dict[str, Any]:
    """`{columns, rows, truncated}`: the statement run over the same hardened read-only connection as
    the SDK's `query_db` (its caps on time, values, columns and result bytes); a statement that
    writes, attaches or calls a denied function is refused by that connection (`400 query_error`)."""
    db = _database(request, slug)
    try:
        try:
            names, rows, truncated = db.execute(body.sql, body.params, max_rows=body.max_rows)
        except QueryError as exc:
            raise ApiError(400, "query_error", str(exc)) from None
        return {"columns": names, "rows": [_cells(r) for r in rows], "truncated": truncated}
    finally:
        db.close()
