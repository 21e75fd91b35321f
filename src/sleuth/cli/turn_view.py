"""How a turn reads on a terminal: its steps as they stream (compact, or whole with `--verbose`), its
SDK calls (a run of one call on one line, a search's first hits with what ranked them), and the
answer with its citations and how sure it is."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from rich.console import Console, ConsoleOptions, Group, RenderableType, RenderResult
from rich.live import Live
from rich.segment import Segment
from rich.syntax import Syntax
from rich.text import Text

from sleuth.agent.planner_code import PLAN_PREFIX
from sleuth.cli.app import Part, styled

if TYPE_CHECKING:
    from sleuth.store.records.rows import QueryDocument

COMPACT_CODE_LINES = 4
COMPACT_OUTPUT_LINES = 3


def first_argument(args: str) -> str:
    """The first argument of a call as the trace shows it (`'SELECT …', top_k=5` → `'SELECT …'`): a
    quoted string up to its closing quote, else up to the first comma outside brackets."""
    args = args.strip()
    if args[:1] in ("'", '"'):
        quote, escaped = args[0], False
        for at, char in enumerate(args[1:], 1):
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == quote:
                return args[: at + 1]
        return args  # cut before its closing quote (a long argument)
    depth = 0
    for at, char in enumerate(args):
        if char in "([{":
            depth += 1
        elif char in ")]}":
            depth -= 1
        elif char == "," and depth == 0:
            return args[:at]
    return args


def _shortened(argument: str, width: int = 40) -> str:
    """`'SELECT label, section…'`: a long quoted argument cut, its quote kept."""
    if len(argument) <= width:
        return argument
    if argument[:1] in ("'", '"'):
        return f"{argument[: width - 1]}…{argument[0]}"
    return argument[:width] + "…"


def grouped_calls(calls: list[dict[str, Any]]) -> list[list[dict[str, Any]]]:
    """The step's SDK calls, consecutive calls of one function with the same first argument together
    (the offline planner reads the same table for each quantity it tries)."""
    groups: list[list[dict[str, Any]]] = []
    for call in calls:
        last = groups[-1][0] if groups else None
        if (
            last is not None
            and last.get("fn") == call.get("fn")
            and first_argument(str(last.get("args", ""))) == first_argument(str(call.get("args", "")))
        ):
            groups[-1].append(call)
        else:
            groups.append([call])
    return groups


def call_line(group: list[dict[str, Any]]) -> Text:
    """One line for a call, or for a run of the same call (`query_db('SELECT…') ×3 → rows=5, 0, 0`)."""
    took = f"{sum(float(c.get('duration_ms', 0) or 0) for c in group):.0f} ms"
    failed = sum(1 for c in group if not c.get("ok", True))
    marks: list[Part] = [" ", ("failed", "red")] if failed == len(group) else (
        [" ", (f"{failed} failed", "red")] if failed else []
    )  # fmt: skip
    first = group[0]
    if len(group) == 1:
        result = ", ".join(f"{k}={v}" for k, v in (first.get("result") or {}).items() if k != "ranked")
        return styled(f"  · {first['fn']}({str(first.get('args', ''))[:100]}) → {result} ({took})", *marks)
    key = next((k for c in group for k in (c.get("result") or {})), None)
    values = [str((c.get("result") or {}).get(key, "—")) if c.get("ok", True) else "failed" for c in group]
    result = f"{key}={', '.join(values)}" if key is not None else ", ".join(values)
    argument = _shortened(first_argument(str(first.get("args", ""))))
    return styled(f"  · {first['fn']}({argument}) ×{len(group)} → {result} ({took})", *marks)


#: How an answer without a model says how sure it is (`Synthesis.assurance`), and its colour.
ASSURANCES = {
    "matched": ("the figure is the table cell whose row and period are the asked ones", "green"),
    "computed": ("worked out from the cited figures", "green"),
    "section": ("the section the question names, in its own headings and words", "green"),
    "nearest": ("not the asked figure: the nearest evidence found", "yellow"),
    "none": ("nothing found that answers it", "red"),
}


def ranked_lines(call: dict[str, Any]) -> list[str]:
    """A search call's first hits (its trace's `ranked`): place, score, and the features of the page
    that moved its rank most (`--verbose`)."""
    lines = []
    for n, hit in enumerate((call.get("result") or {}).get("ranked") or [], 1):
        why = ", ".join(f"{name} {value:+.2f}" for name, value in (hit.get("why") or {}).items())
        lines.append(
            f"      {n}. {hit.get('where')} {float(hit.get('score', 0)):.3f}" + (f" ({why})" if why else "")
        )
    return lines


def steps_summary(steps: list[dict[str, Any]]) -> Text:
    """The one line the steps of an answered turn collapse to on a terminal: how many steps and SDK
    calls, which calls, and the time they took."""
    calls = [call for step in steps for call in step.get("tool_calls") or step.get("calls") or []]
    took = sum(
        int((step.get("cost") or {}).get("decide_ms", 0) or 0)
        + int((step.get("cost") or {}).get("execute_ms", 0) or 0)
        for step in steps
    )
    counts: dict[str, int] = {}
    for call in calls:
        counts[str(call.get("fn"))] = counts.get(str(call.get("fn")), 0) + 1
    names = ", ".join(f"{fn} ×{n}" if n > 1 else fn for fn, n in counts.items())
    failed = sum(1 for step in steps if step.get("status") != "completed")
    plural = "s" if len(steps) != 1 else ""
    line = f"{len(steps)} step{plural}, {len(calls)} SDK call{'s' if len(calls) != 1 else ''}"
    failures: list[Part] = [", ", (f"{failed} failed", "red")] if failed else []
    return styled(
        ("✓ ", "green"),
        line + (f" ({names})" if names else "") + f" in {took / 1000:.1f} s",
        *failures,
        (" · --verbose shows them", "dim"),
    )


class _Tail:
    """The last lines of what `items` render that fit the terminal: a live step log that grows past the
    screen shows its newest lines, and a transient display can still erase all of it."""

    def __init__(self, items: list[RenderableType]) -> None:
        self.items = items

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        lines = console.render_lines(Group(*self.items), options.update(height=None), pad=False)
        room = max(1, (options.max_height or console.height) - 1)
        for line in lines[-room:]:
            yield from line
            yield Segment.line()


class StepPrinter:
    """Renders the turn's events as they arrive: commentary, code, SDK calls and timings. Compact by
    default (the first lines of each step's code and output, a run of the same call on one line);
    `verbose` shows all the code. With the offline planner (`offline`), the step's code is Sleuth's
    own, not a model's: it is shown only with `verbose`, and the planner's `#PLAN` lines never.

    `live` (stdout is a terminal): the steps are drawn in a transient display that `finish` replaces
    with one summary line once the answer is there (the whole log stays when the turn did not
    complete); printed to a pipe or a file, the whole step log is kept."""

    def __init__(
        self, out: Console, verbose: bool = False, offline: bool = False, live: bool = False
    ) -> None:
        self.out = out
        self.verbose = verbose
        self.offline = offline
        self.steps: list[dict[str, Any]] = []  # the ended steps' events
        self._live: Live | None = Live(console=out, transient=True, auto_refresh=False) if live else None
        self._shown: list[RenderableType] = []

    def _show(self, renderable: RenderableType) -> None:
        if self._live is None:
            self.out.print(renderable, highlight=False)
            return
        self._shown.append(renderable)
        if not self._live.is_started:
            self._live.start()
        self._live.update(_Tail(self._shown), refresh=True)

    def finish(self, completed: bool) -> None:
        """The answer is there: a live display gives way to one summary line (`completed`), or to the
        whole step log (a turn that failed or was cancelled)."""
        live, self._live = self._live, None
        if live is None or not live.is_started:
            return
        live.stop()
        if completed:
            self.out.print(steps_summary(self.steps), highlight=False)
        else:
            for renderable in self._shown:
                self.out.print(renderable, highlight=False)

    def __call__(self, event: dict[str, Any]) -> None:
        kind = event.get("type")
        if kind == "response.step" and event.get("status") == "running":
            title = event.get("commentary") or "(no commentary)"
            self._show(styled((f"▶ {event['step_id']}", "bold cyan"), " ", str(title)))
            source = str((event.get("code") or {}).get("source", "")).rstrip("\n")
            if self.offline and not self.verbose:
                source = ""
            lines = source.splitlines()
            if lines and not self.verbose and len(lines) > COMPACT_CODE_LINES:
                hidden = len(lines) - COMPACT_CODE_LINES
                source = "\n".join(lines[:COMPACT_CODE_LINES]) + f"\n# … {hidden} more lines (--verbose)"
            if source:
                self._show(Syntax(source, "python", theme="ansi_dark", word_wrap=True))
        elif kind == "response.step":
            self.steps.append(event)
            status = event.get("status")
            colour = "green" if status == "completed" else "red"
            cost = event.get("cost") or {}
            self._show(
                styled(
                    (f"  {status}", colour),
                    f" decide {cost.get('decide_ms', 0)} ms · execute {cost.get('execute_ms', 0)} ms",
                )
            )
            calls = list(event.get("tool_calls") or [])
            for group in [[call] for call in calls] if self.verbose else grouped_calls(calls):
                self._show(call_line(group))
                if self.verbose:
                    for line in ranked_lines(group[0]):
                        self._show(Text(line, style="dim"))
            output = str(event.get("output") or "")
            # the offline planner's `#PLAN` lines are its bookkeeping, not for people
            lines = [line for line in output.splitlines() if not line.lstrip().startswith(PLAN_PREFIX)]
            shown = 8 if self.verbose else COMPACT_OUTPUT_LINES
            preview = "\n".join("    " + line[:160] for line in lines[:shown])
            if len(lines) > shown:
                preview += f"\n    … {len(lines) - shown} more lines ({event.get('output_chars', 0):,} chars)"
            if preview:
                self._show(Text(preview))
        elif kind == "response.failed":
            self._show(styled(("turn failed:", "red"), " ", str(event.get("error"))))


def print_hits(query: QueryDocument, out: Console) -> None:
    """The hits of a retrieval-only turn: where each is, its score, and the start of its text."""
    hits = (query.get("output_json") or {}).get("hits") or []
    rollup = query.get("rollup")
    total = len(hits) if rollup is None else rollup.get("total_hits", len(hits))
    out.rule(f"hits ({len(hits)} of {total})")
    for n, hit in enumerate(hits, 1):
        if hit["kind"] == "artifact":
            where = f"{hit['type']} {hit['name']!r}" + (f" ← {hit['source']}" if hit.get("source") else "")
        else:
            section = " > ".join(hit.get("section_path") or [])
            pages = ",".join(str(p) for p in hit.get("pages") or [])
            where = f"{hit['source']} p.{pages}" + (f" § {section}" if section else "")
        out.print(
            styled(
                (f"{n}.", "bold"),
                f" {hit['kind']} ",
                (str(hit["context"]), "dim"),
                f" {where} ",
                (f"({hit['score']:.4f})", "dim"),
            ),
            highlight=False,
        )
        if "text" in hit:
            out.print(f"    {' '.join(hit['text'].split())[:300]}", highlight=False, markup=False)
    out.print(
        styled(
            (
                f"{query.get('runtime_ms', 0)} ms · session {query.get('session_id')} · "
                f"query {query.get('id')}",
                "dim",
            )
        ),
        highlight=False,
    )


def _unsupported_line(flag: Mapping[str, Any]) -> str:
    """`“…5 days a week.” states 5, which what it cites does not` (spec/api.md §8.4.1)."""
    missing = ", ".join(str(m) for m in flag.get("missing") or [])
    what = f"field {flag['field']}" if flag.get("field") else f"“{' '.join(str(flag.get('text')).split())}”"
    if flag.get("reason") == "uncited":
        return f"{what} states {missing} and cites nothing that does"
    return f"{what} states {missing}, which what it cites does not"


def print_answer(query: QueryDocument, out: Console) -> None:
    """The answer, then its numbered citations with file, page and the quoted span."""
    rollup = query.get("rollup")
    if rollup is not None and rollup.get("stop_reason") == "retrieval_only":
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
        out.print(styled((f"[{n}]", "bold"), f" {where}"), highlight=False)
        quote = " ".join(str(c["grounding"]).split())
        # a table cell reads as its row, period and figure; the quote alone would be "48.2"
        out.print(f"    {c['cell']}" if c.get("cell") else f'    "{quote}"', highlight=False, markup=False)
    for flag in query.get("unsupported") or []:
        out.print(
            styled(("unsupported: ", "bold yellow"), (_unsupported_line(flag), "yellow")), highlight=False
        )
    synthesis: Mapping[str, Any] = query.get("synthesis") or {}
    sure = ASSURANCES.get(str(synthesis.get("assurance")))
    if sure is not None:
        said, colour = sure
        out.print(styled(("how sure: ", "bold"), (said, colour)), highlight=False)
    usage: Mapping[str, Any] = query.get("usage") or {}
    tokens = usage.get("input_tokens", 0) or usage.get("output_tokens", 0)
    parts = [
        f"model {query.get('model')}",
        f"{len(query.get('steps') or [])} steps",
        *(
            [f"{usage.get('input_tokens', 0)} in / {usage.get('output_tokens', 0)} out tokens"]
            if tokens
            else []
        ),
        f"synthesis {synthesis.get('method', '-')}",
        f"{query.get('runtime_ms', 0)} ms",
        f"session {query.get('session_id')}",
        f"query {query.get('id')}",
    ]
    out.print(styled((" · ".join(parts), "dim")), highlight=False)
