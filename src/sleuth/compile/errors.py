"""Compile errors."""

from __future__ import annotations

from sleuth.errors import Failed


class CompileError(Failed, RuntimeError):
    """A fatal error (integrity check, embedder unavailable): the run does not flip."""
