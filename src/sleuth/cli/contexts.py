"""Commands that build and look into contexts: compile, contexts, inspect, delete, search, exec."""

from __future__ import annotations

import json
import sqlite3
from dataclasses import asdict, replace
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TaskID, TextColumn, TimeElapsedColumn
from rich.table import Table

from sleuth.cli.answer import HIGH, LOW
from sleuth.cli.app import (
    FAILED,
    USAGE,
    app,
    console,
    context_missing,
    did_you_mean,
    err,
    fail,
    failure,
    find_context,
    home_where,
    opened,
    opened_when_ready,
    say,
    styled,
)
from sleuth.compile.errors import CompileError
from sleuth.compile.extraction.cache import ExtractionCache
from sleuth.compile.pipeline import compile_context
from sleuth.compile.version_files import version_counts
from sleuth.errors import Conflict, Invalid
from sleuth.format.identity import DOC_TYPE_NAMES
from sleuth.models.embedder import EmbedderError
from sleuth.settings import TOOL_OUTPUT_CHARS, TURN_CAP_SECONDS
from sleuth.store.contexts.home import ContextDir, ContextNotFound, Home
from sleuth.store.contexts.lock import CurateInFlight, curate_lock, lock_database
from sleuth.store.contexts.replica import Replica, SlugTaken
from sleuth.store.version.ranker import FEATURES, PageRanker
from sleuth.store.version.search import VersionReader

