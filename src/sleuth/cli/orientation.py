"""`sleuth orientation`: print what a model is given as its orientation over some contexts (issue 43),
the system message a turn builds (`agent.orientation.orientation_text`), word for word."""

from __future__ import annotations

from typing import Annotated

import typer

from sleuth.agent.actions import SDK_NAMES
from sleuth.agent.orientation import context_brief, orientation_text
from sleuth.cli.answer import HIGH, LOW
from sleuth.cli.app import FAILED, USAGE, app, did_you_mean, fail, find_context, opened
from sleuth.sdk.orientation import OrientationSettings
from sleuth.settings import TOOL_OUTPUT_CHARS


@app.command("orientation")
def orientation_cmd(
    context: Annotated[
        list[str], typer.Option("--context", "-c", help="Context slug (1-10, in scope order).")
    ],
    model: Annotated[
        str | None,
        typer.Option(
            help="The model whose prompt profile and tool protocol to use (catalog id, tier or spec); "
            "default: the one a turn would use."
        ),
    ] = None,
    tool: Annotated[
        list[str] | None,
        typer.Option("--tool", help="Only these primitives, as a session's `tools` (repeat for more)."),
    ] = None,
    system_prompt: Annotated[str | None, typer.Option(help="A session's system prompt.")] = None,
    guardrails: Annotated[str | None, typer.Option(help="A session's guardrails.")] = None,
    max_tool_output_chars: Annotated[
        int,
        typer.Option(
            min=LOW["max_tool_output_chars"],
            max=HIGH["max_tool_output_chars"],
            help="Characters of a step's output shown, as the rules tell the model.",
        ),
    ] = TOOL_OUTPUT_CHARS,
) -> None:
    """Print the orientation a model is given over CONTEXTs: a turn's system message, word for word
    (the rules, the SDK reference, each context's documents, types and tables, the instructions).
    The same text the `orientation()` primitive returns for the same settings."""
    from sleuth.models.catalog import Catalog, CatalogError

    if not 1 <= len(context) <= 10:
        raise fail("give 1 to 10 --context options", USAGE)
    unknown = [name for name in tool or [] if name not in SDK_NAMES]
    if unknown:
        hint = did_you_mean(unknown[0], SDK_NAMES) or f"known: {', '.join(SDK_NAMES)}"
        raise fail(f"unknown tool {unknown[0]!r}", USAGE, hint=hint)
    home, _settings = opened()
    try:
        config = Catalog.load(home.root).resolve(model)
    except CatalogError as exc:
        raise fail(str(exc), USAGE) from None
    briefs = []
    for slug in dict.fromkeys(context):
        ctx = find_context(home, slug)
        live = ctx.live_version()
        if live is None:
            raise fail(f"context {slug!r} has no live version: compile it first", FAILED)
        briefs.append(context_brief(ctx, live))
    settings = OrientationSettings(
        profile=config.prompt_profile,
        protocol=config.tool_protocol,
        tools=tuple(tool) if tool else None,
        system_prompt=system_prompt,
        guardrails=guardrails,
        max_tool_output_chars=max_tool_output_chars,
    )
    typer.echo(orientation_text(briefs, settings))
