"""The MCP server (spec/api.md §11), built on the official MCP Python SDK, over HTTP at `/mcp` and over stdio.

Tools: the three of the Nexus MCP guide (`list_contexts`, `query_context`, `get_query`) and each retrieval
primitive of the SDK (spec/runtime.md §5.2) against one context named by the required `context` argument.

- Over HTTP the endpoint is Streamable HTTP, stateless and answering in JSON: the tools need no
  server-to-client requests, so no MCP session is kept and a credential is never bound to one. Each request
  authenticates like every other route (`auth.principal`; in no-auth mode everyone is the admin `local`);
  a refusal is the usual `401 unauthenticated` envelope. So is every refusal made before a JSON-RPC
  message is read (method, `Accept`, `Content-Type`): those are checked here, after the credentials.
- Each tool sees what its principal sees (`server/access.py`): a key limited to contexts lists and reads
  only those, and `get_query` answers only for the caller's own turns (an admin's: every turn).
- Over stdio (`sleuth mcp`) the tools run as the local admin, with this process's own turn executor.
- `query_context` admits a turn exactly like `POST /query` with `background: true` (`admission.admit_turn`):
  same checks, capacity and sandbox floor, same executor, so `GET /api/queries/{id}` sees it too.
- The primitives run here on the host against the context's live version, read-only: they are Sleuth's
  own code, not model code, so no sandbox is needed; `query_db` keeps its hardened read-only connection,
  whose caps (`sdk/sql.py`: value size, columns, result bytes, statements at once) bound the memory a
  caller's SQL can take in this process.
  Results are the JSON form of the SDK's dataclasses; evidence labels are numbered per tool call.
- Failures the caller can act on are tool errors whose text is the §4 envelope `{"message", "code"}`.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from concurrent.futures import Future
from concurrent.futures import wait as wait_futures
from dataclasses import dataclass
from inspect import Parameter, Signature
from pathlib import Path
from typing import Annotated, Any

import anyio
import anyio.to_thread
from fastapi import APIRouter, FastAPI
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError, UnexpectedToolError
from mcp.server.streamable_http import check_accept_headers
from mcp.server.transport_security import TransportSecuritySettings
from mcp_types import CallToolResult, InputRequiredResult, ToolAnnotations
from pydantic import Field, ValidationError
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.routing import Route
from starlette.types import Receive, Scope, Send

import sleuth
from sleuth.agent.records import Query
from sleuth.agent.request import Ask
from sleuth.agent.turn import TurnError
from sleuth.api.auth import LOCAL, principal
from sleuth.api.errors import ApiError
from sleuth.api.mcp_results import Noted, error, result, to_json
from sleuth.api.query_request import validated_body
from sleuth.api.state import api_state, executor, task_service
from sleuth.errors import Error, Told
from sleuth.format.problems import field_of, first_problem
from sleuth.sdk.errors import (
    AmbiguousError,
    BusyError,
    HostError,
    LimitError,
    NotFoundError,
    QueryError,
    SleuthError,
)
from sleuth.sdk.knowledge import Evidence, Knowledge, ScopedContext
from sleuth.sdk.notices import collected
from sleuth.sdk.primitives import Locator, Primitive, primitives
from sleuth.sdk.sql_process import IsolatedDatabase
from sleuth.server.access import Principal, visible_query
from sleuth.server.admission import QueryRequest, admit_turn
from sleuth.server.build import open_server
from sleuth.server.state import Server
from sleuth.server.turns import TurnExecutor
from sleuth.settings import Settings
from sleuth.store.contexts.home import ContextDir, ContextInfo, ContextNotFound, Home
from sleuth.store.records.tasks import TaskStore

MCP_PATH = "/mcp"
PRINCIPAL_STATE = "sleuth_principal"  # request.state key: the principal the endpoint authenticated
LOCAL_ADMIN = Principal(LOCAL, "admin")
STOP_WAIT_S = 10.0  # `sleuth mcp` exit: how long cancelled turns get to reach their terminal state
INSTRUCTIONS = (
    "Sleuth answers questions over compiled knowledge contexts with verified citations. Call "
    "list_contexts, then query_context and poll get_query until its status is completed, failed or "
    "cancelled. For your own retrieval, the SDK tools (search_source, search_knowledge, read_artifact, "
    "query_db, ...) each read one context, named by their `context` argument."
)
READ_ONLY = ToolAnnotations(read_only_hint=True, idempotent_hint=True, open_world_hint=False)
STARTS_TURN = ToolAnnotations(
    read_only_hint=False, destructive_hint=False, idempotent_hint=False, open_world_hint=False
)
SDK_ERROR_CODES: dict[type[SleuthError], str] = {
    NotFoundError: "not_found",
    AmbiguousError: "ambiguous_name",
    QueryError: "query_error",
    BusyError: "busy",
    LimitError: "invalid_request",
    HostError: "host_error",
}

Slug = Annotated[str, Field(min_length=1, max_length=200, description="The context's slug (list_contexts).")]
#: A locator as an MCP client gives it: evidence labels are numbered per tool call here, so a hit's
#: `id` (a chunk id) or a source path is what it names a place by.
WireLocator = Annotated[
    str,
    Field(
        min_length=1,
        max_length=2000,
        description="A hit's `id` (a chunk id, 'chk_…'), or a source path (read_page, read_section).",
    ),
]


class ToolFailure(Error):
    """A failure the caller can act on: reported as a tool error carrying the §4 envelope."""

    def __init__(self, code: str, message: str, **extra: Any) -> None:
        super().__init__(message)
        self.code = code
        self.extra = extra

    def envelope(self) -> dict[str, Any]:
        return {"message": str(self), "code": self.code, **self.extra}


@dataclass(frozen=True)
class Engine:
    """What one tool call runs on: the server's state, turn executor, task table and the caller.
    Over HTTP it comes from the app (shared with the routes); `sleuth mcp` builds its own."""

    state: Server
    turns: TurnExecutor
    tasks: TaskStore
    who: Principal
    pending: set[Future[Query]] | None = None  # stdio: turns to wait for before the process exits

    @classmethod
    def of_request(cls, request: Request) -> Engine:
        """The engine of the app serving `request`, with the principal the endpoint authenticated."""
        who = getattr(request.state, PRINCIPAL_STATE, None)
        if not isinstance(who, Principal):  # never served without the endpoint: fail closed
            raise ToolFailure("unauthenticated", "this request was not authenticated")
        return cls(api_state(request), executor(request), task_service(request).store, who)


EngineOf = Callable[[Context], Engine]


def _http_engine(ctx: Context) -> Engine:
    request = ctx.request_context.request
    if not isinstance(request, Request):
        raise ToolFailure("unauthenticated", "this MCP server only answers HTTP requests")
    return Engine.of_request(request)


def _failure_of(exc: Exception) -> ToolFailure | None:
    """The caller-facing failure an exception stands for; None for a bug (the SDK reports those
    without their details and logs them)."""
    if isinstance(exc, ToolFailure):
        return exc
    if isinstance(exc, TurnError | ApiError):
        return ToolFailure(exc.code, str(exc))
    if isinstance(exc, Told):  # a service's refusal (a full server, a busy context): its code and fields
        return ToolFailure(exc.code, exc.message, **exc.extra)
    if isinstance(exc, SleuthError):
        code = next((c for kind, c in SDK_ERROR_CODES.items() if isinstance(exc, kind)), "sdk_error")
        return ToolFailure(code, str(exc), error=type(exc).__name__)
    return None


# ------------------------------------------------------------------------------------- the SDK pool
class KnowledgePool:
    """Warm SDK instances, one idle per context version: loading a version's chunks and indexes costs
    far more than one search. A borrowed instance gets fresh evidence labels (they are per tool call),
    and instances of a version that is no longer live are closed when its context is next used."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._idle: dict[tuple[str, Path], Knowledge] = {}

    @contextlib.contextmanager
    def borrow(self, scoped: ScopedContext) -> Iterator[Knowledge]:
        key = (scoped.slug, scoped.version_dir)
        with self._lock:
            retired = [self._idle.pop(k) for k in list(self._idle) if k[0] == scoped.slug and k != key]
            knowledge = self._idle.pop(key, None)
        for old in retired:
            old.close()
        if knowledge is None:
            knowledge = Knowledge([scoped], databases=IsolatedDatabase)  # a client's SQL: killable
        knowledge.evidence = Evidence()
        try:
            yield knowledge
        finally:
            with self._lock:
                kept = key not in self._idle
                if kept:
                    self._idle[key] = knowledge
            if not kept:
                knowledge.close()

    def close(self) -> None:
        with self._lock:
            idle, self._idle = list(self._idle.values()), {}
        for knowledge in idle:
            knowledge.close()


