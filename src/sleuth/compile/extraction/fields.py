"""The documented `fields` of each model kind (spec/context.md §4), and the conflicts between what
several sources give for them (written into a reduced artifact's "Conflicts" section)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sleuth.compile.extraction import prompts
from sleuth.compile.extraction.grouping import SourcedMention


def fields_for(kind: str, given: dict[str, Any]) -> dict[str, Any]:
    """Only the documented fields of the kind, with the JSON types they are declared as."""
    wanted = prompts.KIND_FIELDS.get(kind, {})
    out: dict[str, Any] = {}
    for name in wanted:
        value = given.get(name)
        if value is None or value == "" or value == []:
            continue
        if name in ("aliases", "participants"):
            items = value if isinstance(value, list) else [value]
            kept = [str(v).strip() for v in items if str(v).strip() and not prompts.is_placeholder(str(v))]
            if kept:
                out[name] = kept[:20]
        elif not prompts.is_placeholder(str(value)):
            out[name] = str(value).strip()[:200]
    return out


def conflicts(kind: str, mentions: Sequence[SourcedMention]) -> str:
    """A Markdown list of the fields the sources give different values for, each side quoted."""
    by_field: dict[str, dict[str, tuple[str, str]]] = {}
    for m in mentions:
        for name, value in fields_for(kind, m.mention.fields).items():
            if name in ("aliases", "participants"):
                continue
            text = str(value)
            quote = m.mention.quotes[0] if m.mention.quotes else ""
            by_field.setdefault(name, {}).setdefault(text.casefold(), (text, f'{m.source_path}: "{quote}"'))
    lines: list[str] = []
    for name, values in sorted(by_field.items()):
        if len(values) > 1:
            lines.append(f"- **{name}**:")
            lines.extend(f"  - {text} ({where})" for text, where in values.values())
    return "\n".join(lines)
