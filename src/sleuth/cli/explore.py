"""`sleuth explore`: which manifest fits a context's sources, before the first curate (issue 27, item 4)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer

from sleuth.cli.app import USAGE, app, console, fail, failure, find_context, opened, say
from sleuth.compile.explore_model import propose
from sleuth.compile.extraction.cache import ExtractionCache
from sleuth.format.text import collapsed, normalize_text
from sleuth.models.catalog import Catalog, CatalogError, build_model


def _plain(text: str) -> str:
    """What a model or a document wrote, safe for a terminal: no escape or other control codes."""
    return collapsed(normalize_text(text))


@app.command("explore")
def explore_cmd(
    context: Annotated[str, typer.Option("--context", "-c", help="Context slug.")],
    model: Annotated[
        str | None,
        typer.Option(
            help="A model that fits the proposal to the corpus (catalog id or tier); spends tokens."
        ),
    ] = None,
    out: Annotated[
        Path | None,
        typer.Option("--out", help="Write the proposed manifest here, for `sleuth compile --manifest`."),
    ] = None,
    json_out: Annotated[bool, typer.Option("--json", help="Print the whole proposal as JSON.")] = False,
) -> None:
    """Propose the manifest that fits CONTEXT's sources: a template, its confidence and the reasons,
    read from a sample of the sources with no model; with --model, that model adapts the template's
    artifact types to the corpus."""
    home, settings = opened()
    ctx = find_context(home, context)
    asked = None
    if model is not None:
        catalog = Catalog.load(home.root)
        try:
            config = catalog.resolve(model)
        except CatalogError as exc:
            raise failure(exc) from None
        if config.provider == "offline":
            raise fail(f"{config.id} is the offline planner: explore without --model instead", USAGE)
        if not catalog.available(config):
            raise fail(catalog.missing(config) or f"model {config.id!r} is not available here")
        asked = (config.id, build_model(config, catalog.env), ExtractionCache.of(ctx))
    found = propose(ctx.sources, asked, settings=settings)
    if found is None:
        raise fail(f"{context} has no sources to explore: add files with sleuth compile DIR -c {context}")
    if out is not None:
        out.write_text(json.dumps(found["manifest"], indent=2) + "\n", encoding="utf-8")
    if json_out:
        console.print_json(json.dumps(found))
        return
    by = f" by {found['model']}" if found["proposed_by"] == "model" else ""
    say(
        ("suggested:", "bold"),
        f" {found['label']} ({found['template']}){by}, confidence {found['confidence']:.0%}",
    )
    if found["model_note"]:
        say(("note:", "yellow"), " ", found["model_note"])
    for reason in found["reasons"]:
        say(f"  - {reason}")
    types = found["manifest"].get("curate", {}).get("artifacts", {}).get("artifact_types", [])
    say("types: " + ", ".join(f"{t['name']} ({t['kind']})" for t in types))
    skipped = found["without_model"]["skipped"]
    if skipped:
        say(("without a model,", "dim"), f" a curate skips {', '.join(skipped)}")
    if out is not None:
        say(f"manifest written to {out}: sleuth compile SOURCES -c {context} --manifest {out}")