# ------------------------------------------------------------------------------------------ tools
def _doc(item: Primitive) -> str:
    """A primitive's description: the SDK docstring the sandboxed model reads, plus the tool's terms."""
    lines = [line.strip() for line in item.doc.strip().splitlines()]
    return " ".join(lines) + " Reads one context: `context` (its slug) is required."


class Tools:
    """The tool functions. Each takes the SDK `Context` (hidden from the schema) to find its engine."""

    def __init__(self, engine_of: EngineOf, only: str | None = None) -> None:
        self._engine_of = engine_of
        self._only = only  # `sleuth mcp --context SLUG`: the one context this server serves
        self.pool = KnowledgePool()

    async def _guarded(self, ctx: Context, work: Callable[[Engine], Any]) -> CallToolResult:
        """Run blocking `work` on a worker thread with the call's engine; its value as JSON, or a
        caller-facing failure as a tool error."""
        try:
            engine = self._engine_of(ctx)
            return result(await anyio.to_thread.run_sync(work, engine))
        except Exception as exc:
            failure = _failure_of(exc)
            if failure is None:
                raise
            return error(failure.envelope())

    def _context(self, engine: Engine, slug: str) -> tuple[ContextDir, ContextInfo]:
        hint = f"; this server serves {self._only!r} only" if self._only is not None else ""
        try:
            ctx = engine.state.home.find(slug)
        except (ContextNotFound, ValueError):
            raise ToolFailure("context_not_found", f"no context {slug!r}{hint}") from None
        info = ctx.info()
        if not self._serves(engine, info):
            raise ToolFailure("context_not_found", f"no context {slug!r}{hint}")
        return ctx, info

    def _serves(self, engine: Engine, info: ContextInfo) -> bool:
        """The context is this server's (`--context`) and the caller's (a key's context list)."""
        return self._only in (None, info.slug) and engine.who.sees_context(info.id)

    def _listed(self, engine: Engine) -> list[tuple[ContextDir, ContextInfo]]:
        return [(c, i) for c, i in engine.state.home.contexts() if self._serves(engine, i)]

    # ---------------------------------------------------------------------- the Nexus tools
    async def list_contexts(self, ctx: Context) -> CallToolResult:
        def work(engine: Engine) -> list[dict[str, Any]]:
            out = []
            for context, info in self._listed(engine):
                out.append(
                    {
                        "slug": info.slug,
                        "name": info.name,
                        "id": info.id,
                        "description": info.description or None,
                        "queryable": context.live_version() is not None,
                        "is_curating": bool(engine.tasks.active(info.id, ("curate",))),
                        "is_optimizing": False,
                        "last_curated_at": info.last_curated_at,
                        "last_optimized_at": None,
                    }
                )
            return out

        return await self._guarded(ctx, work)

    async def query_context(
        self,
        context: Slug,
        ctx: Context,
        question: Annotated[
            Ask | None, Field(description="The question to answer (the Nexus contract's name).")
        ] = None,
        ask: Annotated[Ask | None, Field(description="The same, by the HTTP API's name: give one.")] = None,
    ) -> CallToolResult:
        def work(engine: Engine) -> dict[str, Any]:
            if question is not None and ask is not None and question != ask:
                raise ToolFailure("invalid_request", "give the question once: question or ask", field="ask")
            text = question if question is not None else ask
            field = "question" if question is not None or ask is None else "ask"
            if text is None:
                raise ToolFailure(
                    "invalid_request", "question is required (or ask, its API name)", field=field
                )
            _, info = self._context(engine, context)
            body = validated_body({"ask": text, "scope": [info.slug], "background": True}, QueryRequest)
            if not body.ask.strip():
                raise ToolFailure("invalid_request", f"{field} must not be blank", field=field)
            snapshot, future = admit_turn(engine.state, engine.turns, body, engine.who)
            if engine.pending is not None and future is not None:
                engine.pending.add(future)
                future.add_done_callback(engine.pending.discard)
            session = engine.state.db.get_session(str(snapshot["session_id"]))
            models = [] if session is None else session["models"]
            model = snapshot.get("model") or next(iter(models or []), None)
            return {"query_id": snapshot["id"], "status": snapshot["status"], "model": model}

        return await self._guarded(ctx, work)

    async def get_query(
        self, query_id: Annotated[str, Field(min_length=1, max_length=200)], ctx: Context
    ) -> CallToolResult:
        def work(engine: Engine) -> dict[str, Any]:
            document = visible_query(engine.state, engine.who, query_id)
            status = document.get("status")
            text = "".join(
                part.get("text", "")
                for message in document.get("output") or []
                for part in message.get("content") or []
                if part.get("type") == "output_text"
            )
            return {
                "query_id": document["id"],
                "answer": text if status == "completed" else None,
                "output_json": document.get("output_json"),
                "citations": document.get("citations") or [],
                "model": document.get("model"),
                "status": status,
                "error": document.get("error"),
            }

        return await self._guarded(ctx, work)

    # ---------------------------------------------------------------------- the SDK primitives
    async def primitive(self, ctx: Context, slug: str, call: Callable[[Knowledge], Any]) -> CallToolResult:
        """`call` on a warm SDK instance over the context's live version, in a worker thread; a search
        (a coroutine) runs to completion on that thread's own event loop, off the server's loop. The
        instance reads this one context, so the primitives' own `context=` is left at None."""

        def work(engine: Engine) -> Any:
            context, info = self._context(engine, slug)
            live = context.live_version()
            if live is None:
                raise ToolFailure("context_not_curated", f"context {info.slug!r} has no compiled version yet")
            scoped = ScopedContext(info.slug, context.version_dir(live))
            with self.pool.borrow(scoped) as knowledge, collected() as notices:
                value = call(knowledge)
                if asyncio.iscoroutine(value):
                    value = asyncio.run(value)
                return Noted(to_json(value), notices)

        return await self._guarded(ctx, work)


