"""What an MCP tool call answers: an SDK result as JSON (`to_json`), as text for every client and as
structured content, with the notices the primitive gave (`sdk.notices`) beside it, since a tool call
has no step output to print them in."""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, fields, is_dataclass
from typing import Any

from mcp_types import CallToolResult, TextContent

from sleuth.sdk.types import Hit, Rows


@dataclass(frozen=True)
class Noted:
    """A result in its JSON form and the notices given while it was made."""

    value: Any
    notices: Sequence[str] = ()


def to_json(value: Any) -> Any:
    """The JSON form of an SDK result: dataclass fields, recursively; a Hit adds its `span` and `ref`
    (spec/runtime.md §5.3) instead of the private `span_`; Rows keep their columns and truncation."""
    if isinstance(value, Hit):
        out = {f.name: to_json(getattr(value, f.name)) for f in fields(value) if f.name != "span_"}
        return {**out, "span": to_json(value.span), "ref": value.ref}
    if isinstance(value, Rows):
        return {
            "columns": list(value.columns),
            "rows": [to_json(row) for row in value],
            "truncated": value.truncated,
            "elapsed_ms": round(value.elapsed_ms, 1),
        }
    if is_dataclass(value) and not isinstance(value, type):
        return {f.name: to_json(getattr(value, f.name)) for f in fields(value)}
    if isinstance(value, Mapping):
        return {str(k): to_json(v) for k, v in value.items()}
    if isinstance(value, list | tuple | set | frozenset):
        return [to_json(v) for v in value]
    if value is None or isinstance(value, bool):
        return value
    if isinstance(value, int):
        return int(value)  # the SDK's awaitable int subclass, too
    if isinstance(value, float):
        return float(value) if math.isfinite(value) else None
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    return str(value)


def result(value: Any) -> CallToolResult:
    """JSON text for every client, and the same value as structured content (an object, as the
    2025 protocol versions require: non-objects are wrapped as `{"result": ...}`, the SDK's convention).
    A `Noted` value's notices follow as text items of their own and as `notices` in the structured
    content (wrapped then, so that no field of the result is shadowed)."""
    notices = list(value.notices) if isinstance(value, Noted) else []
    value = value.value if isinstance(value, Noted) else value
    structured = value if isinstance(value, dict) and not notices else {"result": value}
    if notices:
        structured["notices"] = notices
    content = [TextContent(type="text", text=json.dumps(value, ensure_ascii=False))]
    content += [TextContent(type="text", text=text) for text in notices]
    return CallToolResult(content=content, structured_content=structured)


def error(envelope: dict[str, Any]) -> CallToolResult:
    text = json.dumps(envelope, ensure_ascii=False)
    return CallToolResult(
        content=[TextContent(type="text", text=text)], structured_content=envelope, is_error=True
    )
