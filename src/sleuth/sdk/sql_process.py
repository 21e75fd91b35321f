"""Server-side SQL in killable processes: what a client's statement can cost the server is bounded.

In a sandbox a statement runs in the sandbox's own process, whose limits bound it. In the server (the
SQL box, the table browser, MCP's `query_db`) a statement comes from a client, and SQLite's deadline
is checked between virtual-machine instructions: one `LIKE`, `instr` or `replace` over a 1 MiB value is
a single instruction that may run for many seconds. So each statement runs in a child process that
the server kills at its deadline, whatever the statement does:

- `MAX_STATEMENTS` children at most; a slot is taken without waiting (`BusyError`, the API's
  503 `busy`), so callers never queue on a lock inside the threads every route shares.
- Each child limits its own address space (`MEMORY_BYTES`) and CPU time, and keeps sorts and
  temporary tables in that memory, so the sum over all statements is bounded, disk included.
- The child runs the same hardened connection as the sandbox (`sql.ReadOnlyDatabase`: read-only,
  authorizer, value and result caps, its own deadline); the parent waits `time_limit` plus a grace
  period for the answer, reads at most `MAX_REPLY_BYTES`, and kills the child past either.

A child is reused for the next statement (it starts in ~0.1 s: the package root loads nothing).
"""

from __future__ import annotations

import atexit
import base64
import contextlib
import json
import os
import resource
import selectors
import signal
import subprocess
import sys
import threading
import time
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from sleuth.errors import Failed
from sleuth.sdk.errors import BusyError, QueryError
from sleuth.sdk.sql import (
    MAX_RESULT_BYTES,
    MAX_ROWS,
    MAX_STATEMENTS,
    TIME_LIMIT_S,
    ReadOnlyDatabase,
    read_schema,
)

#: One child's address space: SQLite's caches, a sort held in memory, one capped result, Python itself.
MEMORY_BYTES = 512 * 1024 * 1024
#: One child's CPU seconds over its life; past it the kernel ends it and the next statement starts a new one.
CPU_SECONDS = 300
#: How long past its own deadline a statement may take to answer before its process is killed.
GRACE_S = 2.0
#: The largest answer read from a child: a result's values are capped at `MAX_RESULT_BYTES` as JSON, and
#: each row adds its brackets and commas.
MAX_REPLY_BYTES = 4 * MAX_RESULT_BYTES + 64 * 1024
_OPEN_DATABASES = 4  # connections a child keeps open (versions are immutable, so reuse is safe)

Result = tuple[list[str], list[tuple[Any, ...]], bool]


