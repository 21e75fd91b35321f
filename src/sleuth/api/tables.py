"""Routes: a context's SQL tables for the console's table browser (issue 14, item 3), paged and sorted.

Read through the SDK's hardened read-only connection (`sdk.sql.ReadOnlyDatabase`); a table or column
named in a request must be one the version has (looked up, never interpolated unchecked), and every
value is a bound parameter.
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Query, Request

from sleuth.api.auth import AnyKey
from sleuth.api.context_files import find_context, live_version_dir
from sleuth.api.errors import ApiError
from sleuth.api.state import api_state
from sleuth.sdk.errors import QueryError
from sleuth.sdk.sql import ReadOnlyDatabase, quote_identifier

router = APIRouter()
PAGE_MAX = 500


def _database(request: Request, slug: str) -> ReadOnlyDatabase:
    return ReadOnlyDatabase(live_version_dir(find_context(api_state(request), slug)) / "tables.sqlite")


def _visible(schema: dict[str, list[tuple[str, str]]]) -> dict[str, list[tuple[str, str]]]:
    """The tables a person browses: not the keyword index's own shadow tables."""
    return {name: cols for name, cols in schema.items() if "fts" not in name.casefold()}


def _count(db: ReadOnlyDatabase, table: str) -> int:
    _c, rows, _t = db.execute(f"SELECT count(*) FROM {quote_identifier(table)}")
    return int(rows[0][0])


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


@router.get("/contexts/{slug}/tables/{name}")
def read_table(
    request: Request,
    slug: str,
    name: str,
    _who: AnyKey,
    offset: Annotated[int, Query(ge=0, le=10_000_000)] = 0,
    limit: Annotated[int, Query(ge=1, le=PAGE_MAX)] = 50,
    order: str | None = None,
    desc: bool = False,
) -> dict[str, Any]:
    db = _database(request, slug)
    try:
        schema = _visible(db.schema())
        if name not in schema:
            raise ApiError(404, "table_not_found", f"no table {name!r} in the live version", table=name)
        columns = [c for c, _t in schema[name]]
        if order is not None and order not in columns:
            raise ApiError(400, "invalid_request", f"order: no column {order!r} in {name}", field="order")
        sql = f"SELECT * FROM {quote_identifier(name)}"
        if order is not None:
            sql += f" ORDER BY {quote_identifier(order)} {'DESC' if desc else 'ASC'}"
        try:
            total = _count(db, name)
            names, rows, _truncated = db.execute(sql + " LIMIT ? OFFSET ?", (limit, offset), max_rows=limit)
        except QueryError as exc:
            raise ApiError(400, "query_error", str(exc)) from None
        return {
            "name": name,
            "columns": names,
            "rows": [list(r) for r in rows],
            "total": total,
            "offset": offset,
            "limit": limit,
            "order": order,
            "desc": desc,
        }
    finally:
        db.close()