#: A progress bar per phase: its name, the bar, done of total, time so far (compile, pack, restore).
PHASE_COLUMNS = (TextColumn("{task.description:>9}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn())


class RichProgress:
    """One progress bar per compile phase."""

    def __init__(self, progress: Progress) -> None:
        self._progress = progress
        self._tasks: dict[str, TaskID] = {}

    def start(self, phase: str, total: int) -> None:
        self._tasks[phase] = self._progress.add_task(phase, total=total)

    def advance(self, phase: str, amount: int = 1) -> None:
        if phase in self._tasks:
            self._progress.advance(self._tasks[phase], amount)

    def tokens(self, prompt: int, completion: int) -> None:
        pass  # the report prints them at the end

    def finish(self, phase: str) -> None:
        task = self._tasks.get(phase)
        if task is not None:
            total = self._progress.tasks[self._progress.task_ids.index(task)].total
            self._progress.update(task, completed=total)


@app.command("compile")
def compile_cmd(
    context: Annotated[str, typer.Option("--context", "-c", help="Context slug (created if new).")],
    sources: Annotated[
        list[Path] | None,
        typer.Argument(
            help="Files, directories or archives to add; none: curate what the context holds again "
            "(with --manifest, under the new manifest)."
        ),
    ] = None,
    manifest: Annotated[Path | None, typer.Option(help="Manifest JSON; replaces the pinned one.")] = None,
    force: Annotated[bool, typer.Option(help="Discard the ledger and rebuild from scratch.")] = False,
    model: Annotated[
        str | None,
        typer.Option(help="Model for extraction (catalog id, tier or spec); default: the manifest's."),
    ] = None,
    max_tokens: Annotated[
        int | None,
        typer.Option(min=1_000, help="Stop model extraction once this many tokens are spent."),
    ] = None,
    json_out: Annotated[bool, typer.Option("--json", help="Print the report as JSON.")] = False,
    replace: Annotated[
        bool,
        typer.Option(
            "--replace",
            help="Let a folder replace the sources another folder of its name put in the context.",
        ),
    ] = False,
) -> None:
    """Create or update a context from SOURCES and curate it incrementally; with no SOURCES, curate
    what the context already holds again (`--manifest M`: re-curate it under M).

    Exits 1 when a source could not be read (the others are compiled and live)."""
    home, settings = opened()
    if not sources:
        try:
            home.find(context)
        except (ContextNotFound, ValueError):
            known = [info.slug for _ctx, info in home.contexts()]
            raise fail(
                f"no sources to compile: name the files or folders to compile into {context!r} "
                f"(sleuth compile DIR --context {context}); there is no context {context!r} in "
                f"{home_where(home)} whose own sources could be curated again",
                USAGE,
                hint=did_you_mean(context, known),
                machine="invalid_request" if json_out else None,
            ) from None
    try:
        with Progress(*PHASE_COLUMNS, console=err, transient=json_out) as bars:
            report = compile_context(
                context,
                list(sources or []),
                manifest,
                force,
                home,
                progress=RichProgress(bars),
                settings=settings,
                model=model,
                token_budget=max_tokens,
                replace=replace,
            )
    except FileNotFoundError as exc:
        raise fail(str(exc), USAGE) from None
    except json.JSONDecodeError as exc:
        raise fail(f"the manifest is not JSON: {exc}", USAGE) from None
    except (Invalid, Conflict, CompileError, EmbedderError) as exc:  # refused input, a curate in flight, …
        raise failure(exc) from None
    failed = sorted(path for path, f in report.failures.items() if f["status"] == "failed")
    if json_out:
        console.print_json(json.dumps(report.to_json()))
        if failed:
            raise typer.Exit(FAILED)
        return
    if report.delta == "empty":
        say((report.context, "bold"), f": nothing changed; live version {report.parent} stays")
    else:
        c, t = report.counts, report.tally()
        say(
            (report.context, "bold"),
            f": version {report.version} is live — {t['compiled']} of {t['total']} sources compiled "
            f"({t['new']} new, {t['changed']} changed, {t['deleted']} deleted), "
            f"{c['pages']} pages, {c['chunks']} chunks, {c['artifacts']} artifacts, {c['edges']} edges; "
            f"vectors: {c['embedded']} embedded, {c['embedded_from_cache']} from cache; "
            f"in {report.timings['total']:.1f}s",
        )
    for path, item in sorted(report.failures.items()):
        say(("  " + item["status"], "yellow"), f" {path}: {item['reason']}")
    extraction = report.counts.get("extraction") if report.delta != "empty" else None
    if extraction:
        print_extraction(extraction)
    for name, reason in report.artifacts_skipped_no_model.items():
        say(("  skipped", "yellow"), f" type {name}: {reason}")
    for warning in report.warnings:
        if "skipped: kind" not in warning:
            say(("  warning", "yellow"), f" {warning}")
    if failed:
        raise fail(
            f"{len(failed)} source{'s' if len(failed) > 1 else ''} could not be read (listed above); "
            "the others are compiled",
            FAILED,
        )


def print_extraction(extraction: dict[str, Any]) -> None:
    """Per type: built, screened, errored, quotes verified, calls and tokens (cached calls cost none)."""
    console.print(
        f"  extraction with {extraction['model']}: {extraction['calls']} calls "
        f"({extraction['cached']} from cache), {extraction['input_tokens']} input and "
        f"{extraction['output_tokens']} output tokens",
        highlight=False,
    )
    for name, t in extraction["types"].items():
        console.print(
            f"    {name}: {t['built']} built, {t['screened']} screened, {t['errored']} errored; "
            f"quotes {t['quotes_verified']} verified, {t['quotes_rejected']} rejected; "
            f"{t['calls']} calls, {t['input_tokens'] + t['output_tokens']} tokens",
            highlight=False,
            markup=False,
        )
    if extraction["budget_exhausted"]:
        say(("  stopped", "yellow"), f": the token budget of {extraction['budget']} was spent")
    for error in extraction["errors"]:
        say(("  error", "yellow"), f" {error['source']} ({error['type']}): {error['error']}")


def _stats(ctx: ContextDir) -> dict[str, Any]:
    version = ctx.live_version()
    if version is None:
        return {"version": None}
    return {"version": version, **version_counts(ctx.version_dir(version))}


@app.command("contexts")
def contexts_cmd(
    json_out: Annotated[bool, typer.Option("--json", help="Print the rows as JSON (no home line).")] = False,
) -> None:
    """List the contexts of this home with their stats; the first line says which home and why."""
    rows = []
    home, _settings = opened()
    for ctx, info in home.contexts():
        rows.append(
            {"slug": info.slug, "id": info.id, "last_curated_at": info.last_curated_at, **_stats(ctx)}
        )
    if json_out:
        console.print_json(json.dumps(rows))
        return
    say(("home:", "bold"), f" {home_where(home)}")
    if not rows:
        console.print("no contexts yet: make one with `sleuth compile DIR --context NAME`", highlight=False)
        return
    table = Table("slug", "version", "sources", "pages", "chunks", "artifacts", "curated")
    for r in rows:
        table.add_row(
            r["slug"],
            r["version"] or "—",
            str(r.get("sources_compiled", "—")),
            str(r.get("pages", "—")),
            str(r.get("chunks", "—")),
            str(r.get("artifacts", "—")),
            r["last_curated_at"] or "never",
        )
    console.print(table)


def _dir_size(path: Path) -> int:
    if path.is_file():
        return path.stat().st_size
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file()) if path.exists() else 0


@app.command("inspect")
def inspect_cmd(
    name: Annotated[str, typer.Argument(help="The context's slug or id.")],
    json_out: Annotated[bool, typer.Option("--json", help="Print everything as one JSON document.")] = False,
) -> None:
    """Show a context's manifest, sources, artifacts per type, tables and index sizes."""
    ctx = find_context(opened()[0], name)
    info = ctx.info()
    version = ctx.live_version()
    data: dict[str, Any] = {
        "slug": info.slug,
        "id": info.id,
        "live_version": version,
        "manifest": ctx.manifest_data(),
        "sample_queries": info.sample_queries,
    }
    if version is not None:
        vdir = ctx.version_dir(version)
        meta = json.loads((vdir / "version.json").read_text("utf-8"))
        db = sqlite3.connect(f"file:{vdir / 'tables.sqlite'}?mode=ro&immutable=1", uri=True)
        try:
            data["sources"] = [
                dict(zip(("path", "title", "format", "pages"), row, strict=True))
                for row in db.execute("SELECT path, title, format, pages FROM _sources")
            ]
            data["artifacts_by_type"] = dict(
                db.execute("SELECT type, count(*) FROM _artifacts GROUP BY type").fetchall()
            )
            tables = [
                r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type='table' ORDER BY name")
            ]
            data["tables"] = {t: db.execute(f'SELECT count(*) FROM "{t}"').fetchone()[0] for t in tables}
        finally:
            db.close()
        data["counts"] = meta["counts"]
        data["index_bytes"] = {
            "keyword": _dir_size(vdir / "index" / "keyword") + _dir_size(vdir / "index" / "keyword.sqlite"),
            "dense": _dir_size(vdir / "index" / "dense"),
            "tables": _dir_size(vdir / "tables.sqlite"),
            "knowledge": _dir_size(vdir / "knowledge"),
        }
        ledger = json.loads(ctx.ledger_file.read_text("utf-8")) if ctx.ledger_file.exists() else {}
        data["failures"] = ledger.get("failures", {})
    if json_out:
        console.print_json(json.dumps(data))
        return
    say((info.slug, "bold"), f" ({info.id}) — live version {version or 'none'}")
    console.print_json(json.dumps(data["manifest"]))
    if version is None:
        return
    sources = Table("source", "title", "format", "pages", title="Sources")
    for s in data["sources"]:
        sources.add_row(s["path"], s["title"], s["format"], str(s["pages"]))
    console.print(sources)
    for path, item in data["failures"].items():
        say(("  " + item["status"], "yellow"), f" {path}: {item['reason']}")
    arts = Table("type", "artifacts", title="Artifacts")
    for t, n in data["artifacts_by_type"].items():
        arts.add_row(t, str(n))
    console.print(arts)
    table_list = Table("table", "rows", title="Tables")
    for t, n in data["tables"].items():
        table_list.add_row(t, str(n))
    console.print(table_list)
    sizes = Table("index", "bytes", title="Index sizes")
    for k, v in data["index_bytes"].items():
        sizes.add_row(k, f"{v:,}")
    console.print(sizes)


@app.command("delete")
def delete_cmd(
    name: Annotated[str, typer.Argument(help="The context's slug or id.")],
    yes: Annotated[bool, typer.Option("--yes", "-y", help="Do not ask for confirmation.")] = False,
) -> None:
    """Delete a context and everything compiled from it."""
    home, settings = opened()
    ctx = find_context(home, name)
    if not yes and not typer.confirm(f"Delete context {name!r} and all its versions?"):
        raise typer.Exit(1)
    try:
        with curate_lock(ctx.lock_file, ctx.info().id, lock_database(settings.database_url)):
            home.delete(ctx)
    except CurateInFlight as exc:
        raise failure(exc) from None
    console.print(f"deleted {name}", highlight=False)


@app.command("fork")
def fork_cmd(
    name: Annotated[str, typer.Argument(help="The context to fork: its slug or id.")],
    new_slug: Annotated[str, typer.Argument(help="The new context's slug.")],
    title: Annotated[
        str | None, typer.Option("--name", help="The new context's name (default: its slug).")
    ] = None,
) -> None:
    """Make a new context that starts as NAME is now (sources, manifest, live version, caches):
    it answers at once, shares NAME's files until either changes them, then goes its own way."""
    home, _settings = opened()
    ctx = find_context(home, name)
    try:
        fork = home.fork(ctx, new_slug, title)
    except (FileExistsError, ValueError) as exc:
        raise fail(str(exc), USAGE) from None
    live = fork.live_version()
    console.print(
        f"forked {name} into {new_slug}" + (f" (live {live})" if live else " (not curated yet)"),
        highlight=False,
    )


@app.command("share")
def share_cmd(
    names: Annotated[list[str] | None, typer.Argument(help="Contexts to share (default: all).")] = None,
) -> None:
    """Copy this home's contexts into the storage and database every machine shares
    (SLEUTH_STORAGE_URL, SLEUTH_DATABASE_URL): the step from one machine to many."""
    home, settings = opened_when_ready()
    if home.shared is None:
        raise fail("sleuth share needs SLEUTH_STORAGE_URL and SLEUTH_DATABASE_URL: where to share to", USAGE)
    local = Home(home.root)  # this disk's own contexts, as a single machine sees them
    found = local.contexts()
    if names:
        missing = sorted(set(names) - {info.slug for _ctx, info in found} - {info.id for _ctx, info in found})
        if missing:
            raise context_missing(missing[0], local)
        found = [(ctx, info) for ctx, info in found if info.slug in names or info.id in names]
    replica = home.shared
    assert isinstance(replica, Replica)
    for ctx, info in found:
        try:
            with curate_lock(ctx.lock_file, info.id, lock_database(settings.database_url)):
                shared = replica.adopt(ctx)
                ExtractionCache.of(ContextDir(ctx.root, replica)).publish()  # replies paid for here
        except (CurateInFlight, SlugTaken) as exc:
            raise fail(f"{info.slug}: {exc}", FAILED) from None
        state = f"shared (live {ctx.live_version() or 'none'})" if shared else "already shared"
        console.print(f"{info.slug}: {state}", highlight=False)


@app.command("search")
def search_cmd(
    query: Annotated[str, typer.Argument(help='What to search for; "a quoted phrase" must appear as it is.')],
    context: Annotated[str, typer.Option("--context", "-c", help="The context to search.")],
    mode: Annotated[str, typer.Option(help="hybrid | semantic | keyword")] = "hybrid",
    top_k: Annotated[int, typer.Option(min=1, max=100, help="Hits to show.")] = 10,
    source: Annotated[
        list[str] | None,
        typer.Option("--source", "-s", help="Only these source paths (repeat the option for more)."),
    ] = None,
    issuer: Annotated[str | None, typer.Option(help="Only documents whose issuer contains this.")] = None,
    doc_type: Annotated[
        str | None,
        typer.Option(
            help="Only documents of this type: " + ", ".join(DOC_TYPE_NAMES) + ".",
            autocompletion=lambda: list(DOC_TYPE_NAMES),
        ),
    ] = None,
    year: Annotated[int | None, typer.Option(help="Only documents covering this year.")] = None,
    json_out: Annotated[bool, typer.Option("--json", help="Print the hits as one JSON document.")] = False,
    why: Annotated[
        bool,
        typer.Option("--why", help="Say why each page ranks where it does: its ranker score and features."),
    ] = False,
) -> None:
    """Search a context's chunks and print the hits with their page and offsets.

    One hit per line pair, never wrapped, so the output greps and pipes; `--json` for scripts."""
    if mode not in ("hybrid", "semantic", "keyword"):
        raise fail(f"unknown mode {mode!r}: use hybrid, semantic or keyword", USAGE)
    home, settings = opened()
    ctx = find_context(home, context)
    live = ctx.live_version()
    if live is None:
        raise fail("context has no live version yet: compile it first", FAILED)
    reader = VersionReader(
        ctx.version_dir(live), ann_min_vectors=settings.ann_min_vectors, embed_threads=settings.embed_threads
    )
    unknown = [s for s in source or [] if s not in reader.page_files]
    if unknown:
        raise fail(
            f"no source {unknown[0]!r} in context {context!r}",
            USAGE,
            hint=did_you_mean(unknown[0], reader.page_files) or f"`sleuth inspect {context}` lists them",
        )
    keep: list[str] | None = list(source) if source else None
    if issuer is not None or doc_type is not None or year is not None:
        matching = reader.sources_where(issuer, doc_type, year)
        keep = matching if keep is None else [s for s in keep if s in matching]
        if not keep:
            types = sorted({str(e.get("doc_type")) for e in reader.documents.values() if e.get("doc_type")})
            raise fail(
                "no document matches --issuer/--doc-type/--year",
                FAILED,
                hint=f"document types here: {', '.join(types)}" if types else "see `sleuth inspect`",
            )
    features: dict[tuple[str, int], list[float]] = {}
    reader.page_seen = lambda key, row: features.__setitem__(key, row)
    hits = reader.search(query, top_k, mode, sources=keep)  # type: ignore[arg-type]
    explained = {key: _why(reader.page_ranker, row) for key, row in features.items()} if why else {}
    if json_out:
        out: dict[str, object] = {"query": query, "mode": mode, "hits": [asdict(h) for h in hits]}
        if why:
            out["pages"] = [
                {"source_path": path, "page": page, **explained[(path, page)]}
                for path, page in dict.fromkeys((h.source_path, h.page) for h in hits)
                if (path, page) in explained
            ]
        typer.echo(json.dumps(out, indent=2))
        return
    # The engine's order is its second stage's (boilerplate demoted, pages rescored), which a keyword
    # or semantic score need not follow: people read the hits by the score printed beside them.
    for rank, hit in enumerate(sorted(hits, key=lambda hit: -hit.score), 1):
        section = " > ".join(hit.section_path)
        console.print(
            styled(
                (f"{rank}.", "bold"),
                f" {hit.source_path} p. {hit.page} [{hit.start}:{hit.end}] {section}",
                f"  (score {hit.score:.4f})",
            ),
            soft_wrap=True,
            highlight=False,
        )
        snippet = " ".join(hit.text.split())
        console.print(
            f"   {snippet[:300]}{'…' if len(snippet) > 300 else ''}", soft_wrap=True, highlight=False
        )
        reason = explained.get((hit.source_path, hit.page))
        if reason is not None:
            console.print(f"   why: {_why_line(reason)}", soft_wrap=True, highlight=False, style="dim")


def _why(ranker: PageRanker | None, row: list[float]) -> dict[str, object]:
    """A rescored page's features, and with the learned ranker its score and what each feature added."""
    named = dict(zip(FEATURES, row, strict=True))
    if ranker is None:
        return {"ranker": "fixed fusion", "features": named}
    return {
        "ranker": "learned",
        "page_score": ranker.score(row),
        "features": named,
        "contributions": ranker.contributions(row),
    }


def _why_line(reason: dict[str, object]) -> str:
    """`_why` in one line: the page's score and the three features that moved it most."""
    contributions = reason.get("contributions")
    if not isinstance(contributions, dict):
        return "ranked by the fixed fusion (first stage, title zone, coverage)"
    top = sorted(contributions.items(), key=lambda kv: -abs(kv[1]))[:3]
    return f"page score {reason['page_score']:.3f}; " + ", ".join(
        f"{name} {value:+.2f}" for name, value in top
    )


@app.command("exec")
def exec_cmd(
    file: Annotated[Path, typer.Argument(help="Python file to run as one REPL step.")],
    context: Annotated[list[str], typer.Option("--context", "-c", help="Context slug (1-10).")],
    max_tool_output_chars: Annotated[
        int,
        typer.Option(
            min=LOW["max_tool_output_chars"],
            max=HIGH["max_tool_output_chars"],
            help="Characters of the printed output shown (the rest is cut with a notice).",
        ),
    ] = TOOL_OUTPUT_CHARS,
    timeout: Annotated[
        float, typer.Option(help="Step timeout in seconds.", min=0.1, max=TURN_CAP_SECONDS)
    ] = 30.0,
) -> None:
    """Run FILE as one REPL step in a fresh sandbox and print what the model would see."""
    from sleuth.agent.orientation import TURN_DEFAULTS, context_brief, orientation_host
    from sleuth.sandbox import Limits, SandboxDied, SandboxHost, SandboxUnavailable
    from sleuth.sandbox.limits import BudgetExceeded

    if not 1 <= len(context) <= 10:
        raise fail("give 1 to 10 --context options", USAGE)
    try:
        code = file.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise fail(f"cannot read {file}: {exc}", USAGE) from None
    home, settings = opened()
    versions: dict[str, Path] = {}
    briefs = []
    for slug in context:
        ctx = find_context(home, slug)
        live = ctx.live_version()
        if live is None:
            raise fail(f"context {slug!r} has no live version: compile it first", FAILED)
        briefs.append(context_brief(ctx, live))
        versions[briefs[-1].slug] = briefs[-1].version_dir
    limits = Limits(step_timeout_s=timeout, max_output=max_tool_output_chars)
    # `orientation()` answers as a turn with this step's output limit would be oriented
    orient = orientation_host(briefs, replace(TURN_DEFAULTS, max_tool_output_chars=max_tool_output_chars))
    try:
        with (
            SandboxHost(limits, embed_threads=settings.embed_threads) as host,
            host.start_turn(versions, registry={**host.registry, "orientation": orient}) as sandbox,
        ):
            result = sandbox.exec(code)
    except (SandboxUnavailable, SandboxDied, BudgetExceeded) as exc:
        raise fail(str(exc), FAILED) from None
    typer.echo(result.output, nl=not result.output.endswith("\n") and bool(result.output))
    if not result.ok:
        raise typer.Exit(1)
