"""The orientation prompt (spec/runtime.md §3): block A (rules and tools), block B (contexts and
instructions), block C (history and the ask).

A and B form the system message and are byte-identical for every turn of a session, so provider
prompt caches and local servers' prefix caches reuse them; only C changes. The prompt texts are
data files in `agent/prompts/`, and the SDK reference is generated from the SDK's own signatures
and docstrings, so the prompt cannot drift from the code.
"""

from __future__ import annotations

import asyncio
import functools
import hashlib
import inspect
import json
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

from sleuth.format.identity import period_dates, period_label
from sleuth.format.text import plain_line, text_fingerprint
from sleuth.sdk.knowledge import Knowledge, ScopedContext
from sleuth.sdk.orientation import OrientationSettings, set_default_orienter
from sleuth.sdk.primitives import primitives, signature_text
from sleuth.settings import TOOL_OUTPUT_CHARS
from sleuth.store.contexts.home import ContextDir
from sleuth.store.version.info import read_version_info
from sleuth.store.version.search import VersionReader

PROMPT_VERSION = "2026-12-06.3"  # .2: `orientation`, fiscal and calendar periods; .3: snippet and match
MAX_DESCRIPTIONS_CHARS = 12_000
#: Characters of one sample query shown: they are a model's text, quoted as examples, never more.
SAMPLE_QUERY_CHARS = 120
#: What a type's line says in place of a description a model proposed and no person has edited.
UNREVIEWED = "(its description was proposed by a model and is not shown until a person edits it)"


def prompt_text(name: str) -> str:
    return resources.files("sleuth.agent").joinpath("prompts", name).read_text("utf-8")


@dataclass(frozen=True)
class ContextBrief:
    """What the host knows about one scoped context for this turn: identity and pinned version."""

    slug: str
    name: str
    description: str
    version_dir: Path
    version: str


@dataclass
class ContextOverview:
    """Block B's material for one context, read on the host from the pinned version."""

    brief: ContextBrief
    counts: dict[str, int]
    types: list[dict[str, Any]]
    edge_types: list[dict[str, Any]]
    tables: list[dict[str, Any]]
    rosters: list[dict[str, Any]]
    sample_queries: list[str]
    instructions: str | None
    manifest_sha256: str = ""
    extra: dict[str, Any] = field(default_factory=dict)
    # What each document is (compile.identity): path, title, issuer, doc_type, period, aliases.
    documents: list[dict[str, Any]] = field(default_factory=list)


@functools.lru_cache(maxsize=64)
def overview(brief: ContextBrief) -> ContextOverview:
    """Read the pinned version's types, tables and rosters through the SDK's own reads. A version
    never changes once live, so every turn over it shares one overview (callers must not mutate it)."""
    knowledge = Knowledge([ScopedContext(brief.slug, brief.version_dir)])
    try:
        by_type: dict[str, int] = dict(knowledge.get_fact("artifacts_by_type"))
        manifest = read_version_info(brief.version_dir).manifest
        manifest_bytes = json.dumps(manifest, sort_keys=True).encode()
        artifacts = (manifest.get("curate") or {}).get("artifacts") or {}
        # Descriptions a model proposed (explore) that no person has changed: data, not instructions.
        model_written = set(manifest.get("model_written") or [])
        types = []
        for declared in artifacts.get("artifact_types") or []:
            spec = knowledge.describe_type(declared["name"])
            types.append(
                {
                    "name": spec.name,
                    "kind": spec.kind,
                    "scope": spec.scope,
                    "format": spec.format,
                    "count": spec.count if spec.table else by_type.get(spec.name, spec.count),
                    "description": spec.description,
                    "model_written": bool(spec.description)
                    and text_fingerprint(spec.description) in model_written,
                    "samples": [
                        a.name for a in knowledge.outline_knowledge(type=spec.name)[:5] if spec.table is None
                    ],
                    "table": spec.table,
                }
            )
        tables = [
            {
                "name": t.name,
                "columns": [(c.name, c.type) for c in t.columns],
                "row_count": t.row_count,
                "natural_key": list(t.natural_key),
            }
            for t in knowledge.list_tables()
        ]
        rosters = [{"name": r.name, "type": r.type, "count": r.count} for r in knowledge.read_rosters()]
        documents = [
            {
                key: entry.get(key)
                for key in (
                    "title",
                    "issuer",
                    "doc_type",
                    "period",
                    "aliases",
                    "period_start",
                    "period_end",
                    "fiscal_quarter",
                    "fiscal_differs",
                    "fiscal_year",
                    "fiscal_year_end",
                    "fiscal_basis",
                    "calendar_period",
                    "fiscal_year_named",
                )
            }
            | {"path": path}
            for path, entry in sorted(VersionReader(brief.version_dir).documents.items())
        ]
        return ContextOverview(
            brief=brief,
            counts={
                "sources": int(knowledge.get_fact("source_count")),
                "pages": int(knowledge.get_fact("page_count")),
                "chunks": int(knowledge.get_fact("chunk_count")),
                "artifacts": int(knowledge.get_fact("artifact_count")),
            },
            types=types,
            edge_types=[
                {
                    "name": e.get("name"),
                    "from": e.get("from"),
                    "to": e.get("to"),
                    "description": e.get("description"),
                }
                for e in artifacts.get("edge_types") or []
            ],
            tables=tables,
            rosters=rosters,
            sample_queries=list(knowledge.get_fact("sample_queries"))[:5],
            instructions=((manifest.get("search") or {}).get("instructions") or None),
            manifest_sha256=hashlib.sha256(manifest_bytes).hexdigest(),
            documents=documents,
        )
    finally:
        knowledge.close()


