"""The FastAPI application: version header, error envelope, body limit, routers under `/api` (and the
legacy alias `/api/v0`), `/healthz` and the OpenAPI document at `/api/openapi.json`."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import Any

from fastapi import FastAPI, Request, Response
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, PlainTextResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from sleuth.api import contexts, mcp, queries, sessions, system
from sleuth.api.errors import ApiError
from sleuth.api.state import ApiState
from sleuth.api.versioning import DEFAULT_VERSION, HEADER, VERSIONS

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
    location = [str(p) for p in first.get("loc", ()) if p not in ("body", "query", "path", "header")]
    field = ".".join(location) or "body"
    kind = str(first.get("type", ""))
    if kind == "extra_forbidden":
        return field, f"unknown field {field!r}"
    if kind == "json_invalid":
        return "body", "malformed JSON body"
    if kind == "missing":
        return field, f"{field} is required"
    return field, f"{field}: {first.get('msg', 'invalid value')}"


def create_app(state: ApiState) -> FastAPI:
    app = FastAPI(
        title="Sleuth",
        version="2026-07",
        openapi_url="/api/openapi.json",
        docs_url="/api/docs",
        redoc_url=None,
    )
    app.state.sleuth = state

    @app.middleware("http")
    async def version_and_limits(
        request: Request, call_next: Callable[[Request], Awaitable[Response]]
    ) -> Response:
        requested = request.headers.get(HEADER)
        if requested is not None and requested not in VERSIONS:
            error = ApiError(
                400,
                "unsupported_api_version",
                f"unsupported {HEADER} {requested!r}; accepted: {', '.join(VERSIONS)}",
            )
            return _envelope(error, None)
        version = requested or DEFAULT_VERSION
        request.state.api_version = version
        length = request.headers.get("content-length")
        is_upload = request.headers.get("content-type", "").startswith("multipart/")
        if length is not None and length.isdigit() and int(length) > MAX_JSON_BODY and not is_upload:
            return _envelope(ApiError(413, "payload_too_large", "JSON bodies are limited to 1 MiB"), version)
        response = await call_next(request)
        response.headers[HEADER] = version
        return response

    @app.exception_handler(ApiError)
    async def on_api_error(request: Request, exc: ApiError) -> JSONResponse:
        return _envelope(exc, getattr(request.state, "api_version", DEFAULT_VERSION))

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
        log.exception("internal error on %s %s", request.method, request.url.path)
        error = ApiError(500, "internal_error", f"internal error: {type(exc).__name__}")
        return _envelope(error, getattr(request.state, "api_version", DEFAULT_VERSION))

    @app.get("/healthz", include_in_schema=False)
    async def healthz() -> PlainTextResponse:
        return PlainTextResponse("ok")

    for router in ROUTERS:
        app.include_router(router, prefix="/api")
        app.include_router(router, prefix="/api/v0", include_in_schema=False)
    mcp.mount(app)  # the MCP server at /mcp (api.md §11), with its session manager in the lifespan
    return app


def envelope_example(code: str, message: str) -> dict[str, Any]:
    """The error body, for OpenAPI `responses=` declarations."""
    return {"content": {"application/json": {"example": {"message": message, "code": code}}}}
