"""Commands that answer: `ask` (one turn, streamed live), `trace` (a stored trace) and `replay`
(re-execute a stored turn and report the first difference)."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from pydantic import ValidationError

from sleuth.agent.request import INT_BOUNDS
from sleuth.cli.app import (
    FAILED,
    USAGE,
    app,
    console,
    context_missing,
    err,
    fail,
    opened,
    quiet_exit,
    styled,
)
from sleuth.cli.turn_view import StepPrinter, print_answer
from sleuth.errors import Invalid
from sleuth.format.problems import first_problem
from sleuth.settings import TOOL_OUTPUT_CHARS, TURN_CAP_SECONDS, Settings
from sleuth.store.contexts.home import Home

if TYPE_CHECKING:
    from sleuth.agent.turn import Runtime, TurnError
    from sleuth.models.catalog import Catalog

LOW = {name: low for name, (low, _) in INT_BOUNDS.items()}  # the turn contract's ranges
HIGH = {name: high for name, (_, high) in INT_BOUNDS.items()}


@app.command("ask")
def ask_cmd(
    question: Annotated[str, typer.Argument(help="The question; - reads it from standard input.")],
    context: Annotated[list[str] | None, typer.Option("--context", "-c", help="Context slug (1-10).")] = None,
    model: Annotated[
        str | None,
        typer.Option(help="Catalog id, tier, or openai:NAME / anthropic:NAME / openai-compatible:NAME@URL."),
    ] = None,
    shape: Annotated[
        Path | None, typer.Option(help="JSON Schema file; the answer becomes a JSON document.")
    ] = None,
    session: Annotated[
        str | None, typer.Option(help="Continue this session (id printed by an earlier ask).")
    ] = None,
    max_steps: Annotated[
        int | None,
        typer.Option(min=LOW["max_steps"], max=HIGH["max_steps"], help="Most steps the model may take."),
    ] = None,
    system_prompt: Annotated[str | None, typer.Option(help="Session instructions (first turn only).")] = None,
    workflow: Annotated[str | None, typer.Option(help="search | search_cc | search_rag")] = None,
    max_tool_output_chars: Annotated[
        int,
        typer.Option(
            min=LOW["max_tool_output_chars"],
            max=HIGH["max_tool_output_chars"],
            help="Characters of a step's printed output the model sees (the rest is cut with a notice).",
        ),
    ] = TOOL_OUTPUT_CHARS,
    timeout: Annotated[
        int,
        typer.Option(
            help="Turn time cap in seconds.", min=LOW["timeout_seconds"], max=HIGH["timeout_seconds"]
        ),
    ] = TURN_CAP_SECONDS,
    retrieval_only: Annotated[
        bool, typer.Option("--retrieval-only", help="Print the fused hits of one hybrid search; no model.")
    ] = False,
    pointers_only: Annotated[
        bool, typer.Option("--pointers-only", help="As --retrieval-only, hits without their text.")
    ] = False,
    max_retrieved: Annotated[
        int,
        typer.Option(
            help="Hits of a retrieval-only turn.", min=LOW["max_retrieved"], max=HIGH["max_retrieved"]
        ),
    ] = 20,
    max_retrieved_chars: Annotated[
        int,
        typer.Option(
            help="Text per hit of a retrieval-only turn.",
            min=LOW["max_retrieved_chars"],
            max=HIGH["max_retrieved_chars"],
        ),
    ] = 2_000,
    json_out: Annotated[bool, typer.Option("--json", help="Print only the Query object on stdout.")] = False,
    verbose: Annotated[
        bool, typer.Option("--verbose", "-v", help="Show each step's whole code and more of its output.")
    ] = False,
    quiet: Annotated[
        bool, typer.Option("--quiet", "-q", help="Print only the answer and its citations, no steps.")
    ] = False,
) -> None:
    """Answer one question over one or more contexts, streaming each step, then the cited answer."""
    if question == "-":  # `echo "…" | sleuth ask -c acme -`, as llm and other Unix tools read
        question = sys.stdin.read().strip()
        if not question:
            raise fail("no question on standard input", USAGE)
    from sleuth.agent.turn import TurnError, TurnRequest
    from sleuth.models.catalog import CatalogError

    shape_doc = None
    if shape is not None:
        try:
            shape_doc = json.loads(shape.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise fail(f"cannot read the shape {shape}: {exc}") from None
    try:
        request = TurnRequest(
            ask=question,
            scope=list(context or []) or None,
            session_id=session,
            model=model,
            shape=shape_doc,
            max_steps=max_steps,
            timeout_seconds=timeout,
            max_tool_output_chars=max_tool_output_chars,
            system_prompt=system_prompt,
            workflow=workflow,
            retrieval_only=retrieval_only,
            pointers_only=pointers_only,
            max_retrieved=max_retrieved,
            max_retrieved_chars=max_retrieved_chars,
        )
    except ValidationError as exc:
        raise fail(first_problem(exc), USAGE, machine="invalid_request" if json_out else None) from None
    home, settings = opened()
    try:
        runtime = command_runtime(home, settings)
    except CatalogError as exc:
        raise fail(str(exc), USAGE, machine="model_unavailable" if json_out else None) from None
    from sleuth.agent.records import query_document
    from sleuth.cli.foreground import HOLDER, Foreground, Interrupted, output_closed

    with runtime, runtime.sandbox_host:
        try:
            prepared = runtime.prepare(request, holder=HOLDER)
        except TurnError as exc:
            raise turn_refused(exc, home, list(context or []), json_out) from None
        offline = all(config.provider == "offline" for config in prepared.model_configs)
        out = err if json_out else console
        # on a terminal the steps give way to one line once the answer is there; a pipe keeps them all
        live = not (json_out or quiet or verbose) and out.is_terminal
        printer = StepPrinter(out, verbose=verbose, offline=offline, live=live)
        foreground = Foreground(runtime, prepared, (lambda _event: None) if quiet else printer)
        completed = False
        try:
            query = query_document(
                foreground.run(
                    lambda why: err.print(f"{why}: cancelling the turn (Ctrl-C again to leave now)")
                )
            )
            completed = query["status"] == "completed"
        except Interrupted as exc:
            printer.finish(completed=False)
            err.print(str(exc))
            raise typer.Exit(130) from None
        finally:
            printer.finish(completed)
    if foreground.lost_output.is_set():
        raise quiet_exit()
    try:
        if json_out:
            typer.echo(json.dumps(query, ensure_ascii=False, indent=2))
        else:
            print_answer(query, console)
    except OSError as exc:
        if not output_closed(exc):
            raise
        raise quiet_exit() from None
    if query["status"] != "completed":
        raise typer.Exit(130 if foreground.cancel_reason == "interrupted" else 1)


def command_runtime(home: Home, settings: Settings, catalog: Catalog | None = None) -> Runtime:
    """A runtime for this command alone, on the settings it read at its start: their server database,
    host budget and embedder threads. Its sandbox host is the command's to close, after the runtime
    (`with runtime, runtime.sandbox_host:`)."""
    from sleuth.agent.turn import Runtime
    from sleuth.sandbox.host import SandboxHost
    from sleuth.sandbox.limits import HostBudget
    from sleuth.store.records.server_db import ServerDB

    return Runtime(
        home,
        catalog=catalog,
        db=ServerDB.for_home(home, settings.database_url),
        sandbox_host=SandboxHost(embed_threads=settings.embed_threads),
        budget=HostBudget.from_settings(settings),
    )


def turn_refused(exc: TurnError, home: Home, scope: list[str], json_out: bool) -> typer.Exit:
    """A turn the engine refused, said for people (the machine code only in `--json`'s envelope): a
    missing context names the home looked in and the nearest names; a request it refuses as invalid is
    a usage error."""
    machine = exc.code if json_out else None
    if exc.code == "context_not_found":
        known = [info.slug for _ctx, info in home.contexts()]
        missing = next((slug for slug in scope if slug not in known), scope[0] if scope else "")
        return context_missing(missing, home, known, machine=machine)
    if exc.code == "scope_required":  # the engine's words name its field, not this command's flag
        known = [info.slug for _ctx, info in home.contexts()]
        return fail(
            "no context to answer from: pass --context NAME (sleuth contexts lists them)",
            USAGE,
            hint=f"contexts here: {', '.join(known)}" if known else None,
            machine=machine,
        )
    if exc.code == "model_unavailable" and isinstance(exc.__context__, Invalid):
        return fail(str(exc), USAGE, machine=machine)  # a model name that names no model
    usage = exc.code in {
        "invalid_request",
        "conflicting_options",
        "unknown_tool",
        "invalid_shape",
        "scope_required",
    }
    return fail(str(exc), USAGE if usage else FAILED, machine=machine)


@app.command("trace")
def trace_cmd(
    query_id: Annotated[str, typer.Argument(help="The query's id (qry_…), as `ask` printed it.")],
    json_out: Annotated[bool, typer.Option("--json", help="Print the trace as JSON.")] = False,
) -> None:
    """Show the stored trace of a turn: steps, calls, evidence, citations dropped, versions."""
    from sleuth.store.records.server_db import ServerDB

    home, settings = opened()
    db = ServerDB.for_home(home, settings.database_url)
    trace = db.get_trace(query_id)
    query = db.get_query(query_id)
    if trace is None or query is None:
        raise fail(f"no trace for query {query_id!r}", FAILED)
    if json_out:
        typer.echo(json.dumps(trace, ensure_ascii=False, indent=2))
        return
    rollup = trace.get("rollup")
    console.print(
        styled(
            (query_id, "bold"),
            f" {query['status']} · model {query.get('model')} · {len(trace.get('steps') or [])} steps · "
            f"stop {None if rollup is None else rollup.get('stop_reason')}",
        ),
        highlight=False,
    )
    console.print(f"ask: {query['input'][0]['content']}", highlight=False, markup=False)
    sandbox = trace.get("sandbox") or {}
    console.print(
        f"sandbox: {sandbox.get('mode')} · layers {', '.join(sandbox.get('layers') or [])}", highlight=False
    )
    printer = StepPrinter(console)
    for step in trace.get("steps") or []:
        printer({"type": "response.step", **step, "status": "running"})
        printer({"type": "response.step", **step, "tool_calls": step.get("calls")})
    evidence = trace.get("evidence") or []
    seen = sum(1 for e in evidence if e.get("seen"))
    cited = sum(1 for e in evidence if e.get("cited"))
    console.print(f"evidence: {len(evidence)} spans, {seen} seen, {cited} cited", highlight=False)
    for dropped in trace.get("citations_dropped") or []:
        console.print(styled(("dropped citation", "yellow"), f" {dropped}"), highlight=False)
    console.print(f"versions: {json.dumps(trace.get('versions'))}", highlight=False, markup=False)
    print_answer(query, console)


@app.command("replay")
def replay_cmd(
    query_id: Annotated[str, typer.Argument(help="The query's id (qry_…), as `ask` printed it.")],
    json_out: Annotated[bool, typer.Option("--json", help="Print the report as JSON.")] = False,
) -> None:
    """Re-execute a stored turn from its replay log against the same context version."""
    from sleuth.agent.replay import ReplayError, replay
    from sleuth.store.records.server_db import ServerDB

    home, settings = opened()
    try:
        report = replay(home, query_id, ServerDB.for_home(home, settings.database_url))
    except ReplayError as exc:
        raise fail(str(exc), FAILED) from None
    if json_out:
        typer.echo(json.dumps(report, ensure_ascii=False, indent=2))
    elif report["identical"]:
        console.print(
            styled(("identical", "green"), f": {report['steps_compared']} steps compared"), highlight=False
        )
    else:
        diff = report["first_difference"]
        console.print(
            styled(
                ("different", "red"),
                f" at {diff['step_id']} field {diff['field']}:\n"
                f"  recorded: {str(diff['recorded'])[:500]}\n  replayed: {str(diff['replayed'])[:500]}",
            ),
            highlight=False,
        )
    if not report["identical"]:
        raise typer.Exit(1)
