"""The REPL that runs inside a turn's sandbox (spec/runtime.md §4.3, spec/sandbox.md §2.2).

One globals dict and one event loop live for the whole turn. Each step is compiled with top-level
`await` allowed; a step that awaits runs as a coroutine on the persistent loop under
`asyncio.wait_for`, a plain step runs directly under an interval timer. Output goes to a capped
stream, a trailing expression is echoed, and tracebacks show the model's own lines only.
"""

from __future__ import annotations

import ast
import asyncio
import inspect
import signal
import socket
import time
import traceback
from collections.abc import Callable, Coroutine, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from sleuth.sandbox import messages
from sleuth.sandbox.messages import MAX_CALLS, MAX_FINAL_CHARS, MAX_SPANS, MAX_TRACEBACK_CHARS
from sleuth.sandbox.output import CappedStream, observation
from sleuth.sandbox.protocol import LineReader, ProtocolError, encode, recv_one, send
from sleuth.sdk.errors import HostError
from sleuth.sdk.knowledge import FinalAnswer, Knowledge, ScopedContext
from sleuth.sdk.orientation import OrientationSettings
from sleuth.sdk.primitives import primitives

#: Searches a turn remembers (each a list of at most `top_k` hits): a bound on the REPL's memory.
MAX_REMEMBERED_SEARCHES = 256


class StepTimeout(BaseException):
    """The step ran past its timeout; the REPL state is kept."""


class CpuBudgetExceeded(BaseException):
    """The turn used up its CPU budget (RLIMIT_CPU)."""