def _sdk_tool(tools: Tools, item: Primitive) -> Callable[..., Awaitable[CallToolResult]]:
    """`item` as an MCP tool, from its one declaration (`sdk.primitives`): `context` (a slug) first,
    then the primitive's own parameters, whose JSON Schema comes from the same annotations; the SDK's
    `Context` is hidden from the schema, and a locator (a hit or span in the REPL) is a string here
    (`WireLocator`). The primitive's own bounds are checked again when it runs."""
    own = [
        p.replace(kind=Parameter.KEYWORD_ONLY, annotation=_wire(p.annotation))
        for p in item.parameters()
        if p.name != "context"
    ]
    parameters = [
        Parameter("context", Parameter.KEYWORD_ONLY, annotation=Slug),
        *own,
        Parameter("ctx", Parameter.KEYWORD_ONLY, annotation=Context),
    ]

    async def call(context: str, ctx: Context, **arguments: Any) -> CallToolResult:
        return await tools.primitive(ctx, context, lambda k: getattr(k, item.name)(**arguments))

    call.__name__ = call.__qualname__ = item.name
    call.__signature__ = Signature(parameters, return_annotation=CallToolResult)  # type: ignore[attr-defined]
    call.__annotations__ = {p.name: p.annotation for p in parameters} | {"return": CallToolResult}
    return call