# ------------------------------------------------------------------------------------------ parent
@dataclass
class _Child:
    process: subprocess.Popen[bytes]
    statements: int = 0

    @classmethod
    def start(cls) -> _Child:
        process = subprocess.Popen(
            [sys.executable, "-P", "-m", "sleuth.sdk.sql_process"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            cwd="/",
            start_new_session=True,  # a Ctrl-C to the server's terminal is the server's to handle
        )
        return cls(process)

    def alive(self) -> bool:
        return self.process.poll() is None

    def kill(self) -> None:
        with contextlib.suppress(ProcessLookupError):
            self.process.kill()
        for pipe in (self.process.stdin, self.process.stdout):
            if pipe is not None:
                with contextlib.suppress(OSError):
                    pipe.close()
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.process.wait(timeout=5)

    def ask(self, request: dict[str, Any], wait_s: float) -> dict[str, Any]:
        """Send one request and read its one-line answer within `wait_s`; `_Lost` otherwise."""
        stdin, stdout = self.process.stdin, self.process.stdout
        assert stdin is not None and stdout is not None
        try:
            stdin.write(json.dumps(request).encode() + b"\n")
            stdin.flush()
        except OSError:
            raise _Lost("the statement process is gone") from None
        line = _read_line(stdout, time.monotonic() + wait_s, MAX_REPLY_BYTES)
        self.statements += 1
        answer: dict[str, Any] = json.loads(line)
        return answer


class _Lost(Failed):
    """The child did not answer in time, answered too much, or died."""


def _read_line(stream: IO[bytes], deadline: float, cap: int) -> bytes:
    fd = stream.fileno()
    chunks: list[bytes] = []
    size = 0
    with selectors.DefaultSelector() as selector:
        selector.register(fd, selectors.EVENT_READ)
        while True:
            left = deadline - time.monotonic()
            if left <= 0 or not selector.select(left):
                raise _Lost("timeout")
            chunk = os.read(fd, 1 << 16)
            if not chunk:
                raise _Lost("the statement process ended")
            chunks.append(chunk)
            size += len(chunk)
            if chunk.endswith(b"\n"):
                return b"".join(chunks)
            if size > cap:
                raise _Lost("oversize")


@dataclass
class StatementPool:
    """Up to `size` statement processes, shared by every server-side caller in this process."""

    size: int = MAX_STATEMENTS
    _slots: threading.BoundedSemaphore = field(init=False)
    _idle: list[_Child] = field(default_factory=list, init=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, init=False)

    def __post_init__(self) -> None:
        self._slots = threading.BoundedSemaphore(self.size)

    def run(
        self,
        path: Path,
        attach: Mapping[str, Path] | None,
        sql: str,
        params: Sequence[Any] | Mapping[str, Any] | None = None,
        *,
        max_rows: int = MAX_ROWS,
        time_limit: float = TIME_LIMIT_S,
        max_bytes: int = MAX_RESULT_BYTES,
        wait_s: float = 0.0,
    ) -> Result:
        """(columns, rows, truncated) of one statement; `QueryError` for a refused, failed or overlong
        one; `BusyError` when every slot is taken (after `wait_s`, 0: at once)."""
        taken = self._slots.acquire(timeout=wait_s) if wait_s > 0 else self._slots.acquire(blocking=False)
        if not taken:
            raise BusyError(
                f"all {self.size} SQL statement slots of this server are in use; try again in a moment"
            )
        try:
            child = self._borrow()
            request = {
                "path": str(path),
                "attach": {k: str(v) for k, v in (attach or {}).items()},
                "sql": sql,
                "params": _encoded_params(params),
                "max_rows": max_rows,
                "time_limit": time_limit,
                "max_bytes": max_bytes,
            }
            try:
                answer = child.ask(request, time_limit + GRACE_S)
            except (_Lost, ValueError) as exc:
                child.kill()
                if str(exc) == "oversize":
                    raise QueryError(f"the result is over {MAX_REPLY_BYTES} bytes") from None
                raise QueryError(f"query exceeded {time_limit:.1f} s (the statement was stopped)") from None
            self._give_back(child)
        finally:
            self._slots.release()
        if "error" in answer:
            raise QueryError(str(answer["error"]))
        return (
            list(answer["columns"]),
            [tuple(_decoded(v) for v in r) for r in answer["rows"]],
            answer["truncated"],
        )

    def _borrow(self) -> _Child:
        with self._lock:
            while self._idle:
                child = self._idle.pop()
                if child.alive():
                    return child
                child.kill()
        return _Child.start()

    def _give_back(self, child: _Child) -> None:
        if not child.alive():
            child.kill()
            return
        with self._lock:
            self._idle.append(child)

    def close(self) -> None:
        with self._lock:
            idle, self._idle = self._idle, []
        for child in idle:
            child.kill()


_shared: StatementPool | None = None
_shared_lock = threading.Lock()


def shared_pool() -> StatementPool:
    """The process's one pool: its size bounds every server-side statement at once."""
    global _shared
    with _shared_lock:
        if _shared is None:
            _shared = StatementPool()
            atexit.register(_shared.close)
        return _shared


@dataclass
class IsolatedDatabase:
    """`sql.ReadOnlyDatabase`'s interface, each statement in a pooled, killable process."""

    path: Path
    attach: Mapping[str, Path] | None = None
    pool: StatementPool = field(default_factory=shared_pool)
    wait_s: float = 0.0  # how long a statement waits for a slot (a download's later pages wait a little)

    def execute(
        self,
        sql: str,
        params: Sequence[Any] | Mapping[str, Any] | None = None,
        max_rows: int = MAX_ROWS,
        time_limit: float = TIME_LIMIT_S,
        max_bytes: int = MAX_RESULT_BYTES,
    ) -> Result:
        return self.pool.run(
            self.path, self.attach, sql, params, max_rows=max_rows, time_limit=time_limit,
            max_bytes=max_bytes, wait_s=self.wait_s,
        )  # fmt: skip

    def schema(self) -> dict[str, list[tuple[str, str]]]:
        return read_schema(self)

    def close(self) -> None:
        """Nothing to close: the connections live in the pooled processes."""


def _encoded_params(params: Sequence[Any] | Mapping[str, Any] | None) -> Any:
    if params is None:
        return []
    if isinstance(params, Mapping):
        return {str(k): _encoded(v) for k, v in params.items()}
    if isinstance(params, str | bytes):
        raise QueryError("params must be a list of values, or a mapping of names to values")
    return [_encoded(v) for v in params]


def _encoded(value: Any) -> Any:
    """A value as JSON carries it; a blob as `{"b": base64}` (no SQL value is a JSON object)."""
    if isinstance(value, bytes | bytearray | memoryview):
        return {"b": base64.b64encode(bytes(value)).decode()}
    if value is None or isinstance(value, str | int | float):
        return value
    raise QueryError(
        f"a parameter of type {type(value).__name__} cannot be bound; use str, int, float or None"
    )


def _decoded(value: Any) -> Any:
    if isinstance(value, dict):
        return base64.b64decode(value["b"])
    return value


# ------------------------------------------------------------------------------------------- child
def _limit_self() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY_BYTES, MEMORY_BYTES))
    resource.setrlimit(resource.RLIMIT_CPU, (CPU_SECONDS, CPU_SECONDS + 5))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    signal.signal(signal.SIGINT, signal.SIG_IGN)