class Channel:
    """The child's end of the turn socket: blocking reads between steps, host calls during them."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.reader = LineReader()
        self.pending: list[dict[str, Any]] = []
        self._waiting: dict[int, asyncio.Future[Any]] = {}
        self._next_id = 0
        self.loop: asyncio.AbstractEventLoop | None = None

    def attach(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        loop.add_reader(self.sock.fileno(), self._on_readable)

    def _on_readable(self) -> None:
        try:
            data = self.sock.recv(1 << 16)
        except BlockingIOError:
            return
        if not data:
            raise SystemExit("channel closed")
        self.pending.extend(frame.message for frame in self.reader.feed(data))
        self._dispatch()

    def _dispatch(self) -> None:
        keep = []
        for message in self.pending:
            if message["t"] == "rpc_result" and message.get("id") in self._waiting:
                reply = messages.RpcResult.model_validate(message)
                future = self._waiting.pop(reply.id)
                if not future.done():
                    if reply.ok:
                        future.set_result(reply.result)
                    else:
                        error = reply.error or messages.RpcError(type="Error", message="")
                        future.set_exception(HostError(f"{error.type}: {error.message}"))
            else:
                keep.append(message)
        self.pending[:] = keep

    async def call(self, fn: str, args: dict[str, Any]) -> Any:
        assert self.loop is not None
        self._next_id += 1
        future: asyncio.Future[Any] = self.loop.create_future()
        self._waiting[self._next_id] = future
        send(self.sock, {"t": "rpc", "id": self._next_id, "fn": fn, "args": args})
        return await future

    def next_message(self) -> dict[str, Any]:
        return recv_one(self.sock, self.reader, self.pending)


class PendingSearch:
    """What a search returns when the model forgets `await`: awaitable, and loud about it.

    The coroutine is only made when the search is awaited, so a search that never is leaves
    nothing behind (no "coroutine was never awaited" warning)."""

    def __init__(self, name: str, start: Callable[[], Coroutine[Any, Any, Any]]) -> None:
        self._name = name
        self._start = start

    def __await__(self) -> Any:
        return self._start().__await__()

    def _hint(self) -> str:
        return f"{self._name}(...) was not awaited; write `await {self._name}(...)`"

    def __repr__(self) -> str:
        return f"<pending {self._name}(...): search functions are async; write `await {self._name}(...)`>"

    def __getattr__(self, attr: str) -> Any:
        raise AttributeError(f"{self._hint()} before using .{attr}")

    def __iter__(self) -> Any:
        raise TypeError(self._hint())

    def __len__(self) -> int:
        raise TypeError(self._hint())

    def __getitem__(self, _index: object) -> Any:
        raise TypeError(self._hint())


class Repl:
    """The persistent namespace one turn's code runs in, with the SDK bound, on one event loop."""

    def __init__(self, knowledge: Knowledge, channel: Channel | None = None) -> None:
        self.knowledge = knowledge
        self.channel = channel
        self.loop = asyncio.new_event_loop()
        asyncio.set_event_loop(self.loop)
        if channel is not None:
            channel.attach(self.loop)
        self.calls: list[dict[str, Any]] = []
        self._began: list[float] = []  # each call's start, beside `calls`: the trace lists them as issued
        self._remembered: dict[str, list[Any]] = {}  # a search's arguments → its hits, for this turn
        self.globals: dict[str, Any] = {"__name__": "__main__", "__builtins__": __builtins__}
        self._bind()
        self._known_spans = 0

    def close(self) -> None:
        """Release the SDK's readers and the loop (a sandbox simply exits; a host-side REPL closes)."""
        self.knowledge.close()
        if not self.loop.is_closed():
            self.loop.close()

    def _bind(self) -> None:
        import collections
        import datetime
        import itertools
        import json
        import math
        import re
        import statistics

        namespace = self.globals
        namespace.update(
            asyncio=asyncio,
            json=json,
            re=re,
            math=math,
            statistics=statistics,
            collections=collections,
            itertools=itertools,
            datetime=datetime,
            np=np,
        )
        for item in primitives():  # their one declaration: a search is awaited, a read is not
            bound = getattr(self.knowledge, item.name)
            traced = self._traced_search if item.kind == "search" else self._traced
            namespace[item.name] = traced(item.name, bound)
        namespace["final"] = namespace["answer"] = self.knowledge.final

    def run_on_loop(self, main: Any, *, debug: bool | None = None) -> Any:
        """`asyncio.run` in the sandbox runs on the persistent loop (models write it often)."""
        if self.loop.is_running():
            raise RuntimeError("asyncio.run() cannot be used inside a step that awaits; write `await ...`")
        return self.loop.run_until_complete(main)

    def _record(
        self,
        name: str,
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
        began: float,
        ok: bool,
        result: Any = None,
        error: BaseException | None = None,
        remembered: bool = False,
    ) -> None:
        shown = [_compact(a) for a in args] + [f"{k}={_compact(v)}" for k, v in kwargs.items()]
        self._began.append(began)
        summary = _summary(result) if ok else {}
        self.calls.append(
            {
                "fn": name,
                "args": ", ".join(shown),
                "ms": round((time.perf_counter() - began) * 1000, 2),
                "ok": ok,
                "result": {**summary, "remembered": True} if remembered else summary,
                "error": None if error is None else f"{type(error).__name__}: {str(error)[:300]}",
            }
        )

    def _issued(self) -> list[dict[str, Any]]:
        """The step's calls in the order its code made them: a call is recorded when it finishes, and
        of calls awaited together (`asyncio.gather`) the first issued need not finish first."""
        order = sorted(range(len(self.calls)), key=self._began.__getitem__)
        return [self.calls[i] for i in order]

    def _traced(self, name: str, fn: Callable[..., Any]) -> Callable[..., Any]:
        def call(*args: Any, **kwargs: Any) -> Any:
            began = time.perf_counter()
            try:
                result = fn(*args, **kwargs)
            except BaseException as exc:
                self._record(name, args, kwargs, began, False, error=exc)
                raise
            self._record(name, args, kwargs, began, True, result)
            return result

        call.__name__ = name
        call.__doc__ = fn.__doc__
        call.__signature__ = inspect.signature(fn)  # type: ignore[attr-defined]
        return call

    def _traced_search(self, name: str, fn: Callable[..., Coroutine[Any, Any, Any]]) -> Callable[..., Any]:
        """A search, traced; one asked again with the same arguments in this turn is answered from the
        turn's memory (Nexus: lookups already held are never repeated; the versions are pinned for the
        turn, so the hits are the same), its trace call marked `remembered`."""

        async def traced(*args: Any, **kwargs: Any) -> Any:
            began = time.perf_counter()
            key = f"{name}{args!r}{sorted(kwargs.items())!r}"
            if key in self._remembered:
                hits = list(self._remembered[key])
                self._record(name, args, kwargs, began, True, hits, remembered=True)
                return hits
            try:
                result = await fn(*args, **kwargs)
            except BaseException as exc:
                self._record(name, args, kwargs, began, False, error=exc)
                raise
            self._record(name, args, kwargs, began, True, result)
            if isinstance(result, list) and len(self._remembered) < MAX_REMEMBERED_SEARCHES:
                self._remembered[key] = list(result)
            return result

        def call(*args: Any, **kwargs: Any) -> PendingSearch:
            return PendingSearch(name, lambda: traced(*args, **kwargs))

        call.__name__ = name
        call.__doc__ = fn.__doc__
        call.__signature__ = inspect.signature(fn)  # type: ignore[attr-defined]
        return call

    # ------------------------------------------------------------------------------- steps
    def run_step(
        self, step: int, code: str, timeout_s: float, max_output: int, full_output_cap: int
    ) -> dict[str, Any]:
        import sys

        began, cpu_began = time.perf_counter(), time.process_time()
        stream = CappedStream(full_output_cap)
        saved = sys.stdout, sys.stderr
        sys.stdout = sys.stderr = stream
        self.calls, self._began = [], []
        error: dict[str, Any] | None = None
        final: dict[str, Any] | None = None
        filename = f"<step-{step}>"
        try:
            compiled = self._compile(code, filename)
            if compiled.co_flags & inspect.CO_COROUTINE:
                self._run_async(compiled, timeout_s)
            else:
                self._run_sync(compiled, timeout_s)
            value = self.globals.pop("__sleuth_echo__", None)
            if value is not None:
                stream.write(repr(value) + "\n")
        except FinalAnswer as done:
            answer = done.answer if done.answer is None or isinstance(done.answer, str) else str(done.answer)
            if answer is not None and len(answer) > MAX_FINAL_CHARS:
                stream.write(
                    f"[final(): the answer was cut to {MAX_FINAL_CHARS:,} of {len(answer):,} chars]\n"
                )
                answer = answer[:MAX_FINAL_CHARS]
            final = {"answer": answer, "evidence": [str(e) for e in done.evidence][:MAX_SPANS]}
        except SystemExit:
            pass
        except BaseException as exc:
            error = _describe(exc, filename)
            stream.write(error["traceback"])
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
            sys.stdout, sys.stderr = saved
        text = "".join(stream.parts)
        shown, truncated = observation(
            text, stream.total, max_output, error["traceback"].rstrip().splitlines()[-1] if error else None
        )
        spans = self.knowledge.evidence.all()
        new_spans = spans[self._known_spans :]
        self._known_spans = len(spans)
        return {
            "t": "result",
            "ok": error is None,
            "output": shown,
            "output_chars": stream.total,
            "truncated": truncated,
            "full_output": text,
            "error": error,
            "calls": self._issued()[:MAX_CALLS],
            "calls_total": len(self.calls),
            "spans": [
                {
                    "ref": s.ref,
                    "context": s.context,
                    "source_path": s.source_path,
                    "page": s.page,
                    "start": s.start,
                    "end": s.end,
                    "text": s.text,
                    "section_path": list(s.section_path),
                    "via": s.via,
                    "artifact_name": s.artifact_name,
                    "score": self.knowledge.evidence.scores.get(s.ref),
                }
                for s in new_spans
            ],
            "final": final,
            "duration_ms": round((time.perf_counter() - began) * 1000, 3),
            "cpu_ms": round((time.process_time() - cpu_began) * 1000, 3),
        }

    def _compile(self, code: str, filename: str) -> Any:
        tree = ast.parse(code, filename, "exec")
        if tree.body and isinstance(tree.body[-1], ast.Expr):
            last = tree.body[-1]
            tree.body[-1] = ast.Assign(targets=[ast.Name("__sleuth_echo__", ast.Store())], value=last.value)
            ast.copy_location(tree.body[-1], last)
            ast.fix_missing_locations(tree)
        return compile(tree, filename, "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT, dont_inherit=True)

    def _run_sync(self, compiled: Any, timeout_s: float) -> None:
        signal.setitimer(signal.ITIMER_REAL, timeout_s)
        exec(compiled, self.globals)

    def _run_async(self, compiled: Any, timeout_s: float) -> None:
        coro = eval(compiled, self.globals)
        # The itimer is a backstop for blocking calls that never yield to the loop.
        signal.setitimer(signal.ITIMER_REAL, timeout_s + 1.0)
        try:
            self.loop.run_until_complete(asyncio.wait_for(coro, timeout_s))
        except TimeoutError:
            raise StepTimeout(f"step exceeded {timeout_s:g} s") from None


def _compact(value: Any) -> str:
    """A call argument for the trace: strings cut to 200 chars, lists to their length."""
    if isinstance(value, str):
        return repr(value[:200])
    if isinstance(value, list | tuple):
        return f"[{len(value)} items]"
    return repr(value)[:200]


def _summary(result: Any) -> dict[str, Any]:
    """A call's result for the trace: counts and, for hits, `traced_hits`; never the payload
    (spec/api.md §8.5)."""
    from sleuth.sdk.types import Hit, Rows, traced_hits

    if isinstance(result, Rows):
        return {"rows": len(result), "truncated": result.truncated}
    if isinstance(result, list):
        hits = [r for r in result if isinstance(r, Hit)]
        if hits:
            return {"hits": len(result)} | traced_hits(hits)
        return {"items": len(result)}
    if result is None:
        return {}
    return {"type": type(result).__name__}


def _describe(exc: BaseException, filename: str) -> dict[str, Any]:
    frames = [f for f in traceback.extract_tb(exc.__traceback__) if f.filename.startswith("<step-")]
    lines = ["Traceback (most recent call last):\n"] if frames else []
    lines += traceback.format_list(frames)
    lines += traceback.format_exception_only(type(exc), exc)
    text = "".join(lines)
    if len(text) > MAX_TRACEBACK_CHARS:
        text = (
            text[: MAX_TRACEBACK_CHARS // 2] + "\n[… traceback cut …]\n" + text[-MAX_TRACEBACK_CHARS // 2 :]
        )
    return {"type": type(exc).__name__[:200], "message": str(exc)[:2000], "traceback": text}


def _on_alarm(_signum: int, _frame: Any) -> None:
    raise StepTimeout("step exceeded its time limit")


def _on_xcpu(_signum: int, _frame: Any) -> None:
    raise CpuBudgetExceeded("the turn used up its CPU budget")


def serve(sock: socket.socket, contexts: list[ScopedContext], ready: dict[str, Any]) -> None:
    """The sandbox main loop: announce readiness, then answer `exec` until `close`."""
    signal.signal(signal.SIGALRM, _on_alarm)
    signal.signal(signal.SIGXCPU, _on_xcpu)
    channel = Channel(sock)

    async def embed(model: str, text: str) -> npt.NDArray[np.float32]:
        result = await channel.call("embed", {"texts": [text], "model": model})
        return np.asarray(result[0], dtype=np.float32)

    async def orient(_scoped: Sequence[ScopedContext], settings: OrientationSettings) -> str:
        """The host builds the orientation: it knows the contexts' names and the turn's settings."""
        return str(await channel.call("orientation", settings.to_json()))

    knowledge = Knowledge(contexts, embed=embed)
    knowledge.orienter = orient
    repl = Repl(knowledge, channel)
    asyncio.run = repl.run_on_loop  # this process is the turn's sandbox
    send(sock, ready)
    while True:
        try:
            message = channel.next_message()
        except ProtocolError:
            return
        if message["t"] == "close":
            send(sock, {"t": "bye"})
            return
        if message["t"] != "exec":
            continue
        command = messages.Exec.model_validate(message)
        result = repl.run_step(
            command.step, command.code, command.timeout_s, command.max_output, command.full_output_cap
        )
        result["id"] = command.id
        sock.sendall(_encode_result(result))


def _encode_result(result: dict[str, Any]) -> bytes:
    """The step's result on the wire. One that cannot be sent as it is (over the line limit, or a
    value JSON cannot hold) becomes a failed step that says why: the REPL and its state live on."""
    try:
        return encode(result)
    except (ProtocolError, ValueError, TypeError) as exc:
        problem = f"the step's result could not be sent to the host ({str(exc)[:300]}); print less"
    message = f"StepResultTooLarge: {problem}"
    return encode(
        {
            **result,
            "ok": False,
            "output": (result["output"][:2_000] + "\n" + message)[-4_000:],
            "full_output": message,
            "truncated": True,
            "error": {"type": "StepResultTooLarge", "message": problem, "traceback": message},
            "calls": [],
            "calls_total": result.get("calls_total", 0),
            "spans": [],
            "final": None,
        }
    )