def sdk_reference(tools: Sequence[str] | None = None) -> str:
    """Signatures and docstrings of the enabled primitives, from their one declaration
    (`sdk.primitives`), then `final`."""
    lines = ["## SDK reference", "```python"]
    for item in primitives():
        if tools is None or item.name in tools:
            prefix = "async def" if item.kind == "search" else "def"
            lines.append(f"{prefix} {item.name}{signature_text(item.method)}:")
            lines.append(_docstring(item.doc))
    lines.append(f"def final{signature_text(Knowledge.final)}:")
    lines.append(_docstring(inspect.getdoc(Knowledge.final) or ""))
    lines.append("answer = final")
    lines.append("```")
    lines.append(
        "Hits: `h.ref` (evidence label), `h.name`, `h.score` (hybrid 0-1, keyword BM25, semantic cosine), "
        "`h.kind`, `h.fields` (chunk hits: source_path, page, chunk_text (the page's running lines "
        "removed), section_path, snippet (~240 characters around the match), match (its offsets in "
        "chunk_text); artifact hits: type, sources, snippet). A `Passage` (read_around, "
        "read_page, read_section) prints its chunks' text, each after its label (`[E7 p.41] …`); "
        "`p.hits` are its chunks as hits. A `Comparison` (compare_sections) prints each added (+), "
        "removed (-) and changed (~) sentence after its labels; `.evidence` cites them. Rows from "
        "`query_db` are dicts; `_provenance` holds evidence labels."
    )
    return "\n".join(lines)


def _docstring(doc: str) -> str:
    indented = doc.replace("\n", "\n    ")
    return f'    """{indented}"""'


def block_a(profile: str, protocol: str, max_output: int, tools: Sequence[str] | None) -> str:
    if profile == "small":
        return _small_block_a(protocol, max_output, tools)
    parts = [
        prompt_text("rules.md").replace("{max_tool_output_chars}", f"{max_output:,}"),
        prompt_text("protocol_native.md" if protocol == "native" else "protocol_text.md"),
        sdk_reference(tools),
        prompt_text("examples.md"),
    ]
    return "\n\n".join(p.strip() for p in parts)


def _small_block_a(protocol: str, max_output: int, tools: Sequence[str] | None) -> str:
    """The `small` profile's rules, functions and example (spec/runtime.md §3.A). A 1.5B model given
    the standard block copied the reference's signatures into its code as empty definitions and
    re-ran the example's search verbatim (issue 46), so this one lists five calls as they are
    written, one example that ends in `final`, and no signatures."""
    calls = [
        line
        for line in prompt_text("small_reference.md").strip().splitlines()
        if not line.startswith("- ") or tools is None or _called(line) in (*tools, "final")
    ]
    parts = [
        prompt_text("small_rules.md").replace("{max_tool_output_chars}", f"{max_output:,}"),
        "\n".join(calls),
        prompt_text("small_example.md"),
        prompt_text("protocol_native.md" if protocol == "native" else "protocol_text_small.md"),
    ]
    return "\n\n".join(p.strip() for p in parts)


