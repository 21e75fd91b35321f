"""`sleuth profile`: what a curate with a model will cost, before anything is spent (issue 13)."""

from __future__ import annotations

import json
from typing import Annotated

import typer
from rich.table import Table

from sleuth.cli.app import app, console, failure, find_context, opened, say
from sleuth.compile.extraction.cache import ExtractionCache
from sleuth.compile.extraction.choose import curation_model, needs_model
from sleuth.compile.extraction.profile import Band, current_pages, profile_curate
from sleuth.compile.manifest import ManifestError, parse_manifest
from sleuth.models.catalog import TIERS, Catalog, CatalogError
from sleuth.store.contexts.ledger import Ledger


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
    home, settings = opened()
    ctx = find_context(home, context)
    try:
        manifest = parse_manifest(ctx.manifest_data())
        catalog = Catalog.load(home.root)
        # an estimate calls no model: neither its SDK nor its key is needed (issue 26, item 5)
        config, note = curation_model(manifest, catalog, model, check_available=False)
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
        current_pages(ctx, max_text_bytes=settings.max_text_bytes),
        config,
        ExtractionCache.of(ctx),
        Ledger.load(ctx.ledger_file).extraction,
        concurrency=settings.curate_concurrency,
    )
    if json_out:
        console.print_json(json.dumps(estimate.to_json()))
        return
    table = Table("type", "scope", "calls", "cached", "input tokens", "output tokens", "time", "cost")
    for row in [*estimate.types, estimate.total]:
        cost = "–" if row.cost_usd is None else f"${row.cost_usd.low:.2f}–{row.cost_usd.high:.2f}"
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
    if estimate.total.cost_usd is None:  # say why the column is empty, and how to fill it
        console.print(
            f"  no cost: {estimate.model} has no prices; set price_input_per_token and "
            f'price_output_per_token under [models."{estimate.model}"] in {home.root / "config.toml"}',
            highlight=False,
        )


@app.command("models")
def models_cmd(
    json_out: Annotated[
        bool, typer.Option("--json", help="Print the catalog as JSON (as GET /models).")
    ] = False,
) -> None:
    """List the models this home can use (its config.toml and the built-in offline planner), whether each
    can run here and, if not, what it lacks; `--model` takes an id, a tier or openai:NAME."""
    home, _settings = opened()
    try:
        catalog = Catalog.load(home.root)
    except CatalogError as exc:
        raise failure(exc) from None
    if json_out:
        typer.echo(json.dumps(catalog.public(), ensure_ascii=False, indent=2))
        return
    table = Table("model", "provider", "runs here", "tiers")
    # Only the tiers config.toml maps: an unmapped one answers with the default but curates with no
    # model (`compile.extraction.choose`), so listing it beside the default said it was mapped.
    tiers: dict[str, list[str]] = {}
    for tier, model_id in catalog.tiers.items():
        tiers.setdefault(model_id, []).append(tier)
    unmapped = [tier for tier in TIERS if tier not in catalog.tiers]
    lacking: list[str] = []
    for config in catalog.models.values():
        runs = catalog.available(config)
        if not runs:
            lacking.append(catalog.missing(config) or f"{config.id} cannot run here")
        mark = " (default)" if config.id == catalog.default else ""
        table.add_row(
            config.id + mark, config.provider, "yes" if runs else "no", ", ".join(tiers.get(config.id, []))
        )
    console.print(table)
    for reason in lacking:  # whole lines, never cut by the table's width
        say(("not here: ", "yellow"), reason)
    if unmapped:
        say(
            ("tiers not mapped: ", "yellow"),
            f"{', '.join(unmapped)}: a turn that names one uses the default ({catalog.default}); a curate "
            "whose artifact_model is one uses no model until [tiers] in config.toml maps it",
        )
    say(
        "Any OpenAI or Anthropic model by name also works: --model openai:gpt-4.1, anthropic:NAME, or "
        "openai-compatible:NAME@http://localhost:8000/v1 for a local server; add models to "
        f"{home.root / 'config.toml'}."
    )
