"""Sleuth: compile a corpus into a context, then answer questions over it with cited evidence."""

from sleuth.compile.manifest import Manifest, ManifestError, parse_manifest
from sleuth.compile.pipeline import CompileReport, compile_context
from sleuth.store.home import Home
from sleuth.store.search import SearchHit, VersionReader

__version__ = "0.1.0"

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
