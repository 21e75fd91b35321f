"""`sleuth eval`: run a question set through Sleuth (and optionally the agentic-RAG baseline with the
same model) and write the comparison table, per-question records and a Markdown report."""

from __future__ import annotations

import contextlib
import json
import time
from datetime import datetime
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from sleuth.cli.answer import HIGH, LOW, command_runtime
from sleuth.cli.app import FAILED, USAGE, app, console, err, fail, failure, find_context, opened, say, styled
from sleuth.settings import TURN_CAP_SECONDS
from sleuth.store.contexts.home import Home

BASELINES = ("rag",)


def _default_out(home: Home) -> Path:
    """`$SLEUTH_HOME/eval/<timestamp>/`: a report belongs with the data it measured, never in
    whatever directory the command happened to run in."""
    return home.root / "eval" / datetime.now().strftime("%Y%m%d-%H%M%S")


@app.command("eval")
def eval_cmd(
    questions_file: Annotated[
        Path,
        typer.Argument(
            metavar="QUESTIONS.jsonl",
            help='One JSON object a line: {"question", "answer", optional "id", "evidence": [{"source", '
            '"page" (1-based)}]}; or FinanceBench\'s file as published.',
        ),
    ],
    context: Annotated[list[str], typer.Option("--context", "-c", help="Context slug (repeatable).")],
    model: Annotated[
        str | None,
        typer.Option(help="Catalog id, tier or spec for both systems (default: the catalog default)."),
    ] = None,
    baseline: Annotated[
        list[str] | None, typer.Option(help="Also run a baseline with the same model: rag.")
    ] = None,
    top_k: Annotated[int, typer.Option(min=1, max=50, help="RAG baseline: chunks per search.")] = 5,
    max_searches: Annotated[int, typer.Option(min=1, max=20, help="RAG baseline: searches allowed.")] = 4,
    max_steps: Annotated[
        int | None,
        typer.Option(min=LOW["max_steps"], max=HIGH["max_steps"], help="Sleuth: loop steps per turn."),
    ] = None,
    limit: Annotated[int | None, typer.Option(min=0, help="Run at most N questions.")] = None,
    offset: Annotated[int, typer.Option(min=0, help="Skip the first N questions.")] = 0,
    ids: Annotated[str | None, typer.Option(help="Only these question ids, comma-separated.")] = None,
    judge: Annotated[
        bool, typer.Option("--judge/--no-judge", help="LLM judge when a model (not offline) is configured.")
    ] = True,
    judge_model: Annotated[str | None, typer.Option(help="Judge with this model instead of --model.")] = None,
    skip_sleuth: Annotated[bool, typer.Option("--skip-sleuth", help="Run only the baseline(s).")] = False,
    timeout: Annotated[
        int,
        typer.Option(
            min=LOW["timeout_seconds"], max=HIGH["timeout_seconds"], help="Sleuth: turn time cap in seconds."
        ),
    ] = TURN_CAP_SECONDS,
    out: Annotated[
        Path | None, typer.Option(help="Directory for the report (default $SLEUTH_HOME/eval/<timestamp>/).")
    ] = None,
    json_out: Annotated[bool, typer.Option("--json", help="Print the summary rows as JSON.")] = False,
) -> None:
    """Answer a question set and compare accuracy, steps, tokens, evidence, latency and citations."""
    from sleuth.agent.evaluation import (
        AnswerFn,
        EvalDataError,
        PageLookup,
        QuestionResult,
        load_questions,
        rich_table,
        run_eval,
        select_questions,
        sleuth_answer_fn,
        summarize,
        write_report,
    )
    from sleuth.agent.evaluation.rag_baseline import RagBaseline
    from sleuth.models.base import Model
    from sleuth.models.catalog import Catalog, CatalogError, build_model
    from sleuth.store.version.search import VersionReader

    unknown = sorted(set(baseline or []) - set(BASELINES))
    if unknown:
        raise fail(f"unknown baseline(s) {', '.join(unknown)}; available: {', '.join(BASELINES)}", USAGE)
    if skip_sleuth and not baseline:
        raise fail("--skip-sleuth needs a --baseline to run", USAGE)
    try:
        wanted = [i.strip() for i in (ids or "").split(",") if i.strip()]
        questions = select_questions(load_questions(questions_file), wanted or None, offset, limit)
    except EvalDataError as exc:
        raise failure(exc) from None
    if not questions:
        raise fail("no questions selected", USAGE)

    home, settings = opened()
    scope = list(dict.fromkeys(context))
    readers: dict[str, VersionReader] = {}
    for slug in scope:
        ctx = find_context(home, slug)
        live = ctx.live_version()
        if live is None:
            raise fail(f"context {slug!r} has no compiled version yet", FAILED)
        readers[slug] = VersionReader(
            ctx.version_dir(live),
            ann_min_vectors=settings.ann_min_vectors,
            embed_threads=settings.embed_threads,
        )

    try:
        catalog = Catalog.load(home.root)
    except CatalogError as exc:
        raise failure(exc) from None

    def provider(name: str | None) -> tuple[str, Model | None]:
        try:
            config = catalog.resolve(name)
        except CatalogError as exc:
            raise failure(exc) from None
        missing = catalog.missing(config)
        if missing is not None:
            raise fail(missing, FAILED)
        return config.id, None if config.provider == "offline" else build_model(config)

    model_id, llm = provider(model)
    judge_llm: Model | None = None
    if judge:
        judge_llm = provider(judge_model)[1] if judge_model else llm
    out_dir = out or _default_out(home)
    out_dir.mkdir(parents=True, exist_ok=True)
    records_path = out_dir / "records.jsonl"
    records_path.write_text("", encoding="utf-8")
    config: dict[str, Any] = {
        "questions": str(questions_file),
        "n_questions": len(questions),
        "contexts": scope,
        "versions": {slug: reader.root.name for slug, reader in readers.items()},
        "model": model_id,
        "judge": (judge_model or model_id) if judge_llm is not None else None,
        "systems": ([] if skip_sleuth else ["sleuth"]) + list(dict.fromkeys(baseline or [])),
        "max_steps": max_steps,
        "rag_top_k": top_k,
        "rag_max_searches": max_searches,
        "started": datetime.now().isoformat(timespec="seconds"),
    }
    err.print(
        styled(
            ("sleuth eval", "bold"),
            f" {len(questions)} questions · contexts {', '.join(scope)} · model {model_id} · "
            f"judge {config['judge'] or 'off'} · out {out_dir}",
        ),
        highlight=False,
    )

    results: list[QuestionResult] = []
    pages = PageLookup(readers)
    columns = (TextColumn("{task.description:>8}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn())
    began = time.monotonic()

    interrupted = False
    try:
        with contextlib.ExitStack() as stack:
            systems: list[tuple[str, AnswerFn]] = []
            if not skip_sleuth:
                runtime = command_runtime(home, settings, catalog)
                stack.enter_context(runtime.sandbox_host)
                stack.enter_context(runtime)
                systems.append(("sleuth", sleuth_answer_fn(runtime, scope, model, max_steps, timeout)))
            if "rag" in (baseline or []):
                systems.append(("rag", RagBaseline(llm, readers, top_k=top_k, max_searches=max_searches)))
            bars = stack.enter_context(Progress(*columns, console=err, transient=json_out))
            tasks = {name: bars.add_task(name, total=len(questions)) for name, _ in systems}
            # Question by question, every system in turn: a run stopped early still compares like
            # with like, and a provider's slow hour hits both systems alike.
            for question in questions:
                for name, answer_fn in systems:
                    for result in run_eval(
                        [question], answer_fn, system=name, page_text=pages, judge_model=judge_llm
                    ):
                        results.append(result)
                        with records_path.open("a", encoding="utf-8") as fh:
                            fh.write(json.dumps(result.to_json(), ensure_ascii=False) + "\n")
                    bars.advance(tasks[name])
    except KeyboardInterrupt:  # a long run stopped by hand still reports what it has
        interrupted = True
        config["interrupted"] = True
        err.print(
            styled(("interrupted", "yellow"), ": reporting the questions answered so far"), highlight=False
        )

    config["wall_s"] = round(time.monotonic() - began, 1)
    summaries = summarize(results)
    paths = write_report(out_dir, summaries, results, config)
    if json_out:
        typer.echo(json.dumps([s.to_json() for s in summaries], indent=2, ensure_ascii=False))
    else:
        console.print(rich_table(summaries, title=f"sleuth eval · {questions_file.name} · {model_id}"))
        say((f"records {records_path} · report {paths['markdown']} · {paths['json']}", "dim"))
    if interrupted:
        raise typer.Exit(130)