def _answer(databases: OrderedDict[str, ReadOnlyDatabase], request: dict[str, Any]) -> dict[str, Any]:
    attach = {k: Path(v) for k, v in request["attach"].items()}
    key = json.dumps([request["path"], sorted(request["attach"].items())])
    db = databases.pop(key, None)
    try:
        if db is None:
            db = ReadOnlyDatabase(Path(request["path"]), attach=attach, memory_temp=True)
        databases[key] = db
        while len(databases) > _OPEN_DATABASES:
            databases.popitem(last=False)[1].close()
        params = request["params"]
        bound = (
            {k: _decoded(v) for k, v in params.items()}
            if isinstance(params, dict)
            else [_decoded(v) for v in params]
        )
        columns, rows, truncated = db.execute(
            request["sql"], bound, max_rows=request["max_rows"], time_limit=request["time_limit"],
            max_bytes=request["max_bytes"],
        )  # fmt: skip
    except QueryError as exc:
        return {"error": str(exc)}
    except MemoryError:
        return {"error": f"the statement needed more than {MEMORY_BYTES // 2**20} MiB; select less"}
    except Exception as exc:  # a file that is not a database, a version removed meanwhile
        return {"error": f"{type(exc).__name__}: {exc}"}
    return {"columns": columns, "rows": [[_encoded(v) for v in row] for row in rows], "truncated": truncated}


def main() -> None:
    """The child: one JSON request per line on stdin, one JSON answer per line on stdout."""
    _limit_self()
    databases: OrderedDict[str, ReadOnlyDatabase] = OrderedDict()
    out = sys.stdout.buffer
    for line in sys.stdin.buffer:
        try:
            answer = _answer(databases, json.loads(line))
            reply = json.dumps(answer).encode()
        except MemoryError:
            reply = json.dumps({"error": f"the result needed more than {MEMORY_BYTES // 2**20} MiB"}).encode()
        out.write(reply + b"\n")
        out.flush()


if __name__ == "__main__":
    main()
