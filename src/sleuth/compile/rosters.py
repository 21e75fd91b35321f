"""Rosters: system-made "All <Type>" lists, plus "All Sources" (spec/context.md §7.4). They are the
first stop for "list every X" questions, so they are rebuilt after every compile."""

from __future__ import annotations

from typing import Any

import yaml

from sleuth.compile.artifacts import Artifact
from sleuth.compile.manifest import ArtifactType
from sleuth.compile.typed_tables import TypedTable
from sleuth.format.identity import period_label

SUMMARY_CHARS = 160
MAX_KEYS = 500


def _cell(text: str) -> str:
    return " ".join(text.replace("|", "\\|").split())


def _front(data: dict[str, Any]) -> str:
    return "---\n" + yaml.safe_dump(data, sort_keys=False, allow_unicode=True) + "---\n"


def first_sentence(body: str) -> str:
    lines = [ln.strip() for ln in body.splitlines()]
    text = " ".join(
        ln for ln in lines if ln and not ln.startswith(("#", "- Source:", "- Format:", "- Pages:"))
    )
    for end in (". ", "? ", "! "):
        pos = text.find(end)
        if 0 < pos < SUMMARY_CHARS:
            return text[: pos + 1]
    return text[:SUMMARY_CHARS].rstrip() + ("…" if len(text) > SUMMARY_CHARS else "")


def sources_roster(sources: list[dict[str, Any]]) -> str:
    lines = [
        _front(
            {
                "sleuth_roster": 1,
                "name": "All Sources",
                "type": "_sources",
                "scope": "index",
                "count": len(sources),
            }
        ),
        "# All Sources",
        "",
        "| Path | Title | Period | Covers | Format | Pages |",
        "|---|---|---|---|---|---|",
    ]
    for s in sources:
        # the fiscal label and the calendar one beside it ("Q1 FY2023 (calendar Q3 2022)"), the dates
        period = _cell(period_label(s) or "")
        dated = s.get("period_start") and s.get("period_end")
        covers = f"{s['period_start']} to {s['period_end']}" if dated else ""
        cells = [_cell(s["path"]), _cell(s["title"]), period, covers, s["format"], s["pages"]]
        lines.append("| " + " | ".join(str(c) for c in cells) + " |")
    return "\n".join(lines) + "\n"


def type_roster(art_type: ArtifactType, artifacts: list[Artifact], note: str | None = None) -> str:
    name = f"All {art_type.name}"
    lines = [
        _front(
            {
                "sleuth_roster": 1,
                "name": name,
                "type": art_type.name,
                "scope": "index",
                "count": len(artifacts),
            }
        ),
        f"# {name}",
        "",
    ]
    if note:
        lines += [note, ""]
    lines += ["| Name | Summary | Sources |", "|---|---|---|"]
    for art in sorted(artifacts, key=lambda a: a.name.casefold()):
        sources = ", ".join(art.sources[:3]) + (f" (+{len(art.sources) - 3})" if len(art.sources) > 3 else "")
        lines.append(f"| {_cell(art.name)} | {_cell(first_sentence(art.body))} | {_cell(sources)} |")
    return "\n".join(lines) + "\n"


def table_roster(table: TypedTable) -> str:
    name = f"All {table.type.name}"
    lines = [
        _front(
            {
                "sleuth_roster": 1,
                "name": name,
                "type": table.type.name,
                "scope": "index",
                "count": len(table.rows),
                "table": table.name,
            }
        ),
        f"# {name}",
        "",
        f"Table `{table.name}`: {len(table.rows)} rows. "
        f'Query it with `query_db("SELECT * FROM {table.name}")`.',
        "",
    ]
    if table.natural_key:
        keys = sorted({" / ".join(str(r.values.get(k)) for k in table.natural_key) for r in table.rows})
        lines.append(f"Distinct {', '.join(table.natural_key)}:")
        lines += [f"- {_cell(k)}" for k in keys[:MAX_KEYS]]
        if len(keys) > MAX_KEYS:
            lines.append(f"- … and {len(keys) - MAX_KEYS} more")
    return "\n".join(lines) + "\n"
