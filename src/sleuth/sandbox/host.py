"""The host side of the sandbox: start the zygote, open a sandbox per turn, run steps, answer host
function calls from a registry, and kill by pidfd when anything goes wrong.

The registry is the boundary (spec/sandbox.md §5): code in the sandbox can write any message to its
channel, so the host runs only names it registered, with validated arguments.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from sleuth.errors import Failed, Unavailable
from sleuth.sandbox import messages
from sleuth.sandbox.limits import BudgetExceeded, BudgetMeter, Limits
from sleuth.sandbox.messages import FinalReport, SpanReport, Spawn, Spawned, ZygoteReady
from sleuth.sandbox.protocol import Frame, LineReader, ProtocolError, encode, send


class SandboxUnavailable(Unavailable, RuntimeError):
    """The host cannot provide the configured isolation floor (`503 sandbox_unavailable`)."""


class SandboxDied(Failed, RuntimeError):
    """The sandbox was killed (hard timeout, out of memory, protocol violation); its state is lost."""


HostFunction = Callable[[dict[str, Any]], Any]


def embed_function(args: dict[str, Any], *, threads: int | None) -> list[list[float]]:
    """`embed`: ≤ 96 texts of ≤ 8,000 chars with a served model id → unit vectors, on the embedder's
    `threads`."""
    from sleuth.models.embedder import EmbedderError, get_embedder

    texts, model = args.get("texts"), args.get("model", "default")
    if not isinstance(texts, list) or not 1 <= len(texts) <= 96:
        raise ValueError("texts must be a list of 1-96 strings")
    if not all(isinstance(t, str) and len(t) <= 8000 for t in texts):
        raise ValueError("each text must be a string of at most 8,000 characters")
    if not isinstance(model, str):
        raise ValueError("model must be a string")
    try:
        embedder = get_embedder(model, threads=threads)
    except EmbedderError as exc:
        raise ValueError(str(exc)) from None
    vectors: list[list[float]] = embedder.embed(texts).tolist()
    return vectors


def default_registry(embed_threads: int | None) -> dict[str, HostFunction]:
    """The host functions every turn gets, `embed` on `embed_threads` (the `embed_threads` setting)."""
    return {"embed": partial(embed_function, threads=embed_threads)}


def fan_out(embed_threads: int | None) -> dict[str, int]:
    """How many threads each host function that fans out may keep busy at once: `embed` runs on the
    embedder's onnxruntime pool (`embed_threads`, else every core)."""
    return {"embed": embed_threads or os.cpu_count() or 1}


MAX_RESULT_BYTES = 1 << 20


@dataclass
class StepResult:
    """One step as the host accepted it: every field typed and cut to the host's own limits."""

    ok: bool
    output: str
    output_chars: int
    truncated: bool
    full_output: str
    error: dict[str, Any] | None
    calls: list[dict[str, Any]]
    spans: list[SpanReport]
    final: FinalReport | None
    duration_ms: float
    round_trip_ms: float
    rpc_calls: list[dict[str, Any]] = field(default_factory=list)


