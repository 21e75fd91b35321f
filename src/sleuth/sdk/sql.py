"""Read-only SQL over a version's `tables.sqlite` (spec/runtime.md §5.4, spec/stack.md §4).

Read-only is enforced by the connection, not by inspecting the SQL text: the file is opened with
`mode=ro`, `PRAGMA query_only` is on, an authorizer allows nothing but reads, selects, a set of
functions and three read-only pragmas, attaching is limited to zero after the other scoped
contexts are attached, and a progress handler stops a statement at its deadline.

Memory is bounded by caps, not by time: one VM instruction (`zeroblob(20000000)`) can allocate any size
before a deadline check runs. SQLite itself refuses any string or blob over `MAX_VALUE_BYTES` and any
result over `MAX_RESULT_COLUMNS` columns, so one row holds at most their product; rows are fetched one at a
time and counted, and the result stops (`truncated`) at `MAX_ROWS` rows or `MAX_RESULT_BYTES` bytes of
values; at most `MAX_STATEMENTS` statements run at once in one process. A statement's memory is thus capped
whatever its SQL, in the server (MCP's `query_db`, the table browser) as in a sandbox, which runs this same
code. SQLite's `hard_heap_limit` is not used: it is process-wide, so a hostile statement would make the
server's own databases fail instead of itself.
"""

from __future__ import annotations

import sqlite3
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from json.encoder import encode_basestring
from pathlib import Path
from typing import Any, Protocol

from sleuth.sdk.errors import QueryError

MAX_ROWS = 1000
TIME_LIMIT_S = 2.0
#: SQLITE_LIMIT_LENGTH: the largest string or blob a statement may read or make. Far above a compiled
#: table's cells (a row's provenance, an artifact's source list), far below what hurts a server.
MAX_VALUE_BYTES = 1024 * 1024
#: SQLITE_LIMIT_COLUMN: a typed table has at most 64 declared columns plus 4 of its own.
MAX_RESULT_COLUMNS = 100
#: What the values of one result may add up to, as JSON strings (escapes counted: a NUL is 6 characters,
#: so a blob of zeros cannot hide a sixfold reply) and 8 for any other value.
MAX_RESULT_BYTES = 2 * 1024 * 1024
#: Statements running at once in this process: the per-statement caps times this bounds them all.
MAX_STATEMENTS = 2
_PROGRESS_EVERY = 1000  # virtual-machine instructions between deadline checks
_ALLOWED_PRAGMAS = frozenset({"table_info", "table_xinfo", "index_list", "data_version"})
_DENIED_FUNCTIONS = frozenset({"load_extension", "readfile", "writefile", "edit", "fts3_tokenizer"})
_statements = threading.BoundedSemaphore(MAX_STATEMENTS)


def _authorizer(
    action: int, arg1: str | None, arg2: str | None, _db: str | None, _trigger: str | None
) -> int:
    if action in (sqlite3.SQLITE_SELECT, sqlite3.SQLITE_READ, sqlite3.SQLITE_RECURSIVE):
        return sqlite3.SQLITE_OK
    if action == sqlite3.SQLITE_FUNCTION:
        return sqlite3.SQLITE_DENY if (arg2 or "").lower() in _DENIED_FUNCTIONS else sqlite3.SQLITE_OK
    if action == sqlite3.SQLITE_PRAGMA:
        return sqlite3.SQLITE_OK if (arg1 or "").lower() in _ALLOWED_PRAGMAS else sqlite3.SQLITE_DENY
    if action == sqlite3.SQLITE_UPDATE and arg1 == "sqlite_master":
        # FTS5's virtual-table constructor asks for this; query_only and mode=ro still block writes.
        return sqlite3.SQLITE_OK
    return sqlite3.SQLITE_DENY