def _called(line: str) -> str:
    """The function a `small_reference.md` line shows (`read_page` in "- `print(read_page(…))`")."""
    names = re.findall(r"(\w+)\(", line.split("`:", 1)[0])
    return next((n for n in names if n != "print"), "")


MAX_DOCUMENTS_SHOWN = 40


def _describe_context(o: ContextOverview, level: int) -> str:
    """One context's description. `level` shortens it: 1 drops sample names, 2 cuts descriptions
    to 60 chars, 3 summarises types beyond the 20 largest as counts (spec/runtime.md §3.B)."""
    cut = 60 if level >= 2 else 160
    b = o.brief
    lines = [f"### Context `{b.slug}` — {b.name}"]
    if b.description:
        lines.append(b.description[: cut * 4] if level < 2 else b.description[:cut])
    c = o.counts
    lines.append(
        f"{c['sources']} sources, {c['pages']} pages, {c['chunks']} chunks, {c['artifacts']} artifacts "
        f"(version {b.version})."
    )
    types = sorted(o.types, key=lambda t: -int(t["count"]))
    shown, rest = (types[:20], types[20:]) if level >= 3 else (types, [])
    if shown:
        lines.append("Artifact types:")
    for t in shown:
        line = f"- {t['name']} (kind {t['kind']}, scope {t['scope']}, format {t['format']}, {t['count']})"
        if t.get("table"):
            line += f", table `{t['table']}`"
        if t.get("model_written"):
            line += f": {UNREVIEWED}"
        elif t.get("description"):
            line += f": {t['description'][:cut]}"
        if level < 1 and t.get("samples"):
            line += " — e.g. " + "; ".join(repr(s) for s in t["samples"])
        lines.append(line)
    if rest:
        lines.append(f"- … and {len(rest)} more types with {sum(int(t['count']) for t in rest)} artifacts")
    if o.edge_types:
        lines.append(
            "Edge types: " + "; ".join(f"{e['name']} ({e['from']} → {e['to']})" for e in o.edge_types)
        )
    lines.append("Tables (query_db, SQLite):")
    for t in o.tables:
        columns = ", ".join(f"{n} {ty}" for n, ty in t["columns"])
        lines.append(f"- {t['name']}({columns}) — {t['row_count']} rows")
    if o.rosters:
        lines.append("Rosters: " + ", ".join(f"{r['name']} ({r['count']})" for r in o.rosters))
    named = [
        d
        for d in o.documents
        if d.get("issuer") or d.get("doc_type") or d.get("period") or d.get("calendar_period")
    ]
    if named and level < 2:
        shown_docs = named[: MAX_DOCUMENTS_SHOWN if level < 1 else MAX_DOCUMENTS_SHOWN // 2]
        lines.append(
            "Documents (search ranks the one a question names first; `sources=[path]` searches in it):"
        )
        for d in shown_docs:
            # the period as readers name it: the fiscal label, the calendar one beside it
            what = ", ".join(str(v) for v in (d.get("issuer"), d.get("doc_type"), period_label(d)) if v)
            if d.get("period_start") and d.get("period_end"):
                what += f", {period_dates(d)}"
            also = f" (also {d['aliases']})" if d.get("aliases") else ""
            lines.append(f"- `{d['path']}` — {what}{also}")
        if len(named) > len(shown_docs):
            lines.append(f"- … and {len(named) - len(shown_docs)} more (query_db: SELECT * FROM _sources)")
    if o.sample_queries:  # a curate's model wrote them: quoted and cut, as the examples they are
        quoted = (
            json.dumps(plain_line(q)[:SAMPLE_QUERY_CHARS], ensure_ascii=False) for q in o.sample_queries
        )
        lines.append("Sample queries (examples a model wrote): " + " | ".join(quoted))
    return "\n".join(lines)


def instructions_text(
    overviews: Sequence[ContextOverview], system_prompt: str | None, guardrails: str | None
) -> str:
    """The layering of spec/runtime.md §9: context instructions (in scope order), then the session's
    system prompt appended, then guardrails. Never shortened."""
    parts = [f"Instructions for `{o.brief.slug}`:\n{o.instructions}" for o in overviews if o.instructions]
    if system_prompt:
        parts.append(f"Session instructions:\n{system_prompt}")
    if guardrails:
        parts.append(f"## Guardrails\n{guardrails}")
    return "\n\n".join(parts)


def block_b(overviews: Sequence[ContextOverview], system_prompt: str | None, guardrails: str | None) -> str:
    for level in range(4):
        described = "\n\n".join(_describe_context(o, level) for o in overviews)
        if len(described) <= MAX_DESCRIPTIONS_CHARS:
            break
    else:
        described = described[:MAX_DESCRIPTIONS_CHARS]
    parts = ["## Contexts in scope", described]
    instructions = instructions_text(overviews, system_prompt, guardrails)
    if instructions:
        parts += ["## Instructions", instructions]
    return "\n\n".join(parts)


def system_message(
    overviews: Sequence[ContextOverview],
    *,
    profile: str,
    protocol: str,
    max_output: int,
    tools: Sequence[str] | None,
    system_prompt: str | None,
    guardrails: str | None,
) -> str:
    return (
        block_a(profile, protocol, max_output, tools) + "\n\n" + block_b(overviews, system_prompt, guardrails)
    )


def ask_message(ask: str, max_steps: int) -> str:
    """Block C's last message: the ask and the step budget."""
    return f"{ask}\n\nYou have at most {max_steps} steps."


#: What a turn takes for a setting its request leaves out (`agent.run`): the standard profile, native
#: tool calls, every primitive, no session instructions, the default step output.
TURN_DEFAULTS = OrientationSettings("standard", "native", None, None, None, TOOL_OUTPUT_CHARS)


def orientation_text(
    briefs: Sequence[ContextBrief],
    settings: OrientationSettings,
    defaults: OrientationSettings = TURN_DEFAULTS,
) -> str:
    """The system message (blocks A and B) a turn over `briefs` with `settings` gives its model; a
    setting left None takes `defaults`'. A turn builds its own here (`agent.run`), and so does every
    way to print it (the `orientation` primitive, `sleuth orientation`): one text, never two."""

    def pick(name: str) -> Any:
        value = getattr(settings, name)
        return getattr(defaults, name) if value is None else value

    return system_message(
        [overview(b) for b in briefs],
        profile=pick("profile") or "standard",
        protocol=pick("protocol") or "native",
        max_output=pick("max_tool_output_chars") or TOOL_OUTPUT_CHARS,
        tools=pick("tools"),
        system_prompt=pick("system_prompt"),
        guardrails=pick("guardrails"),
    )


def orientation_host(
    briefs: Sequence[ContextBrief], defaults: OrientationSettings = TURN_DEFAULTS
) -> Callable[[dict[str, Any]], str]:
    """The `orientation` host function of a sandbox over `briefs`: what the SDK's primitive returns
    there, with the settings its call names and `defaults` (a turn's own) for the others."""

    def answer(args: dict[str, Any]) -> str:
        return orientation_text(briefs, OrientationSettings.from_json(args), defaults)

    return answer


def context_brief(context: ContextDir, version: str) -> ContextBrief:
    """One context at `version`, as a turn pins it (`agent.turn.Runtime`)."""
    info = context.info()
    return ContextBrief(info.slug, info.name, info.description, context.version_dir(version), version)


def scoped_brief(scoped: ScopedContext) -> ContextBrief:
    """A scoped context as a turn pins it: its name and description from the `context.json` beside
    its `versions/` folder (the context's name alone where there is none, as in a bare version)."""
    context = ContextDir(scoped.version_dir.parent.parent)
    version = scoped.version_dir.name
    if not context.info_file.is_file():
        return ContextBrief(scoped.slug, scoped.slug, "", scoped.version_dir, version)
    info = context.info()
    return ContextBrief(scoped.slug, info.name, info.description, scoped.version_dir, version)


async def _in_process(contexts: Sequence[ScopedContext], settings: OrientationSettings) -> str:
    """The orienter of an SDK that reads versions in this process (MCP): a turn's defaults."""
    return await asyncio.to_thread(orientation_text, [scoped_brief(c) for c in contexts], settings)


set_default_orienter(_in_process)
