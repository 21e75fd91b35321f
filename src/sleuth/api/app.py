"""The FastAPI application: version header, error envelope, body limit, routers under `/api` (and the
legacy alias `/api/v0`), `/healthz` and the OpenAPI document at `/api/openapi.json`."""

from __future__ import annotations

import logging
import re
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.openapi.utils import get_openapi
from fastapi.responses import JSONResponse, PlainTextResponse
from sqlalchemy.exc import DataError
from starlette.datastructures import Headers, MutableHeaders
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from sleuth import console
from sleuth.api import contexts, mcp, operations, queries, sessions, system
from sleuth.api.errors import ApiError, from_told
from sleuth.api.state import serving
from sleuth.api.uploads import UPLOAD_ROUTE
from sleuth.api.versioning import DEFAULT_VERSION, HEADER, VERSIONS
from sleuth.errors import Told
from sleuth.format.problems import sentence
from sleuth.server.state import Server
from sleuth.store.records.outage import connection_lost

DATABASE_RETRY_S = 5  # `Retry-After` of a 503 while the database is away (a restart takes seconds)
log = logging.getLogger("sleuth.api")
MAX_JSON_BODY = 1 << 20
ROUTERS = (system.router, contexts.router, queries.router, sessions.router)


def _envelope(error: ApiError, version: str | None) -> JSONResponse:
    headers = dict(error.headers)
    if version is not None:
        headers[HEADER] = version
    return JSONResponse(error.body(), status_code=error.status, headers=headers)


def _first_field(exc: RequestValidationError) -> tuple[str, str]:
    errors = exc.errors()
    if not errors:
        return "body", "invalid request"
    first = errors[0]
    loc = tuple(first.get("loc", ()))
    if loc and loc[0] in ("body", "query", "path", "header", "cookie"):
        loc = loc[1:]  # where the value came from, not its name: a parameter may be named `path`
    location = [str(p) for p in loc]
    field = ".".join(location) or "body"
    if first.get("type") == "json_invalid":
        return "body", "malformed JSON body"
    return field, sentence(first)  # the field and what it needs, not the validator's wording


ERROR_SCHEMA: dict[str, Any] = {
    "title": "Error",
    "type": "object",
    "description": "The error envelope (spec/api.md §4); some codes add keys such as `field` or `query_id`.",
    "properties": {
        "message": {"type": "string"},
        "code": {"type": "string"},
        "field": {"type": "string"},
    },
    "required": ["message", "code"],
    "additionalProperties": True,
}


#: A NUL in a JSON body, raw or escaped (`\u0000`, not `\\u0000`, the text backslash-u).
_JSON_NUL = re.compile(rb"\x00|(?<!\\)(?:\\\\)*\\u0000", re.IGNORECASE)


class _BodyTooLarge(Exception):
    """Raised from `receive` once a request body passes its limit."""


class VersionAndLimits:
    """Resolve `X-Pinecone-Api-Version` (400 for an unknown one) and echo it on every response; hold
    every request body to 1 MiB (`413 payload_too_large`). Plain ASGI rather than `@app.middleware`,
    which costs a task and a queue per request and wraps streamed (SSE) responses.

    The body limit is counted on the bytes as they arrive, so a chunked body (no Content-Length) is
    refused the same way as a declared one, after at most 1 MiB was read, never parsed. Only the
    multipart upload routes (`uploads.UPLOAD_ROUTE`) are left to their own larger limit, which
    `parse_upload` counts the same way; a multipart content type on any other route changes nothing.
    Whatever the app makes of the error `receive` raised, the client gets the 413.
    """

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = Headers(scope=scope)
        requested = headers.get(HEADER)
        if requested is not None and requested not in VERSIONS:
            error = ApiError(
                400,
                "unsupported_api_version",
                f"unsupported {HEADER} {requested!r}; accepted: {', '.join(VERSIONS)}",
            )
            await _envelope(error, None)(scope, receive, send)
            return
        version = requested or DEFAULT_VERSION
        scope.setdefault("state", {})["api_version"] = version  # what `request.state.api_version` reads
        query = bytes(scope.get("query_string") or b"").lower()
        if "\x00" in scope["path"] or b"%00" in query or b"\x00" in query:
            # no name, path or value of Sleuth's holds one, and PostgreSQL cannot store it: refused here
            nul = ApiError(400, "invalid_request", "a NUL character is not accepted in a path or a query")
            await _envelope(nul, version)(scope, receive, send)
            return
        is_upload = headers.get("content-type", "").lower().startswith("multipart/form-data") and bool(
            UPLOAD_ROUTE.fullmatch(scope["path"])
        )
        limit = None if is_upload else MAX_JSON_BODY
        too_large = ApiError(413, "payload_too_large", "request bodies are limited to 1 MiB")
        nul_in_body = ApiError(
            400, "invalid_request", "a NUL character (\\u0000) is not accepted in a request"
        )
        refusal = too_large
        tail = b""
        length = headers.get("content-length")
        if limit is not None and length is not None and length.isdigit() and int(length) > limit:
            await _envelope(too_large, version)(scope, receive, send)
            return
        received = 0
        refused = started = False

        async def counted_receive() -> Message:
            nonlocal received, refused, refusal, tail
            message = await receive()
            if limit is not None and message["type"] == "http.request":
                body = message.get("body", b"")
                received += len(body)
                if received > limit:
                    refused = True
                    raise _BodyTooLarge(f"the body passed {limit} bytes")
                # A JSON body: refused on SQLite as on PostgreSQL (which cannot store a NUL), whatever field
                # holds it; the window keeps a chunk's end, so an escape split across chunks is seen.
                window, tail = tail + body, (tail + body)[-64:]
                if _JSON_NUL.search(window):
                    refused, refusal = True, nul_in_body
                    raise _BodyTooLarge("a NUL in the body")
            return message

        async def send_with_version(message: Message) -> None:
            nonlocal started
            if refused:
                return  # the app's answer to the error it caught: the 413 below replaces it
            if message["type"] == "http.response.start":
                started = True
                MutableHeaders(scope=message)[HEADER] = version
            await send(message)

        try:
            await self.app(scope, counted_receive, send_with_version)
        except Exception:
            if not refused:
                raise
        if refused and not started:
            await _envelope(refusal, version)(scope, receive, send)


