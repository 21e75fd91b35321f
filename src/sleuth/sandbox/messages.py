"""The messages between the host and a sandbox (spec/sandbox.md §4), one schema per kind, both ways.

`protocol.decode` has already bounded the line; these schemas bound each field and fix its type,
so the host never indexes into an unchecked dict. Anything that does not fit is a `ProtocolError`
(the sandbox is then killed), never a `KeyError` or `TypeError` on the host. Strings a model could
make long are capped here too; the host cuts the step's output to its own limit on top of this.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from sleuth.sandbox.protocol import ProtocolError

MAX_CALLS = 1_000  # SDK calls reported per step (the REPL counts the rest)
MAX_SPANS = 20_000  # evidence spans reported per step (the per-turn budget is smaller)
MAX_FINAL_CHARS = 200_000  # a draft answer for synthesis
MAX_TRACEBACK_CHARS = 20_000

Short = Annotated[str, Field(max_length=1_000)]
Name = Annotated[str, Field(max_length=200)]


class _Message(BaseModel):
    model_config = ConfigDict(strict=True, extra="ignore", frozen=True)


class Ready(_Message):
    """The child's word after lock-down: which layers hold, or why it could not start."""

    model_config = ConfigDict(strict=True, extra="allow", frozen=True)
    t: Literal["ready"]
    ok: bool
    missing: list[Short] = Field(default_factory=list, max_length=32)


class Rpc(_Message):
    """A host function call (spec/sandbox.md §5); `args` is checked by the registered function."""

    t: Literal["rpc"]
    id: int
    fn: Name
    args: Any = None


class StepError(_Message):
    type: Name
    message: Annotated[str, Field(max_length=4_000)]
    traceback: Annotated[str, Field(max_length=MAX_TRACEBACK_CHARS + 1_000)] = ""


class CallReport(_Message):
    """One SDK call as the REPL summarised it (for the trace; never re-run)."""

    fn: Name
    args: Annotated[str, Field(max_length=8_000)] = ""
    ms: float = 0.0
    ok: bool = True
    result: dict[str, Any] = Field(default_factory=dict)
    error: Annotated[str | None, Field(max_length=1_000)] = None


class SpanReport(_Message):
    """Where the sandbox says a piece of evidence is. Only a pointer: the host resolves it against the
    pinned version's own page records and derives the text itself (`agent.spans.SpanResolver`)."""

    ref: Annotated[str, Field(pattern=r"^E[0-9]{1,9}$")]
    context: Name
    source_path: Annotated[str, Field(max_length=4_096)]
    page: Annotated[int, Field(ge=0, le=10_000_000)]
    start: Annotated[int, Field(ge=0)]
    end: Annotated[int, Field(ge=0)]
    text: Annotated[str, Field(max_length=1 << 20)] = ""
    section_path: list[Annotated[str, Field(max_length=500)]] = Field(default_factory=list, max_length=32)
    via: Literal["chunk", "artifact", "table"] = "chunk"
    artifact_name: Annotated[str | None, Field(max_length=500)] = None
    score: float | None = None


class FinalReport(_Message):
    answer: Annotated[str | None, Field(max_length=MAX_FINAL_CHARS)] = None
    evidence: list[Annotated[str, Field(max_length=16)]] = Field(default_factory=list, max_length=MAX_SPANS)


class Result(_Message):
    """The end of one step."""

    t: Literal["result"]
    id: int
    ok: bool
    output: str
    output_chars: Annotated[int, Field(ge=0)]
    truncated: bool
    full_output: str
    error: StepError | None = None
    calls: list[CallReport] = Field(default_factory=list, max_length=MAX_CALLS)
    calls_total: Annotated[int, Field(ge=0)] = 0
    spans: list[SpanReport] = Field(default_factory=list, max_length=MAX_SPANS)
    final: FinalReport | None = None
    duration_ms: float = 0.0
    cpu_ms: float = 0.0


class Bye(_Message):
    t: Literal["bye"]


_KINDS: dict[str, type[_Message]] = {"ready": Ready, "rpc": Rpc, "result": Result, "bye": Bye}


# --- what the host sends the sandbox ---------------------------------------------------------------
# The host is trusted; these are typed so that both ends read one schema, not a dict each.


class Exec(_Message):
    """Run one step's code."""

    t: Literal["exec"] = "exec"
    id: int
    step: int
    code: str
    timeout_s: float
    max_output: int
    truncate: Literal["head"] = "head"
    full_output_cap: int


class RpcError(_Message):
    type: str
    message: str


class RpcResult(_Message):
    """The answer to one host function call: its `result`, or the `error` it raised."""

    t: Literal["rpc_result"] = "rpc_result"
    id: int
    ok: bool
    result: Any = None
    error: RpcError | None = None


class Close(_Message):
    """End the turn: the sandbox answers `bye` and exits."""

    t: Literal["close"] = "close"


# --- between the host and the zygote ---------------------------------------------------------------
# The control socket of spec/sandbox.md §2.2: one datagram per message, the turn's socket passed beside
# `spawn` as SCM_RIGHTS. Both ends are trusted code; typed so that both read one schema.


class ZygoteReady(_Message):
    """The zygote's hello once it has started: its pid and the directories it made (named after it)."""

    t: Literal["zygote_ready"] = "zygote_ready"
    pid: int
    landlock_abi: int
    dirs: list[str]


class Spawn(_Message):
    """Fork a sandbox for one turn over these versions (`contexts`: slug → version directory)."""

    t: Literal["spawn"] = "spawn"
    turn: int
    limits: dict[str, Any]  # `Limits.to_json()`
    contexts: dict[str, str]
    host_functions: list[str]


class Spawned(_Message):
    """The sandbox of `turn` is child `pid` (in the host's pid namespace); -1 when the fork failed."""

    t: Literal["spawned"] = "spawned"
    turn: int
    pid: int


def wire(command: Exec | RpcResult | Close | ZygoteReady | Spawn | Spawned) -> dict[str, Any]:
    """A command as it goes on the wire (unset fields left out)."""
    return command.model_dump(exclude_none=True)


def parse(message: dict[str, Any]) -> Ready | Rpc | Result | Bye:
    """A decoded message from the sandbox as its typed kind, or `ProtocolError`."""
    kind = _KINDS.get(message["t"])
    if kind is None:
        raise ProtocolError(f"unknown message kind {str(message['t'])[:40]!r}")
    try:
        parsed = kind.model_validate(message)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first.get("loc", ()))[:120]
        raise ProtocolError(f"invalid {message['t']} message: {where}: {first.get('msg', '')}") from None
    assert isinstance(parsed, Ready | Rpc | Result | Bye)
    return parsed
