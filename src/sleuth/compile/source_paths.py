"""Names that come from outside (archive members, request paths, connector items), checked before any
is used as a path below a context: `safe_relative_path` is the one check every outside name passes."""

from __future__ import annotations

from pathlib import Path, PurePosixPath

from sleuth.errors import Invalid
from sleuth.format.text import BIDI_CONTROLS, hidden_in_name

#: Any relative path a request or an archive names: a component is at most 255 bytes (spec/api.md §4), the
#: whole path at most `MAX_PATH_BYTES` bytes and `MAX_PATH_DEPTH` components, so a path always fits
#: the operating system's limits below a context's directory and a `mkdir(parents=True)` is shallow.
MAX_COMPONENT_BYTES = 255
MAX_PATH_BYTES = 2048
MAX_PATH_DEPTH = 64
#: A source's own path (an upload, an archive member) is held tighter, so the knowledge paths derived
#: from it (`knowledge/chunks/<path>.jsonl`, pack members) stay within the general limits.
MAX_SOURCE_PATH_BYTES = 1024
MAX_SOURCE_PATH_DEPTH = 32


class UnsafePath(Invalid, ValueError):
    """A path is absolute, contains `..`, a backslash, NUL, control, bidirectional control or invisible
    characters, a component over 255 bytes, or is too long or too deep (spec/api.md §4,
    `unsafe_path`)."""


def shown(name: str, limit: int = 80) -> str:
    """`name` quoted for a message, cut to `limit` characters: a message never carries a whole
    hostile name."""
    if len(name) <= limit:
        return repr(name)
    return f"{name[:limit]!r}… ({len(name)} characters)"


def safe_relative_path(
    name: str, *, max_bytes: int = MAX_PATH_BYTES, max_depth: int = MAX_PATH_DEPTH
) -> PurePosixPath:
    """`name` as a relative POSIX path, or `UnsafePath`. The one check every outside name passes."""
    try:
        size = len(name.encode("utf-8"))
    except UnicodeEncodeError:  # a name that was not UTF-8 (tar keeps its bytes as surrogates)
        raise UnsafePath(f"unsafe path {shown(name)}: not valid UTF-8") from None
    if size > max_bytes:
        raise UnsafePath(f"unsafe path {shown(name)}: over {max_bytes} bytes")
    if not name or name.startswith("/") or "\\" in name:
        raise UnsafePath(f"unsafe path {shown(name)}: absolute or contains a backslash")
    if any(ord(ch) < 32 or ord(ch) == 127 for ch in name):
        raise UnsafePath(f"unsafe path {shown(name)}: contains NUL or control characters")
    if any(ch in BIDI_CONTROLS for ch in name):
        raise UnsafePath(f"unsafe path {shown(name)}: contains bidirectional control characters")
    if (hidden := hidden_in_name(name)) is not None:  # `a\u200bb.md` looks like `ab.md`
        raise UnsafePath(f"unsafe path {shown(name)}: contains an invisible character (U+{ord(hidden):04X})")
    parts = [p for p in name.split("/") if p not in ("", ".")]
    if not parts:
        raise UnsafePath(f"unsafe path {shown(name)}: empty")
    if len(parts) > max_depth:
        raise UnsafePath(f"unsafe path {shown(name)}: deeper than {max_depth} components")
    for part in parts:
        if part == "..":
            raise UnsafePath(f"unsafe path {shown(name)}: contains '..'")
        if len(part.encode("utf-8")) > MAX_COMPONENT_BYTES:
            raise UnsafePath(f"unsafe path {shown(name)}: a component is over {MAX_COMPONENT_BYTES} bytes")
    return PurePosixPath(*parts)


def safe_source_path(name: str) -> PurePosixPath:
    """A source's path: `safe_relative_path` with the tighter source limits."""
    return safe_relative_path(name, max_bytes=MAX_SOURCE_PATH_BYTES, max_depth=MAX_SOURCE_PATH_DEPTH)


def safe_join(root: Path, name: str) -> Path:
    """`root / name`, refusing anything that would land outside `root` (symlinks included). The refusal
    names the path as it was given, never `root` or where a link leads: this machine's layout is not
    for a client to learn."""
    relative = safe_relative_path(name)
    target = root.joinpath(*relative.parts)
    resolved_root = root.resolve()
    if not target.resolve().is_relative_to(resolved_root):
        raise UnsafePath(f"unsafe path {shown(name)}: leads out of its folder (through a link)")
    return target
