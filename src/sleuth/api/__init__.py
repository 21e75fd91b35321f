"""The HTTP API (spec/api.md): FastAPI routes over the same engine as the CLI."""

from sleuth.api.app import create_app

__all__ = ["create_app"]
