"""`sleuth profile`: what a curate with a model will cost, before anything is spent (issue 13)."""

from __future__ import annotations

import json
from typing import Annotated

import typer
from rich.table import Table

from sleuth.cli.app import app, console, failure, find_context
from sleuth.compile.extraction.cache import ExtractionCache
from sleuth.compile.extraction.choose import curation_model, needs_model
from sleuth.compile.extraction.profile import Band, current_pages, profile_curate
from sleuth.compile.manifest import ManifestError, parse_manifest
from sleuth.models.catalog import Catalog, CatalogError
from sleuth.store.ledger import Ledger
from sleuth.store.replica import open_home


def _band(band: Band, unit: str = "") -> str:
    if band.low == band.high:
        return f"{band.low:,.0f}{unit}"
    return f"{band.low:,.0f}–{band.high:,.0f}{unit}"


@app.command("profile")
def profile_cmd(
    context: Annotated[str, typer.Option("--context", "-c", help="Context slug.")],
    model: Annotated[
        str | None, typer.Option(help="Model to profile (catalog id, tier or spec); default: the manifest's.")
    ] = None,
    json_out: Annotated[bool, typer.Option("--json", help="Print the estimate as JSON.")] = False,
) -> None:
    """Estimate the calls, tokens, time and cost of curating CONTEXT with a model, per type."""
    home = open_home()
    ctx = find_context(home, context)
    try:
        manifest = parse_manifest(ctx.manifest_data())
        catalog = Catalog.load(home.root)
        config, note = curation_model(manifest, catalog, model)
    except (ManifestError, CatalogError) as exc:
        raise failure(exc) from None
    if not needs_model(manifest):
        console.print("nothing in the manifest needs a model: a curate makes no model call")
        return
    if config is None:
        console.print(f"no model would be called: {note or 'artifact_model maps to the offline planner'}")
        return
    estimate = profile_curate(
        manifest,
        current_pages(ctx),
        config,
        ExtractionCache.of(ctx),
        Ledger.load(ctx.ledger_file).extraction,
    )
    if json_out:
        console.print_json(json.dumps(estimate.to_json()))
        return
    table = Table("type", "scope", "calls", "cached", "input tokens", "output tokens", "time", "cost")
    for row in [*estimate.types, estimate.total]:
        cost = "" if row.cost_usd is None else f"${row.cost_usd.low:.2f}–{row.cost_usd.high:.2f}"
        table.add_row(
            row.type,
            row.scope,
            _band(row.calls),
            str(row.cached_calls),
            _band(row.input_tokens),
            _band(row.output_tokens),
            f"{row.seconds.low:,.0f}–{row.seconds.high:,.0f} s",
            cost,
        )
    console.print(f"curating {context} ({estimate.sources} sources) with {estimate.model}:")
    console.print(table)
    for line in estimate.assumptions:
        console.print(f"  {line}", highlight=False)