def _wire(annotation: Any) -> Any:
    return WireLocator if annotation == Locator else annotation


class _Server(MCPServer):
    """The SDK's server, with a tool call whose arguments fail validation answered like every other
    refusal: the §4 envelope (`invalid_request`, the field, one sentence), not pydantic's report with
    its documentation URL (issue 26, item 4)."""

    async def call_tool(
        self, name: str, arguments: dict[str, Any], context: Context[Any, Any] | None = None
    ) -> CallToolResult | InputRequiredResult:
        try:
            return await super().call_tool(name, arguments, context)
        except ToolError as exc:
            cause = exc.__cause__
            if isinstance(cause, ValidationError) and not isinstance(exc, UnexpectedToolError):
                errors = cause.errors(include_url=False)
                field = field_of(errors[0]["loc"]) if errors else "arguments"
                return error({"message": first_problem(cause), "code": "invalid_request", "field": field})
            raise


def build_server(engine_of: EngineOf, only: str | None = None) -> tuple[MCPServer, Tools]:
    """The MCP server with every tool registered; `engine_of` finds a call's engine (HTTP or stdio)."""
    server: MCPServer = _Server(
        "sleuth", instructions=INSTRUCTIONS, version=sleuth.__version__, log_level="WARNING"
    )
    tools = Tools(engine_of, only)
    nexus: list[tuple[str, str, ToolAnnotations]] = [
        (
            "list_contexts",
            "Every context of this Sleuth server: slug, name, id, description, whether it can be "
            "queried (queryable: it has a compiled version) and whether it is being curated.",
            READ_ONLY,
        ),
        (
            "query_context",
            "Ask one context a question. Starts a background turn and returns {query_id, status, model} "
            "at once; poll get_query until status is completed, failed or cancelled.",
            STARTS_TURN,
        ),
        (
            "get_query",
            "A turn started by query_context: its status, and once completed the answer, output_json "
            "and citations (verbatim quotes with their source and page).",
            READ_ONLY,
        ),
    ]
    for name, description, hints in nexus:
        server.add_tool(
            getattr(tools, name),
            name=name,
            description=description,
            annotations=hints,
            structured_output=False,
        )
    for item in primitives():
        server.add_tool(
            _sdk_tool(tools, item),
            name=item.name,
            description=_doc(item),
            annotations=READ_ONLY,
            structured_output=False,
        )
    return server, tools