class Sandbox:
    """One turn's sandbox. Use as a context manager, or call `close()`; it is killed either way.

    `meter` charges the host's work for this sandbox (host function calls, their bytes and time) to
    the turn's `HostBudget`, each fanning function's time times its threads (`fan_out`, the host's);
    a turn that restarts its sandbox passes the same meter on.
    """

    def __init__(
        self,
        sock: socket.socket,
        pid: int,
        limits: Limits,
        registry: dict[str, HostFunction],
        fan_out: dict[str, int],
        meter: BudgetMeter | None = None,
    ) -> None:
        self._sock = sock
        self.pid = pid
        try:
            self._pidfd = os.pidfd_open(pid) if pid > 0 else -1
        except ProcessLookupError:  # it died during set-up; its `ready` message says why
            self._pidfd = -1
        self.limits = limits
        self._registry = registry
        self.meter = meter or BudgetMeter()
        self._fan_out = fan_out
        self._reader = LineReader()
        self._pending: list[Frame] = []
        self._step = 0
        self.ready: dict[str, Any] = {}
        self.alive = True

    def __enter__(self) -> Sandbox:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _read(self, deadline: float) -> Frame:
        while not self._pending:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise TimeoutError
            self._sock.settimeout(remaining)
            try:
                data = self._sock.recv(1 << 20)
            except TimeoutError:
                raise
            except OSError as exc:
                raise ProtocolError(f"channel error: {exc}") from None
            if not data:
                raise ProtocolError("channel closed")
            self._pending.extend(self._reader.feed(data))
        return self._pending.pop(0)

    def wait_ready(self, timeout_s: float = 30.0) -> dict[str, Any]:
        try:
            frame = self._read(time.monotonic() + timeout_s)
            message = messages.parse(frame.message)
        except (TimeoutError, ProtocolError) as exc:
            self.kill()
            raise SandboxUnavailable(f"the sandbox did not start: {exc}") from None
        if not isinstance(message, messages.Ready) or not message.ok:
            self.kill()
            missing = ", ".join(getattr(message, "missing", None) or []) or "unknown"
            details = frame.message.get("disabled", {})
            raise SandboxUnavailable(
                f"sandbox below the {self.limits.floor!r} floor; missing: {missing}; "
                f"details: {json.dumps(details)[:2000]}"
            )
        self.ready = frame.message
        return frame.message

    def exec(self, code: str, timeout_s: float | None = None, max_output: int | None = None) -> StepResult:
        """Run one step; raises `SandboxDied` when the sandbox had to be killed, `BudgetExceeded`
        (after killing it) when the step used up one of the turn's host budgets."""
        if not self.alive:
            raise SandboxDied("the sandbox is no longer running")
        self._step += 1
        timeout = self.limits.step_timeout_s if timeout_s is None else timeout_s
        shown = max_output or self.limits.max_output
        began = time.monotonic()
        deadline = began + timeout + self.limits.hard_kill_grace_s
        rpc_calls: list[dict[str, Any]] = []
        try:
            command = messages.Exec(
                id=self._step,
                step=self._step,
                code=code,
                timeout_s=timeout,
                max_output=shown,
                full_output_cap=self.limits.full_output_cap,
            )
            send(self._sock, messages.wire(command))
            while True:
                cpu_began = time.thread_time()  # waiting costs no CPU; decoding and checking do
                frame = self._read(deadline)
                message = messages.parse(frame.message)
                self.meter.charge("host_cpu_s", time.thread_time() - cpu_began)
                if isinstance(message, messages.Rpc):
                    rpc_calls.append(self._answer_rpc(message, frame.size))
                elif isinstance(message, messages.Result) and message.id == self._step:
                    break
                else:
                    raise ProtocolError(f"unexpected message {message.t!r}")
        except TimeoutError:
            self.kill()
            raise SandboxDied(
                f"step {self._step} ran past its timeout plus {self.limits.hard_kill_grace_s:g} s "
                "and the sandbox was killed; all variables are lost"
            ) from None
        except (ProtocolError, OSError) as exc:
            self.kill()
            raise SandboxDied(
                f"the sandbox broke its channel ({exc}) and was killed; all variables are lost"
            ) from None
        except BudgetExceeded:
            self.kill()
            raise
        # The REPL already cut the output; a hostile sandbox may not have, so the host cuts again.
        notice = 1_000  # room for the truncation notice and the error line after the cut
        return StepResult(
            ok=message.ok,
            output=message.output[: shown + notice],
            output_chars=message.output_chars,
            truncated=message.truncated or len(message.output) > shown + notice,
            full_output=message.full_output[: self.limits.full_output_cap],
            error=None if message.error is None else message.error.model_dump(),
            calls=[c.model_dump() for c in message.calls],
            spans=list(message.spans),
            final=message.final,
            duration_ms=message.duration_ms,
            round_trip_ms=(time.monotonic() - began) * 1000,
            rpc_calls=rpc_calls,
        )

    def _answer_rpc(self, message: messages.Rpc, size: int) -> dict[str, Any]:
        """Answer one host function call; every call, rejected ones too, is charged to the budget."""
        self.meter.charge("rpc_calls", 1)
        self.meter.charge("rpc_bytes", size)
        fn, call_id, args = message.fn, message.id, message.args
        began, cpu_began = time.monotonic(), time.thread_time()
        handler = self._registry.get(fn)
        if handler is None:
            error = messages.RpcError(type="HostError", message=f"no such host function: {fn[:80]!r}")
            reply = messages.RpcResult(id=call_id, ok=False, error=error)
        elif not isinstance(args, dict):
            error = messages.RpcError(type="HostError", message="arguments must be a JSON object")
            reply = messages.RpcResult(id=call_id, ok=False, error=error)
        else:
            try:
                result = handler(args)
                if len(json.dumps(result)) > MAX_RESULT_BYTES:
                    raise ValueError("result exceeds 1 MiB")
                reply = messages.RpcResult(id=call_id, ok=True, result=result)
            except BudgetExceeded:
                raise
            except Exception as exc:
                error = messages.RpcError(type=type(exc).__name__, message=str(exc)[:500])
                reply = messages.RpcResult(id=call_id, ok=False, error=error)
        data = encode(messages.wire(reply))
        # The calling thread's CPU clock misses work done on other threads (onnxruntime's pool runs
        # an embedding on every core), so a function that fans out is charged its wall time × threads.
        wall, cpu = time.monotonic() - began, time.thread_time() - cpu_began
        spent = max(wall * self._fan_out.get(fn, 1), cpu)
        self.meter.charge("host_cpu_s", spent)
        self.meter.charge("rpc_bytes", len(data))
        self._sock.sendall(data)
        return {"fn": fn, "ok": reply.ok, "ms": round(spent * 1000, 2)}

    def kill(self) -> None:
        if self._pidfd >= 0:
            with contextlib.suppress(ProcessLookupError):
                signal.pidfd_send_signal(self._pidfd, signal.SIGKILL)
            os.close(self._pidfd)
            self._pidfd = -1
        self.alive = False
        self._sock.close()

    def close(self) -> None:
        """Ask politely, then kill by pidfd regardless (spec/sandbox.md §4)."""
        if not self.alive:
            return
        try:
            send(self._sock, messages.wire(messages.Close()))
            self._read(time.monotonic() + 1.0)  # `bye`, or whatever it sends: it is killed next
        except (TimeoutError, ProtocolError, OSError):
            pass
        self.kill()


