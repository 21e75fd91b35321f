"""The extraction prompts, one per call kind (spec/context.md §5.4). Their text is part of every cache
key through `PROMPT_VERSION`: change a prompt, bump the version, and the types it serves are redone."""

from __future__ import annotations

import json
from collections.abc import Sequence

from sleuth.compile.manifest import ArtifactType, EdgeType

PROMPT_VERSION = "3"
#: Mentions asked of one map call: a reply that lists more runs out of output tokens on a small model.
MAX_MENTIONS_PER_CALL = 20

#: `fields` each kind fills (spec/context.md §4).
KIND_FIELDS: dict[str, dict[str, str]] = {
    "summary": {},
    "topic": {"aliases": "other names of the topic (list of strings)"},
    "entity": {
        "aliases": "other names of the entity (list of strings)",
        "category": "person, organisation, product, system, place, ...",
    },
    "event": {
        "date": "ISO 8601, may be partial: 2024, 2024-03, 2024-03-15",
        "date_precision": "year, month or day",
        "participants": "who took part (list of strings)",
    },
}

_RULES = """Rules:
- Use only what the text says. Never add outside knowledge.
- Every quote must be copied word for word from the text (at most 300 characters), so that it can be
  found in it. A claim without such a quote is discarded.
- The JSON shape below shows where each value goes; the parts in <angle brackets> describe a value:
  write the value itself, never the description.
- Reply with one JSON object and nothing else."""


def _field_shape(kind: str) -> dict[str, str]:
    return {name: f"<{about}>" for name, about in KIND_FIELDS.get(kind, {}).items()}


def is_placeholder(text: str) -> bool:
    """A value copied from a JSON shape above instead of written (small models do this): every
    description there is wrapped in angle brackets, which no real name or summary is."""
    stripped = text.strip()
    return len(stripped) > 2 and stripped.startswith("<") and stripped.endswith(">")


def _describe(art_type: ArtifactType) -> str:
    lines = [f'Type "{art_type.name}" (kind: {art_type.kind}).']
    if art_type.description:
        lines.append(f"What qualifies: {art_type.description}")
    if art_type.coverage:
        lines.append("Address each of these points: " + "; ".join(art_type.coverage) + ".")
    fields = KIND_FIELDS.get(art_type.kind, {})
    if fields:
        lines.append("fields: " + "; ".join(f"{k}: {v}" for k, v in fields.items()) + ".")
    return "\n".join(lines)


def document_system(art_type: ArtifactType, max_tokens: int) -> str:
    what = (
        "Summarise the document."
        if art_type.kind == "summary"
        else f"Gather every {art_type.kind} of this type that the document states, in one artifact."
    )
    shape = {
        "name": "<a short title>",
        "body": "<what the document says, in Markdown: 2 to 6 sentences of your own words>",
        "fields": _field_shape(art_type.kind),
        "quotes": ["<a sentence copied word for word from the text>", "<another one>"],
    }
    return (
        f"You curate a knowledge base. {what}\n{_describe(art_type)}\n"
        f"Keep the body under {max_tokens} tokens.\n{_RULES}\nJSON shape: {json.dumps(shape)}"
    )


def map_system(art_type: ArtifactType, edges: Sequence[EdgeType], mention_chars: int) -> str:
    shape: dict[str, object] = {
        "mentions": [
            {
                "subject": "<the name as the text writes it>",
                "aliases": ["<another name the text uses for it, if any>"],
                "text": f"<what the text says about it, at most {mention_chars} characters>",
                "quotes": ["<a sentence about it copied word for word from the text>"],
                "fields": _field_shape(art_type.kind),
            }
        ],
        "edges": [],
    }
    parts = [
        f"You curate a knowledge base. List every {art_type.kind} of the type below that the text mentions"
        f" (at most {MAX_MENTIONS_PER_CALL}, the most important first).",
        _describe(art_type),
    ]
    if edges:
        shape["edges"] = [
            {
                "type": "<relation name>",
                "from": "<name>",
                "to": "<name>",
                "attributes": {},
                "quote": "<the sentence stating it, copied word for word>",
            }
        ]
        parts.append("Also list these relations when the text states them:")
        for edge in edges:
            attrs = f" Attributes: {', '.join(edge.attributes)}." if edge.attributes else ""
            about = f" {edge.description}" if edge.description else ""
            parts.append(f'- "{edge.name}": from a {edge.from_} to a {edge.to}.{about}{attrs}')
        parts.append('Write "this document" for an end that is the document itself.')
    parts += [_RULES, f"JSON shape: {json.dumps(shape)}"]
    return "\n".join(parts)


def reduce_system(art_type: ArtifactType, max_tokens: int) -> str:
    shape = {
        "name": "<the subject's name>",
        "body": "<what the sources say about it, in Markdown, in your own words>",
        "fields": _field_shape(art_type.kind),
    }
    return (
        "You curate a knowledge base. Write one artifact about the subject below from what several "
        f"sources say about it.\n{_describe(art_type)}\nKeep the body under {max_tokens} tokens. "
        'Where the sources disagree, add a section "## Conflicts" that gives each side with its quote '
        f"and source.\n{_RULES}\nJSON shape: {json.dumps(shape)}"
    )


def rows_system(art_type: ArtifactType, columns: Sequence[tuple[str, str, str | None]]) -> str:
    cols = "\n".join(f"- {name} ({kind}){': ' + about if about else ''}" for name, kind, about in columns)
    shape = {
        "rows": [
            {
                "values": {name: f"<{name}, or null>" for name, _, _ in columns},
                "quote": "<the sentence stating the row, copied word for word>",
            }
        ]
    }
    about = f"\nWhat qualifies: {art_type.description}" if art_type.description else ""
    return (
        f'You fill the table "{art_type.name}" from the text. One row per {art_type.kind} the text states; '
        f"use null for a value the text does not give.{about}\nColumns:\n{cols}\n"
        f"Each row needs one quote that states it.\n{_RULES}\nJSON shape: {json.dumps(shape)}"
    )


def queries_system(count: int) -> str:
    shape = {"queries": ["<a question>"]}
    return (
        f"Write {count} questions a user could ask of this knowledge base, each answerable from the "
        "artifacts listed. Make them specific: name the subjects. Reply with one JSON object and nothing "
        f"else. JSON shape: {json.dumps(shape)}"
    )


def source_text(source_path: str, text: str) -> str:
    return f"Document: {source_path}\n\n<text>\n{text}\n</text>"