def _routes(app: FastAPI) -> None:
    for router in ROUTERS:
        app.include_router(router, prefix="/api")
        app.include_router(router, prefix="/api/v0", include_in_schema=False)


def _bare_app(lifespan: Any = None) -> FastAPI:
    app = FastAPI(
        lifespan=lifespan,
        title="Sleuth",
        version="2026-07",
        openapi_url="/api/openapi.json",
        docs_url="/api/docs",
        redoc_url=None,
    )
    app.openapi = lambda: _openapi(app)  # type: ignore[method-assign]
    return app


def _openapi(app: FastAPI) -> dict[str, Any]:
    """FastAPI's document, corrected: invalid input is answered 400 with the envelope, never the 422
    FastAPI declares by default, and every error response carries the envelope's schema."""
    if app.openapi_schema is not None:
        return app.openapi_schema
    document = get_openapi(title=app.title, version=app.version, routes=app.routes)
    components = document.setdefault("components", {}).setdefault("schemas", {})
    for name in ("HTTPValidationError", "ValidationError"):
        components.pop(name, None)
    components["Error"] = ERROR_SCHEMA
    for item in document.get("paths", {}).values():
        for operation in item.values():
            responses = operation.get("responses", {})
            if "422" in responses:
                del responses["422"]
                responses.setdefault("400", {"description": "invalid_request"})
            for status, response in responses.items():
                if status[:1] in "45":
                    content = response.setdefault("content", {}).setdefault("application/json", {})
                    content["schema"] = {"$ref": "#/components/schemas/Error"}
    app.openapi_schema = document
    return document


def openapi_document() -> dict[str, Any]:
    """The OpenAPI document, without a home or a server (client generators, the fuzz tests)."""
    app = _bare_app()
    _routes(app)
    return app.openapi()


def create_app(state: Server) -> FastAPI:
    app = _bare_app(serving)
    app.state.sleuth = state

    app.add_middleware(VersionAndLimits)

    @app.exception_handler(ApiError)
    async def on_api_error(request: Request, exc: ApiError) -> JSONResponse:
        return _envelope(exc, getattr(request.state, "api_version", DEFAULT_VERSION))

    @app.exception_handler(Told)
    async def on_told(request: Request, exc: Told) -> JSONResponse:
        return _envelope(from_told(exc), getattr(request.state, "api_version", DEFAULT_VERSION))

    @app.exception_handler(RequestValidationError)
    async def on_invalid(request: Request, exc: RequestValidationError) -> JSONResponse:
        field, message = _first_field(exc)
        error = ApiError(400, "invalid_request", message, field=field)
        return _envelope(error, getattr(request.state, "api_version", DEFAULT_VERSION))

    @app.exception_handler(StarletteHTTPException)
    async def on_http(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        code = {404: "not_found", 405: "method_not_allowed"}.get(exc.status_code, "invalid_request")
        error = ApiError(exc.status_code, code, str(exc.detail))
        return _envelope(error, getattr(request.state, "api_version", DEFAULT_VERSION))

    @app.exception_handler(Exception)
    async def on_bug(request: Request, exc: Exception) -> JSONResponse:
        if isinstance(exc, DataError):  # a value the database cannot store (a NUL in a JSON string)
            log.warning("refused by the database on %s %s: %s", request.method, request.url.path, exc.orig)
            error = ApiError(
                400, "invalid_request", "a value of the request cannot be stored (a NUL character?)"
            )
        elif connection_lost(exc):  # the database is away or busy: not a bug, and it passes
            log.warning("database unavailable on %s %s: %s", request.method, request.url.path, exc)
            error = ApiError(
                503,
                "database_unavailable",
                "the database is not answering; try again in a few seconds",
                headers={"Retry-After": str(DATABASE_RETRY_S)},
            )
        else:
            log.exception("internal error on %s %s", request.method, request.url.path)
            error = ApiError(500, "internal_error", f"internal error: {type(exc).__name__}")
        return _envelope(error, getattr(request.state, "api_version", DEFAULT_VERSION))

    @app.get("/healthz", include_in_schema=False)
    async def healthz() -> PlainTextResponse:
        return PlainTextResponse("ok")

    app.include_router(operations.router)  # /readyz and /metrics, beside /healthz
    _routes(app)
    mcp.mount(app)  # the MCP server at /mcp (spec/api.md §11), with its session manager in the lifespan
    console.mount(app)  # the web console at / (static files over this same /api)
    return app