# ------------------------------------------------------------------------------------------ HTTP
def _http_refusal(request: Request) -> ApiError | None:
    """What the SDK's transport would refuse before reading a JSON-RPC message, as the §4 envelope
    instead of its JSON-RPC error body. Only POST carries messages: the endpoint is stateless, so there
    is no stream to GET (the SDK would hold one open, idle, until the client left) and no session to
    DELETE. The answers are JSON, so the client must accept JSON; the body must be JSON."""
    if request.method != "POST":
        return ApiError(
            405,
            "method_not_allowed",
            f"{MCP_PATH} takes POST requests carrying JSON-RPC messages, not {request.method}",
            headers={"Allow": "POST"},
        )
    accepts_json, _ = check_accept_headers(request)
    if not accepts_json:
        return ApiError(406, "not_acceptable", "the client must accept application/json (Accept header)")
    media_type = request.headers.get("content-type", "").split(";")[0].strip().lower()
    if media_type != "application/json":
        return ApiError(
            415, "unsupported_media_type", "the body must be JSON (Content-Type: application/json)"
        )
    return None


class _Endpoint:
    """`/mcp`: authenticate like every route, refuse what is not a JSON-RPC request, then hand the
    request to the SDK's session manager.

    An ASGI class (not a function), so Starlette routes every method to it untouched. A refusal raises
    `ApiError`, which the app turns into its usual envelope; credentials are checked first, so nothing
    about the endpoint is told to a caller without them."""

    def __init__(self, server: MCPServer) -> None:
        self.server = server

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        request = Request(scope, receive)
        who = await run_in_threadpool(principal, request)  # key checks read the database
        refusal = _http_refusal(request)
        if refusal is not None:
            raise refusal
        setattr(request.state, PRINCIPAL_STATE, who)
        await self.server.session_manager.handle_request(scope, receive, send)


def _start_session_manager(server: MCPServer) -> None:
    """Give `server` a fresh session manager: stateless JSON, so no session binds a credential and
    nothing needs resuming. The SDK's DNS-rebinding check is off: its fixed loopback allow-list would
    refuse `sleuth serve --host 0.0.0.0`, and credentials are checked like on every other route. The
    Starlette app this returns is not used: `/mcp` is routed to the manager directly (a Mount would
    answer `/mcp` with a redirect to `/mcp/`)."""
    server.streamable_http_app(
        streamable_http_path=MCP_PATH,
        stateless_http=True,
        json_response=True,
        transport_security=TransportSecuritySettings(enable_dns_rebinding_protection=False),
    )


def mount(app: FastAPI) -> None:
    """Serve MCP at `/mcp` on `app` (outside `/api`), and run the SDK's session manager in the app's
    lifespan: a mounted app's own lifespan would never run."""
    server, tools = build_server(_http_engine)

    @contextlib.asynccontextmanager
    async def lifespan(_app: Any) -> AsyncIterator[None]:
        _start_session_manager(server)  # a fresh manager per run: one can run only once
        async with server.session_manager.run():
            try:
                yield
            finally:
                tools.pool.close()

    app.router.routes.append(Route(MCP_PATH, _Endpoint(server), name="mcp", include_in_schema=False))
    app.include_router(APIRouter(lifespan=lifespan))


# ------------------------------------------------------------------------------------------ stdio
def serve_stdio(home: Home, settings: Settings, only: str | None = None) -> None:
    """`sleuth mcp`: serve over stdin/stdout until the client closes them, as the local admin. Turns
    still running at exit are cancelled and given a few seconds to record it."""
    if only is not None:
        only = home.find(only).info().slug  # ContextNotFound: the caller reports it before anything starts
    state = open_server(home, role="mcp", settings=settings)
    turns = state.turn_executor()
    task_store = TaskStore(state.db.database)
    pending: set[Future[Query]] = set()
    engine = Engine(state, turns, task_store, LOCAL_ADMIN, pending)
    server, tools = build_server(lambda _ctx: engine, only)
    try:
        anyio.run(server.run_stdio_async)
    finally:
        turns.shutdown()
        wait_futures(list(pending), timeout=STOP_WAIT_S)
        tools.pool.close()
        task_store.close()
        state.close()
