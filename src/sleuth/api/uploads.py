"""Multipart uploads (the source upload and the pack restore): the configurable limits, the streamed
and capped body parse, and staging files in a context's `staging/` before they are moved into place.
"""

from __future__ import annotations

import re
from collections.abc import AsyncGenerator
from pathlib import Path
from typing import Any

from fastapi import Request
from starlette.datastructures import FormData, UploadFile
from starlette.formparsers import MultiPartException, MultiPartParser

from sleuth.api.errors import ApiError
from sleuth.store.contexts.home import ContextDir

MAX_CONTEXT_BYTES = 10 * 1024**3
MULTIPART_OVERHEAD = 64 * 1024  # boundaries and part headers on top of the file itself
COPY_CHUNK = 1 << 20
#: The routes that take a multipart body and cap it themselves while streaming (`parse_upload`); every
#: other body, whatever its content type, is held to the JSON limit by the app's middleware.
UPLOAD_ROUTE = re.compile(r"/api(?:/v0)?/contexts/[^/]+/(?:import/upload|restore)")


UPLOAD_SCHEMA: dict[str, Any] = {
    "requestBody": {
        "required": True,
        "content": {
            "multipart/form-data": {
                "schema": {
                    "type": "object",
                    "required": ["file"],
                    "properties": {"file": {"type": "string", "format": "binary"}},
                }
            }
        },
    }
}


class _TooLarge(MultiPartException):
    """The request body passed the upload limit while streaming (the parser closes its files)."""


async def parse_upload(request: Request, limit: int) -> FormData:
    """The multipart body, streamed to temporary files with a byte cap, so an oversized upload is
    refused as it arrives instead of after it filled the disk."""
    content_type = request.headers.get("content-type", "")
    if not content_type.lower().startswith("multipart/form-data"):
        raise ApiError(400, "invalid_request", "file: send the file as multipart/form-data", field="file")
    length = request.headers.get("content-length", "")
    if length.isdigit() and int(length) > limit:
        raise ApiError(413, "file_too_large", f"the upload is over the limit of {limit} bytes")

    async def capped() -> AsyncGenerator[bytes, None]:
        seen = 0
        async for chunk in request.stream():
            seen += len(chunk)
            if seen > limit:
                raise _TooLarge("too large")
            yield chunk

    parser = MultiPartParser(request.headers, capped(), max_files=1, max_fields=16)
    try:
        return await parser.parse()
    except _TooLarge:
        raise ApiError(413, "file_too_large", f"the upload is over the limit of {limit} bytes") from None
    except MultiPartException as exc:
        raise ApiError(400, "invalid_request", f"file: {exc.message}", field="file") from None


def single_file(form: FormData) -> tuple[UploadFile, str]:
    """The one file part `file` of an upload (one file per request) and its filename."""
    files = form.getlist("file")
    upload = files[0] if files else None
    if not isinstance(upload, UploadFile):
        raise ApiError(400, "invalid_request", "file is required (a multipart file part)", field="file")
    if not upload.filename:
        raise ApiError(400, "invalid_request", "file: the part has no filename", field="file")
    return upload, upload.filename


def staging_dir(ctx: ContextDir, name: str | None = None) -> Path:
    """`staging/` (or a folder in it) of a context that still exists: never recreates the directory
    of a context deleted meanwhile (`404 context_not_found` instead)."""
    try:
        ctx.staging.mkdir(exist_ok=True)
        if name is None:
            return ctx.staging
        folder = ctx.staging / name
        folder.mkdir(exist_ok=True)
        return folder
    except FileNotFoundError:
        raise ApiError(404, "context_not_found", "the context was deleted") from None