@dataclass
class ReadOnlyDatabase:
    """One hardened connection: `main` is the queried context, others are attached by slug."""

    path: Path
    attach: Mapping[str, Path] | None = None
    #: Sorts and temporary tables in memory, not in files: where the process's memory is limited (a
    #: statement process), so is what a statement may spill, disk included.
    memory_temp: bool = False

    def __post_init__(self) -> None:
        self._db = sqlite3.connect(f"file:{self.path}?mode=ro&immutable=1", uri=True, check_same_thread=False)
        for schema, other in (self.attach or {}).items():
            self._db.execute(
                "ATTACH DATABASE ? AS " + quote_identifier(schema), (f"file:{other}?mode=ro&immutable=1",)
            )
        if self.memory_temp:
            self._db.execute("PRAGMA temp_store = MEMORY")
        self._db.execute("PRAGMA query_only = 1")
        self._db.setlimit(sqlite3.SQLITE_LIMIT_ATTACHED, 0)
        self._db.setlimit(sqlite3.SQLITE_LIMIT_LENGTH, MAX_VALUE_BYTES)
        self._db.setlimit(sqlite3.SQLITE_LIMIT_COLUMN, MAX_RESULT_COLUMNS)
        self._db.set_authorizer(_authorizer)
        self._deadline = 0.0
        self._db.set_progress_handler(self._progress, _PROGRESS_EVERY)

    def _progress(self) -> int:
        return 1 if time.monotonic() > self._deadline else 0

    def close(self) -> None:
        self._db.close()

    def execute(
        self,
        sql: str,
        params: Sequence[Any] | Mapping[str, Any] | None = None,
        max_rows: int = MAX_ROWS,
        time_limit: float = TIME_LIMIT_S,
        max_bytes: int = MAX_RESULT_BYTES,
    ) -> tuple[list[str], list[tuple[Any, ...]], bool]:
        """(columns, rows, truncated) for one statement: rows stop at `max_rows` rows or `max_bytes`
        bytes of values (`truncated`); a first row alone over `max_bytes` is an error, not an empty result."""
        with _statements:
            self._deadline = time.monotonic() + time_limit
            cursor: sqlite3.Cursor | None = None
            try:
                cursor = self._db.execute(sql, params if params is not None else ())
                columns = [d[0] for d in cursor.description or []]
                rows, truncated = _fetch(cursor, max_rows, max_bytes)
            except sqlite3.OperationalError as exc:
                if "interrupted" in str(exc):
                    raise QueryError(f"query exceeded {time_limit:.1f} s") from None
                raise QueryError(_explained(str(exc))) from None
            except (sqlite3.DatabaseError, sqlite3.Warning, sqlite3.ProgrammingError, ValueError) as exc:
                raise QueryError(_explained(str(exc))) from None
            finally:
                if cursor is not None:
                    cursor.close()
                self._deadline = time.monotonic() + time_limit
        return columns, rows, truncated

    def schema(self) -> dict[str, list[tuple[str, str]]]:
        return read_schema(self)


class SqlDatabase(Protocol):
    """What reads a version's tables: this process's connection, or one in a statement process
    (`sql_process.IsolatedDatabase`, for statements a server runs for its clients)."""

    def execute(
        self,
        sql: str,
        params: Sequence[Any] | Mapping[str, Any] | None = None,
        max_rows: int = MAX_ROWS,
        time_limit: float = TIME_LIMIT_S,
        max_bytes: int = MAX_RESULT_BYTES,
    ) -> tuple[list[str], list[tuple[Any, ...]], bool]: ...

    def schema(self) -> dict[str, list[tuple[str, str]]]: ...

    def close(self) -> None: ...


def read_schema(db: SqlDatabase) -> dict[str, list[tuple[str, str]]]:
    """Every table and view of `main` with its (column, type) pairs; the tables that store the
    `_cells` view (`_cells_*`) are left out, as the view is what a query reads."""
    tables: dict[str, list[tuple[str, str]]] = {}
    _cols, rows, _ = db.execute(
        "SELECT name FROM sqlite_master WHERE type IN ('table', 'view') AND name NOT LIKE 'sqlite_%' "
        "AND name NOT LIKE '\\_cells\\_%' ESCAPE '\\' ORDER BY name"
    )
    for (name,) in rows:
        _c, info, _t = db.execute(f"PRAGMA table_info({quote_identifier(name)})")
        tables[name] = [(r[1], r[2]) for r in info]
    return tables


def _fetch(cursor: sqlite3.Cursor, max_rows: int, max_bytes: int) -> tuple[list[tuple[Any, ...]], bool]:
    """Rows one at a time, counting their values' bytes, so a result never grows past its caps."""
    rows: list[tuple[Any, ...]] = []
    size = 0
    while (row := cursor.fetchone()) is not None:
        if len(rows) >= max_rows:
            return rows, True
        size += sum(_encoded_size(v) for v in row)
        if size > max_bytes:
            if not rows:
                raise QueryError(
                    f"one row holds {size} bytes, over query_db's {max_bytes}-byte result cap; select "
                    "fewer or shorter values (substr, length)"
                )
            return rows, True
        rows.append(row)
    return rows, False


def _encoded_size(value: Any) -> int:
    """A value's length as a JSON string (blobs as their lossy UTF-8 text, the form results take)."""
    if isinstance(value, bytes):
        value = value.decode("utf-8", "replace")
    return len(encode_basestring(value)) if isinstance(value, str) else 8


def _explained(message: str) -> str:
    """SQLite's refusal, with the cap behind it when one of ours made it."""
    if "too big" in message:
        return f"{message}: query_db caps any one value at {MAX_VALUE_BYTES} bytes"
    if message == "not authorized":
        return (
            "not authorized: query_db only reads (one SELECT or WITH statement); writes, ATTACH, most "
            "PRAGMAs and functions such as load_extension are refused"
        )
    if "too many columns" in message:
        return f"{message}: query_db caps a result at {MAX_RESULT_COLUMNS} columns"
    return message


def quote_identifier(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'
