"""Explore with a model, below the API (issue 27, item 4): the prompt a model reads and what survives
of its reply, with a scripted model (the only double: no LLM runs here)."""

from __future__ import annotations

import json
import os
from pathlib import Path

from sleuth.compile.explore import explore
from sleuth.compile.explore_model import MAX_DIGEST_CHARS, refine, user_prompt
from sleuth.compile.extraction.cache import ExtractionCache
from sleuth.compile.templates import TEMPLATES
from sleuth.models.scripted import ScriptedModel
from sleuth.settings import DEFAULTS

REPLY = {
    "template": "general",
    "confidence": 0.6,
    "reasons": ["notes about cafés"],
    "artifact_types": [{"name": "Document", "kind": "doc"}],
}


def test_a_file_name_that_is_not_utf8_reaches_the_model_as_text(tmp_path: Path) -> None:
    """A name the file system hands over as bytes (`caf\\xe9.md` → a lone surrogate) is sent with a
    `?` in its place: the prompt is valid JSON text and the reply is cached under its key."""
    sources = tmp_path / "sources"
    sources.mkdir()
    (sources / os.fsdecode(b"caf\xe9.md")).write_text("# Menu\n\nCoffee and cake.\n", encoding="utf-8")
    (sources / "tea.md").write_text("# Tea\n\nGreen and black.\n", encoding="utf-8")
    proposal = explore(sources, max_text_bytes=DEFAULTS.max_text_bytes)
    model = ScriptedModel([json.dumps(REPLY)])
    cache = ExtractionCache(tmp_path / "cache")
    refined = refine(proposal, TEMPLATES, model, cache, concurrency=DEFAULTS.curate_concurrency)
    assert refined.template == "general" and refined.reasons == ["notes about cafés"]
    prompt = model.calls[0].messages[1].content
    json.dumps(prompt).encode("utf-8")  # what a provider sends: no lone surrogate left in it
    assert "## caf?.md (markdown, 1 page read" in prompt
    again = refine(
        proposal, TEMPLATES, ScriptedModel([]), cache, concurrency=DEFAULTS.curate_concurrency
    )  # cached: no call is made
    assert again == refined


def test_the_digest_keeps_whole_documents_within_its_budget(tmp_path: Path) -> None:
    sources = tmp_path / "sources"
    sources.mkdir()
    for n in range(24):
        (sources / f"note-{n:02}.md").write_text(f"# Note {n}\n\n" + "word " * 2000, encoding="utf-8")
    prompt = user_prompt(explore(sources, max_text_bytes=DEFAULTS.max_text_bytes), TEMPLATES)
    digest = prompt.split("sources.\n\n", 1)[1]
    assert len(digest) <= MAX_DIGEST_CHARS + 24 * 2  # the separators between documents
    assert digest.count("## note-") == 24  # 700 characters of lead each: all fit
    assert all(block.startswith("## note-") for block in digest.split("\n\n"))
