"""Routes: a context's SQL tables for the console's table browser (issue 14, item 3; issue 26, item 8):
paged, sorted, filtered by column, faceted, exported as CSV or JSON, and queried with read-only SQL.

Every statement runs in one of the server's statement processes (`sdk.sql_process`): the SDK's hardened
read-only connection (`sdk.sql.ReadOnlyDatabase`) caps its values and result, and the process is killed
at the deadline, so no statement, however written, costs more than its time and memory. The routes run
on this module's own few threads, never the pool every route shares; when every statement slot is
taken a request is refused at once (503 `busy`, `Retry-After`). A table or column named in a request
must be one the version has (looked up, never interpolated unchecked), and every value is a bound
parameter. The filters follow datasette's spelling, `?column__op=value` (`?column=value` is `exact`), so
a link to a filtered table reads the same in both.
"""

from __future__ import annotations

import asyncio
import csv
import io
import json
import threading
from collections.abc import AsyncIterator, Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from functools import partial
from typing import Annotated, Any, Literal, TypeVar

from fastapi import APIRouter, Query, Request
from fastapi.responses import StreamingResponse
from pydantic import BaseModel, ConfigDict, Field

from sleuth.api.auth import AnyKey
from sleuth.api.errors import ApiError
from sleuth.api.state import api_state
from sleuth.format.spreadsheet import safe_row
from sleuth.sdk.errors import BusyError, QueryError
from sleuth.sdk.sql import MAX_ROWS, MAX_STATEMENTS, SqlDatabase, quote_identifier
from sleuth.sdk.sql_process import IsolatedDatabase
from sleuth.server.context_files import find_context, live_version_dir

router = APIRouter()
T = TypeVar("T")
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
#: Requests reading tables at once in this process; each runs its statements one after another.
SQL_REQUESTS = 2 * MAX_STATEMENTS
#: How long one of a request's statements waits for a statement slot before the request is `busy`.
SLOT_WAIT_S = 1.0
_threads = ThreadPoolExecutor(max_workers=SQL_REQUESTS, thread_name_prefix="sleuth-sql")
_requests = threading.BoundedSemaphore(SQL_REQUESTS)


def _busy(message: str) -> ApiError:
    return ApiError(503, "busy", message, headers={"Retry-After": "1"})


async def _off_loop(work: Callable[[], T]) -> T:
    """`work` on this module's threads; 503 `busy` at once when they are all taken."""
    if not _requests.acquire(blocking=False):
        raise _busy(f"all {SQL_REQUESTS} table requests this server runs at once are in progress")
    try:
        return await asyncio.get_running_loop().run_in_executor(_threads, work)
    except BusyError as exc:
        raise _busy(str(exc)) from None
    finally:
        _requests.release()


def _database(request: Request, slug: str) -> SqlDatabase:
    path = live_version_dir(find_context(api_state(request), slug)) / "tables.sqlite"
    return IsolatedDatabase(path, wait_s=SLOT_WAIT_S)


def _visible(schema: dict[str, list[tuple[str, str]]]) -> dict[str, list[tuple[str, str]]]:
    """The tables a person browses: not the keyword index's own shadow tables."""
    return {name: cols for name, cols in schema.items() if "fts" not in name.casefold()}


def _count(db: SqlDatabase, table: str, where: str = "", params: tuple[Any, ...] = ()) -> int:
    _c, rows, _t = db.execute(f"SELECT count(*) FROM {quote_identifier(table)}{where}", params)
    return int(rows[0][0])


def _run(db: SqlDatabase, sql: str, params: tuple[Any, ...], max_rows: int) -> tuple[list[str], list[Any]]:
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


def _facet(db: SqlDatabase, table: str, column: str, where: str, params: tuple[Any, ...]) -> dict[str, Any]:
    """The most frequent values of `column` among the filtered rows, with their counts."""
    name = quote_identifier(column)
    sql = (
        f"SELECT {name}, count(*) AS n FROM {quote_identifier(table)}{where} "
        f"GROUP BY {name} ORDER BY n DESC, {name} LIMIT ?"
    )
    _names, rows = _run(db, sql, (*params, FACET_VALUES + 1), FACET_VALUES + 1)
    values = [{"value": value, "count": int(n)} for value, n in rows[:FACET_VALUES]]
    return {"column": column, "values": values, "truncated": len(rows) > FACET_VALUES}


def _table(db: SqlDatabase, name: str) -> list[str]:
    schema = _visible(db.schema())
    if name not in schema:
        raise ApiError(404, "table_not_found", f"no table {name!r} in the live version", table=name)
    return [c for c, _t in schema[name]]


@router.get("/contexts/{slug}/tables")
async def list_tables(request: Request, slug: str, _who: AnyKey) -> dict[str, Any]:
    return await _off_loop(partial(_list_tables, request, slug))


def _list_tables(request: Request, slug: str) -> dict[str, Any]:
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
async def read_table(
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
    return await _off_loop(
        partial(_read_table, request, slug, name, offset, limit, order, desc, facet, format)
    )


def _read_table(
    request: Request,
    slug: str,
    name: str,
    offset: int,
    limit: int,
    order: str | None,
    desc: bool,
    facet: list[str] | None,
    format: str,
) -> dict[str, Any] | StreamingResponse:
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


def _export(db: SqlDatabase, name: str, sql: str, params: tuple[Any, ...], format: str) -> StreamingResponse:
    """Every row `sql` selects, a page at a time (each page one statement, on this module's threads,
    under `query_db`'s caps), as CSV or as one JSON array of objects. A page that finds every slot
    taken ends the download early; the connection closes when the download ends."""

    async def pages() -> AsyncIterator[tuple[list[str], list[Any]]]:
        try:
            for offset in range(0, EXPORT_MAX_ROWS, _EXPORT_PAGE):
                page = partial(
                    _run, db, sql + " LIMIT ? OFFSET ?", (*params, _EXPORT_PAGE, offset), _EXPORT_PAGE
                )
                names, rows = await _off_loop(page)
                yield names, rows
                if len(rows) < _EXPORT_PAGE:
                    return
        finally:
            db.close()

    async def as_csv() -> AsyncIterator[str]:
        first = True
        async for names, rows in pages():
            out = io.StringIO()
            writer = csv.writer(out)
            if first:
                writer.writerow(safe_row(names))
                first = False
            writer.writerows(safe_row(row) for row in rows)  # `=cmd|…` opens as text, not a formula
            yield out.getvalue()

    async def as_rows() -> AsyncIterator[str]:
        yield "["
        first = True
        async for names, rows in pages():
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
async def run_sql(request: Request, slug: str, body: SqlRequest, _who: AnyKey) -> dict[str, Any]:
    """`{columns, rows, truncated}`: the statement run over the same hardened read-only connection as
    the SDK's `query_db` (its caps on time, values, columns and result bytes), in a statement process
    killed at the deadline; a statement that writes, attaches or calls a denied function is refused by
    that connection (`400 query_error`); every slot taken: `503 busy`."""
    return await _off_loop(partial(_run_sql, request, slug, body))


def _run_sql(request: Request, slug: str, body: SqlRequest) -> dict[str, Any]:
    db = _database(request, slug)
    try:
        try:
            names, rows, truncated = db.execute(body.sql, body.params, max_rows=body.max_rows)
        except QueryError as exc:
            raise ApiError(400, "query_error", str(exc)) from None
        return {"columns": names, "rows": [_cells(r) for r in rows], "truncated": truncated}
    finally:
        db.close()
