"""Compile errors."""

from __future__ import annotations

from sleuth.errors import Failed, Invalid


class CompileError(Failed, RuntimeError):
    """A fatal error (integrity check, embedder unavailable): the run does not flip."""


class NothingToCompile(Invalid, ValueError):
    """A new context from inputs that hold no file: nothing would be compiled, so nothing is made."""


class SourceClash(Invalid, ValueError):
    """Two different folders (or archives) of one name compiled into one context: the second would
    mirror over the first's `uploads/<name>/` and delete its sources."""
