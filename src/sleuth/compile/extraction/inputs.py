"""What one extraction call reads, and what its cache key is made of: the text windows of a source,
the hash of that text, and the hash of the type's definition with the knobs and edges it uses."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from typing import Literal

from sleuth.compile.extraction import prompts
from sleuth.compile.extraction.edges import edges_of
from sleuth.compile.manifest import ArtifactType, Manifest
from sleuth.compile.pages import Page
from sleuth.compile.typed_tables import resolve_columns
from sleuth.models.base import ModelConfig


def type_hash(art_type: ArtifactType, manifest: Manifest) -> str:
    """What a type's replies depend on: its definition, the global knobs and the edges it maps."""
    knobs = manifest.curate.artifacts.model_dump(
        mode="json",
        include={"max_tokens", "max_doc_chars", "extraction_window_chars", "mention_max_chars"},
    )
    edges = [e.model_dump(mode="json", by_alias=True) for e in edges_of(art_type, manifest)]
    payload = {"type": art_type.model_dump(mode="json"), "knobs": knobs, "edges": edges}
    return hashlib.sha256(json.dumps(payload, sort_keys=True).encode()).hexdigest()


def text_hash(pages: Sequence[Page]) -> str:
    digest = hashlib.sha256()
    for page in pages:
        digest.update(f"{page.page}\x1f{page.text}\x1e".encode("utf-8", "surrogatepass"))
    return digest.hexdigest()


def windows(pages: Sequence[Page], max_chars: int, window_chars: int) -> tuple[list[str], bool]:
    """The text the model reads, and whether some of the source was left unread (§3.2): the head up to
    `max_chars` when windowing is off, else consecutive windows of `window_chars` over all of it."""
    text = "\n\n".join(p.text for p in pages)
    if window_chars <= 0:
        return [text[:max_chars]], len(text) > max_chars
    size = min(window_chars, max_chars)
    return [text[i : i + size] for i in range(0, max(len(text), 1), size)], False


Step = Literal["document", "map", "rows"]


def step_of(art_type: ArtifactType) -> Step:
    """The call a type makes once per source: a document artifact (document scope, and the per-source
    summaries a corpus summary is reduced from), a corpus map, or rows found in prose."""
    if art_type.format == "sqlite":
        return "rows"
    if art_type.resolved_scope == "document" or art_type.kind == "summary":
        return "document"
    return "map"


def per_source_system(step: Step, art_type: ArtifactType, manifest: Manifest) -> str:
    """The system prompt of that per-source call (what the extractor sends and the profile counts)."""
    arts = manifest.curate.artifacts
    if step == "rows":
        columns, _warnings = resolve_columns(art_type)
        return prompts.rows_system(art_type, [(c.name, c.type, c.description) for c in columns])
    if step == "document":
        return prompts.document_system(art_type, arts.max_tokens)
    return prompts.map_system(art_type, edges_of(art_type, manifest), arts.mention_max_chars)


def fingerprint_of(config: ModelConfig) -> str:
    """The model as its replies depend on it: the id and what it resolves to (provider, model,
    endpoint). It keys the cache and the ledger's extractor leg: re-point an id and the work is redone."""
    return f"{config.id}|{config.provider}:{config.model}@{config.base_url or ''}"


def call_key_parts(
    fingerprint: str, art_type: ArtifactType, manifest: Manifest, source: str, pages: Sequence[Page]
) -> tuple[str, ...]:
    """The cache key of a per-source call, short of its step and window: the prompt version, the
    model's fingerprint, the type, the source's path (the prompt names it) and the text it reads."""
    return (prompts.PROMPT_VERSION, fingerprint, type_hash(art_type, manifest), source, text_hash(pages))
