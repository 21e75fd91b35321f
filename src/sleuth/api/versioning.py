"""API versions (spec/api.md §2): `2026-07` (default) and `unstable` (plus Sleuth's request extensions).
The middleware in app.py resolves the header; routes call `require_unstable` for extensions."""

from __future__ import annotations

from fastapi import Request

from sleuth.api.errors import ApiError

HEADER = "X-Pinecone-Api-Version"
DEFAULT_VERSION = "2026-07"
VERSIONS = ("2026-07", "unstable")


def api_version(request: Request) -> str:
    return str(getattr(request.state, "api_version", DEFAULT_VERSION))


def require_unstable(request: Request, name: str) -> None:
    """An extension used under 2026-07 → `400 requires_unstable_version` (before value checks)."""
    if api_version(request) != "unstable":
        raise ApiError(400, "requires_unstable_version", f"{name} requires {HEADER}: unstable", field=name)
