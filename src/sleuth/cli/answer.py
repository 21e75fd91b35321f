"""Commands that answer: `ask` (one turn, streamed live), `trace` (a stored trace) and `replay`
(re-execute a stored turn and report the first difference)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any

import typer
from pydantic import ValidationError
from rich.console import Console
from rich.syntax import Syntax

from sleuth.agent.request import INT_BOUNDS
from sleuth.cli.app import app, console, err, fail
from sleuth.settings import TOOL_OUTPUT_CHARS, TURN_CAP_SECONDS
from sleuth.store.replica import open_home

LOW = {name: low for name, (low, _) in INT_BOUNDS.items()}  # the turn contract's ranges
HIGH = {name: high for name, (_, high) in INT_BOUNDS.items()}
COMPACT_CODE_LINES = 4
COMPACT_OUTPUT_LINES = 3


class StepPrinter:
    """Renders the turn's events as they arrive: commentary, code, SDK calls and timings. Compact by
    default (the first lines of each step's code and output); `verbose` shows all the code."""

    def __init__(self, out: Console, verbose: bool = False) -> None:
        self.out = out
        self.verbose = verbose

    def __call__(self, event: dict[str, Any]) -> None:
        kind = event.get("type")
        if kind == "response.step" and event.get("status") == "running":
            title = event.get("commentary") or "(no commentary)"
            self.out.print(f"[bold cyan]▶ {event['step_id']}[/bold cyan] {title}", highlight=False)
            source = str((event.get("code") or {}).get("source", "")).rstrip("\n")
            lines = source.splitlines()
            if lines and not self.verbose and len(lines) > COMPACT_CODE_LINES:
                hidden = len(lines) - COMPACT_CODE_LINES
                source = "\n".join(lines[:COMPACT_CODE_LINES]) + f"\n# … {hidden} more lines (--verbose)"
            if source:
                self.out.print(Syntax(source, "python", theme="ansi_dark", word_wrap=True))
        elif kind == "response.step":
            status = event.get("status")
            colour = "green" if status == "completed" else "red"
            cost = event.get("cost") or {}
            self.out.print(
                f"[{colour}]  {status}[/{colour}] decide {cost.get('decide_ms', 0)} ms · "
                f"execute {cost.get('execute_ms', 0)} ms",
                highlight=False,
            )
            for call in event.get("tool_calls") or []:
                result = ", ".join(f"{k}={v}" for k, v in (call.get("result") or {}).items())
                mark = "" if call.get("ok") else " [red]failed[/red]"
                self.out.print(
                    f"  · {call['fn']}({call.get('args', '')[:100]}) → {result} "
                    f"({call.get('duration_ms', 0):.0f} ms){mark}",
                    highlight=False,
                )
            output = str(event.get("output") or "")
            lines = output.splitlines()
            shown = 8 if self.verbose else COMPACT_OUTPUT_LINES
            preview = "\n".join("    " + line[:160] for line in lines[:shown])
            if len(lines) > shown:
                preview += f"\n    … {len(lines) - shown} more lines ({event.get('output_chars', 0):,} chars)"
            if preview:
                self.out.print(preview, highlight=False, markup=False)
        elif kind == "response.failed":
            self.out.print(f"[red]turn failed:[/red] {event.get('error')}", highlight=False)


def print_hits(query: dict[str, Any], out: Console) -> None:
    """The hits of a retrieval-only turn: where each is, its score, and the start of its text."""
    hits = (query.get("output_json") or {}).get("hits") or []
    total = (query.get("rollup") or {}).get("total_hits", len(hits))
    out.rule(f"hits ({len(hits)} of {total})")
    for n, hit in enumerate(hits, 1):
        if hit["kind"] == "artifact":
            where = f"{hit['type']} {hit['name']!r}" + (f" ← {hit['source']}" if hit.get("source") else "")
        else:
            section = " > ".join(hit.get("section_path") or [])
            pages = ",".join(str(p) for p in hit.get("pages") or [])
            where = f"{hit['source']} p.{pages}" + (f" § {section}" if section else "")
        out.print(
            f"[bold]{n}.[/bold] {hit['kind']} [dim]{hit['context']}[/dim] {where} "
            f"[dim]({hit['score']:.4f})[/dim]",
            highlight=False,
        )
        if "text" in hit:
            out.print(f"    {' '.join(hit['text'].split())[:300]}", highlight=False, markup=False)
    out.print(
        f"[dim]{query.get('runtime_ms', 0)} ms · session {query.get('session_id')} · "
        f"query {query.get('id')}[/dim]",
        highlight=False,
    )


def print_answer(query: dict[str, Any], out: Console) -> None:
    """The answer, then its numbered citations with file, page and the quoted span."""
    if (query.get("rollup") or {}).get("stop_reason") == "retrieval_only":
        print_hits(query, out)
        return
    text = "".join(part.get("text", "") for m in query.get("output") or [] for part in m.get("content") or [])
    out.rule("answer")
    out.print(text or "(no answer)", highlight=False, markup=False)
    if query.get("output_json") is not None:
        out.print(
            json.dumps(query["output_json"], indent=2, ensure_ascii=False), highlight=False, markup=False
        )
    for n, c in enumerate(query.get("citations") or [], 1):
        section = " > ".join((c.get("section_paths") or [[]])[0])
        where = f"{c['source']} p.{c['pages'][0]}" + (f" § {section}" if section else "")
        out.print(f"[bold][{n}][/bold] {where}", highlight=False)
        quote = " ".join(str(c["grounding"]).split())
        out.print(f'    "{quote}"', highlight=False, markup=False)
    synthesis = query.get("synthesis") or {}
    usage = query.get("usage") or {}
    out.print(
        f"[dim]model {query.get('model')} · {len(query.get('steps') or [])} steps · "
        f"{usage.get('input_tokens', 0)} in / {usage.get('output_tokens', 0)} out tokens · "
        f"synthesis {synthesis.get('method', '-')} · {query.get('runtime_ms', 0)} ms · "
        f"session {query.get('session_id')} · query {query.get('id')}[/dim]",
        highlight=False,
    )


def first_problem(exc: ValidationError) -> str:
    first = exc.errors()[0]
    return f"{'.'.join(str(part) for part in first['loc']) or 'request'}: {first['msg']}"


@app.command("ask")
def ask_cmd(
    question: Annotated[str, typer.Argument(help="The question.")],
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
    max_steps: Annotated[int | None, typer.Option(min=LOW["max_steps"], max=HIGH["max_steps"])] = None,
    system_prompt: Annotated[str | None, typer.Option(help="Session instructions (first turn only).")] = None,
    workflow: Annotated[str | None, typer.Option(help="search | search_cc | search_rag")] = None,
    max_tool_output_chars: Annotated[
        int, typer.Option(min=LOW["max_tool_output_chars"], max=HIGH["max_tool_output_chars"])
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
) -> None:
    """Answer one question over one or more contexts, streaming each step, then the cited answer."""
    from sleuth.agent.turn import Runtime, TurnError, TurnRequest
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
        raise fail(f"invalid_request: {first_problem(exc)}") from None
    printer = StepPrinter(err if json_out else console, verbose=verbose)
    try:
        runtime = Runtime(open_home())
    except CatalogError as exc:
        raise fail(f"model_unavailable: {exc}") from None
    with runtime:
        try:
            prepared = runtime.prepare(request)
        except TurnError as exc:
            raise fail(f"{exc.code}: {exc}") from None
        query = runtime.run(prepared, printer).model_dump(mode="json")
    if json_out:
        typer.echo(json.dumps(query, ensure_ascii=False, indent=2))
    else:
        print_answer(query, console)
    if query["status"] != "completed":
        raise typer.Exit(1)


@app.command("trace")
def trace_cmd(
    query_id: str,
    json_out: Annotated[bool, typer.Option("--json", help="Print the trace as JSON.")] = False,
) -> None:
    """Show the stored trace of a turn: steps, calls, evidence, citations dropped, versions."""
    from sleuth.store.server_db import ServerDB

    db = ServerDB.for_home(open_home())
    trace = db.get_trace(query_id)
    query = db.get_query(query_id)
    if trace is None or query is None:
        raise fail(f"no trace for query {query_id!r}", 1)
    if json_out:
        typer.echo(json.dumps(trace, ensure_ascii=False, indent=2))
        return
    console.print(
        f"[bold]{query_id}[/bold] {query['status']} · model {query.get('model')} · "
        f"{len(trace.get('steps') or [])} steps · stop {(trace.get('rollup') or {}).get('stop_reason')}",
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
        console.print(f"[yellow]dropped citation[/yellow] {dropped}", highlight=False)
    console.print(f"versions: {json.dumps(trace.get('versions'))}", highlight=False, markup=False)
    print_answer(query, console)


@app.command("replay")
def replay_cmd(
    query_id: str,
    json_out: Annotated[bool, typer.Option("--json", help="Print the report as JSON.")] = False,
) -> None:
    """Re-execute a stored turn from its replay log against the same context version."""
    from sleuth.agent.replay import ReplayError, replay

    try:
        report = replay(open_home(), query_id)
    except ReplayError as exc:
        raise fail(str(exc), 1) from None
    if json_out:
        typer.echo(json.dumps(report, ensure_ascii=False, indent=2))
    elif report["identical"]:
        console.print(f"[green]identical[/green]: {report['steps_compared']} steps compared", highlight=False)
    else:
        diff = report["first_difference"]
        console.print(
            f"[red]different[/red] at {diff['step_id']} field {diff['field']}:\n"
            f"  recorded: {str(diff['recorded'])[:500]}\n  replayed: {str(diff['replayed'])[:500]}",
            highlight=False,
            markup=False,
        )
    if not report["identical"]:
        raise typer.Exit(1)
