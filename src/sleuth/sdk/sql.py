"""Read-only SQL over a version's `tables.sqlite` (spec/runtime.md §5.4, spec/stack.md §4).

Read-only is enforced by the connection, not by inspecting the SQL text: the file is opened with
`mode=ro`, `PRAGMA query_only` is on, an authorizer allows nothing but reads, selects, a set of
functions and three read-only pragmas, attaching is limited to zero after the other scoped
contexts are attached, and a progress handler stops a statement at its deadline.
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sleuth.sdk.errors import QueryError

MAX_ROWS = 1000
TIME_LIMIT_S = 2.0
_PROGRESS_EVERY = 1000  # virtual-machine instructions between deadline checks
_ALLOWED_PRAGMAS = frozenset({"table_info", "table_xinfo", "index_list", "data_version"})
_DENIED_FUNCTIONS = frozenset({"load_extension", "readfile", "writefile", "edit", "fts3_tokenizer"})


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

    def __post_init__(self) -> None:
        self._db = sqlite3.connect(f"file:{self.path}?mode=ro&immutable=1", uri=True, check_same_thread=False)
        for schema, other in (self.attach or {}).items():
            self._db.execute(
                "ATTACH DATABASE ? AS " + quote_identifier(schema), (f"file:{other}?mode=ro&immutable=1",)
            )
        self._db.execute("PRAGMA query_only = 1")
        self._db.setlimit(sqlite3.SQLITE_LIMIT_ATTACHED, 0)
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
    ) -> tuple[list[str], list[tuple[Any, ...]], bool]:
        """(columns, rows, truncated) for one statement."""
        self._deadline = time.monotonic() + time_limit
        try:
            cursor = self._db.execute(sql, params if params is not None else ())
            rows = cursor.fetchmany(max_rows + 1)
        except sqlite3.OperationalError as exc:
            if "interrupted" in str(exc):
                raise QueryError(f"query exceeded {time_limit:.1f} s") from None
            raise QueryError(str(exc)) from None
        except (sqlite3.DatabaseError, sqlite3.Warning, sqlite3.ProgrammingError, ValueError) as exc:
            raise QueryError(str(exc)) from None
        finally:
            self._deadline = time.monotonic() + time_limit
        columns = [d[0] for d in cursor.description or []]
        truncated = len(rows) > max_rows
        cursor.close()
        return columns, rows[:max_rows], truncated

    def schema(self) -> dict[str, list[tuple[str, str]]]:
        """Every table of `main` with its (column, type) pairs."""
        tables: dict[str, list[tuple[str, str]]] = {}
        _cols, rows, _ = self.execute(
            "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' ORDER BY name"
        )
        for (name,) in rows:
            _c, info, _t = self.execute(f"PRAGMA table_info({quote_identifier(name)})")
            tables[name] = [(r[1], r[2]) for r in info]
        return tables


def quote_identifier(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'
