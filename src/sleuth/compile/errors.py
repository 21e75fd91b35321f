"""Compile errors."""

from __future__ import annotations


class CompileError(RuntimeError):
    """A fatal error (integrity check, embedder unavailable): the run does not flip."""
