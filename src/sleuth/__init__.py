"""Sleuth: compile a corpus into a context, then answer questions over it with cited evidence.

The public names are loaded when first used (PEP 562), so importing one module of the package (the SQL
statement process, the CLI's `--help`) does not load the compiler, the index and numpy with it."""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from sleuth.compile.manifest import Manifest, ManifestError, parse_manifest
    from sleuth.compile.pipeline import CompileReport, compile_context
    from sleuth.store.contexts.home import Home
    from sleuth.store.version.search import SearchHit, VersionReader

__version__ = "0.1.0"

_WHERE = {
    "CompileReport": "sleuth.compile.pipeline",
    "compile_context": "sleuth.compile.pipeline",
    "Home": "sleuth.store.contexts.home",
    "Manifest": "sleuth.compile.manifest",
    "ManifestError": "sleuth.compile.manifest",
    "parse_manifest": "sleuth.compile.manifest",
    "SearchHit": "sleuth.store.version.search",
    "VersionReader": "sleuth.store.version.search",
}


def __getattr__(name: str) -> Any:
    if name in _WHERE:
        return getattr(import_module(_WHERE[name]), name)
    raise AttributeError(f"module 'sleuth' has no attribute {name!r}")


__all__ = [
    "CompileReport",
    "Home",
    "Manifest",
    "ManifestError",
    "SearchHit",
    "VersionReader",
    "__version__",
    "compile_context",
    "parse_manifest",
]