class SandboxHost:
    """Owns the zygote; `start_turn` opens a fresh sandbox over the given context versions.

    Safe to share between threads (the API runs several turns at once). The spawn request and its reply
    on the one control socket are taken under a lock; the new sandbox's set-up, the slow part, is
    awaited outside it, so starts overlap. The zygote itself is started on a thread the host owns,
    because it dies with the *thread* that started it (PR_SET_PDEATHSIG): a short-lived worker thread
    must never be the one to start it.

    `embed_threads` is the process's `embed_threads` setting: the `embed` function runs on that many
    threads and each sandbox's budget is charged for them (None, the setting's default: every core).
    """

    def __init__(
        self,
        limits: Limits | None = None,
        registry: dict[str, HostFunction] | None = None,
        *,
        embed_threads: int | None = None,
    ) -> None:
        self.limits = limits or Limits()
        self.registry = dict(default_registry(embed_threads) if registry is None else registry)
        self.fan_out = fan_out(embed_threads)
        self._control: socket.socket | None = None
        self._process: subprocess.Popen[bytes] | None = None
        self._lock = threading.Lock()
        self._starter: ThreadPoolExecutor | None = None
        self.info: dict[str, Any] = {}

    def __enter__(self) -> SandboxHost:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _zygote(self) -> socket.socket:
        """The control socket of a running zygote, (re)started on the host's own thread if needed.
        Called with `_lock` held."""
        if self._control is not None and self._process is not None and self._process.poll() is None:
            return self._control
        if self._control is not None:  # it died: end what is left of it before starting another
            self._control.close()
            self._control = None
        if self._starter is None:
            self._starter = ThreadPoolExecutor(max_workers=1, thread_name_prefix="sleuth-zygote")
        return self._starter.submit(self._start_zygote).result()

    def _start_zygote(self) -> socket.socket:
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        env = {
            "PATH": "/usr/bin:/bin",
            "LANG": "C.UTF-8",
            "PYTHONDONTWRITEBYTECODE": "1",
            "OPENBLAS_NUM_THREADS": "1",
            "OMP_NUM_THREADS": "1",
            "MKL_NUM_THREADS": "1",
            "MALLOC_ARENA_MAX": "2",
        }
        for key in ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE"):  # needed by this CPU's OpenBLAS, not secrets
            if key in os.environ:
                env[key] = os.environ[key]
        self._process = subprocess.Popen(
            [sys.executable, "-m", "sleuth.sandbox.zygote", str(theirs.fileno())],
            pass_fds=[theirs.fileno()],
            env=env,
            stdin=subprocess.DEVNULL,
            cwd="/",
        )
        theirs.close()
        ours.settimeout(60)
        try:
            hello = ZygoteReady.model_validate_json(ours.recv(1 << 16))
        except (OSError, ValidationError):
            ours.close()
            raise SandboxUnavailable("the sandbox zygote did not start") from None
        self.info = hello.model_dump()
        self._control = ours
        return ours

    def start_turn(
        self,
        contexts: dict[str, Path],
        limits: Limits | None = None,
        registry: dict[str, HostFunction] | None = None,
        meter: BudgetMeter | None = None,
    ) -> Sandbox:
        """A fresh sandbox over the given versions. `registry` replaces the host's functions for this
        turn only (the agent wraps them to record results for replay); `meter` is the turn's budget."""
        limits = limits or self.limits
        registry = self.registry if registry is None else registry
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        message = Spawn(
            turn=time.monotonic_ns(),
            limits=limits.to_json(),
            contexts={slug: str(Path(p).resolve()) for slug, p in contexts.items()},
            host_functions=sorted(registry),
        )
        try:
            with self._lock:
                control = self._zygote()
                socket.send_fds(control, [message.model_dump_json().encode()], [theirs.fileno()])
                reply = Spawned.model_validate_json(control.recv(1 << 16))
        except (OSError, ValidationError) as exc:
            ours.close()
            why = exc if isinstance(exc, OSError) else "its reply was not a `spawned` message"
            raise SandboxUnavailable(f"the sandbox zygote is not answering: {why}") from None
        finally:
            theirs.close()
        if reply.turn != message.turn or reply.pid <= 0:
            ours.close()
            raise SandboxUnavailable("the zygote could not fork a sandbox")
        sandbox = Sandbox(ours, reply.pid, limits, registry, self.fan_out, meter)
        sandbox.wait_ready()
        return sandbox

    def close(self) -> None:
        """Closing the control channel tells the zygote to end its turns and clean up. One that has
        not exited within a few seconds gets SIGTERM (it still cleans up), then SIGKILL."""
        with self._lock:
            if self._control is not None:
                self._control.close()
            if self._process is not None:
                try:
                    self._process.wait(timeout=5)
                except subprocess.TimeoutExpired:
                    self._process.terminate()
                    try:
                        self._process.wait(timeout=3)
                    except subprocess.TimeoutExpired:
                        self._process.kill()
                        self._process.wait()
            self._process = self._control = None
            if self._starter is not None:
                self._starter.shutdown(wait=False)
                self._starter = None
