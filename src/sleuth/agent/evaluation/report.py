"""The report of `sleuth eval`: one summary row per system, for the terminal (`rich_table`) and as
`report.json` and `report.md` (`write_report`)."""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sleuth.agent.evaluation.runner import QuestionResult

if TYPE_CHECKING:
    from rich.table import Table

__all__ = ["SystemSummary", "markdown_report", "rich_table", "summarize", "write_report"]


@dataclass
class SystemSummary:
    """One row of the comparison table."""

    system: str
    n: int
    accuracy: float
    match_accuracy: float
    judge_accuracy: float | None
    judged: int
    evidence_page_hit_rate: float | None
    with_gold_evidence: int
    figure_match_rate: float | None
    with_gold_figures: int
    mean_steps: float
    mean_input_tokens: float
    mean_output_tokens: float
    mean_evidence_tokens: float
    p50_latency_s: float
    p95_latency_s: float
    mean_citations: float
    citation_validity: float | None
    failures: int
    unsupported: int = 0  # sentences and fields flagged, over all questions

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def _percentile(values: Sequence[float], q: float) -> float:
    """Nearest-rank percentile: an observed latency, never an interpolated one."""
    if not values:
        return 0.0
    ordered = sorted(values)
    return ordered[max(0, math.ceil(q / 100 * len(ordered)) - 1)]


def _mean(values: Sequence[float]) -> float:
    return sum(values) / len(values) if values else 0.0


def summarize(results: Sequence[QuestionResult]) -> list[SystemSummary]:
    """One row per system, in first-seen order. Failed questions count as wrong and their cost counts;
    citation validity is pooled over all citations (micro average)."""
    systems = list(dict.fromkeys(r.system for r in results))
    rows: list[SystemSummary] = []
    for system in systems:
        rs = [r for r in results if r.system == system]
        judged = [r for r in rs if r.judge is not None]
        gold = [r for r in rs if r.evidence_page_hit is not None]
        figures = [r for r in rs if r.numeric is not None]
        cites = sum(r.citations for r in rs)
        checked = [r for r in rs if r.citation_validity is not None]
        rows.append(
            SystemSummary(
                system=system,
                n=len(rs),
                accuracy=_mean([float(r.correct) for r in rs]),
                match_accuracy=_mean([float(r.match) for r in rs]),
                judge_accuracy=_mean([float(bool(r.judge)) for r in judged]) if judged else None,
                judged=len(judged),
                evidence_page_hit_rate=_mean([float(bool(r.evidence_page_hit)) for r in gold])
                if gold
                else None,
                with_gold_evidence=len(gold),
                figure_match_rate=_mean([float(bool(r.numeric)) for r in figures]) if figures else None,
                with_gold_figures=len(figures),
                mean_steps=_mean([r.steps for r in rs]),
                mean_input_tokens=_mean([r.input_tokens for r in rs]),
                mean_output_tokens=_mean([r.output_tokens for r in rs]),
                mean_evidence_tokens=_mean([r.evidence_tokens for r in rs]),
                p50_latency_s=_percentile([r.latency_s for r in rs], 50),
                p95_latency_s=_percentile([r.latency_s for r in rs], 95),
                mean_citations=_mean([r.citations for r in rs]),
                citation_validity=(sum(r.citations_valid for r in checked) / cites)
                if checked and cites
                else None,
                failures=sum(1 for r in rs if r.status != "completed"),
                unsupported=sum(r.unsupported for r in rs),
            )
        )
    return rows


def _pct(value: float | None) -> str:
    return "–" if value is None else f"{100 * value:.1f}%"


_COLUMNS: list[tuple[str, Callable[[SystemSummary], str]]] = [
    ("system", lambda s: s.system),
    ("n", lambda s: str(s.n)),
    ("accuracy", lambda s: _pct(s.accuracy)),
    ("match acc.", lambda s: _pct(s.match_accuracy)),
    ("judge acc.", lambda s: _pct(s.judge_accuracy)),
    ("evidence-page hit", lambda s: _pct(s.evidence_page_hit_rate)),
    ("figure match", lambda s: _pct(s.figure_match_rate)),
    ("steps", lambda s: f"{s.mean_steps:.1f}"),
    ("in tokens", lambda s: f"{s.mean_input_tokens:,.0f}"),
    ("out tokens", lambda s: f"{s.mean_output_tokens:,.0f}"),
    ("evidence tokens", lambda s: f"{s.mean_evidence_tokens:,.0f}"),
    ("p50 latency", lambda s: f"{s.p50_latency_s:.2f}s"),
    ("p95 latency", lambda s: f"{s.p95_latency_s:.2f}s"),
    ("citations", lambda s: f"{s.mean_citations:.1f}"),
    ("citation validity", lambda s: _pct(s.citation_validity)),
    ("failures", lambda s: str(s.failures)),
    ("unsupported", lambda s: str(s.unsupported)),
]


DEFINITIONS = [
    (
        "accuracy",
        "the judge's verdict where a judge model ran and answered, else the heuristic match.",
    ),
    (
        "match acc.",
        "the heuristic verdict (agent/evaluation/matching.py): the figure rule when the gold states a "
        "figure, else the text rule (containment or 60% of the gold's content words).",
    ),
    (
        "evidence-page hit",
        "share of the questions with gold evidence pages whose answer cites at least one of those "
        "pages (same document, same page); it says whether the right page was found and used.",
    ),
    (
        "figure match",
        "share of the questions whose gold states a figure where the answer states it: the gold's key "
        "numbers within 1% or equal at the gold's precision, with scale, percent and sign rules. Years, "
        "dates, period lengths and cited file names are never figures unless the gold is only a date.",
    ),
    ("citation validity", "share of all citations whose grounding is a verbatim slice of its page."),
    (
        "unsupported",
        "answer sentences (and shaped fields) whose facts what they cite does not state, over all questions "
        "(spec/runtime.md §8.4.1): each such sentence lost its markers.",
    ),
]


def rich_table(summaries: Sequence[SystemSummary], title: str = "sleuth eval") -> Table:
    """The comparison for the terminal, one column per system so it fits any width (token and step
    rows are means per question)."""
    from rich.table import Table

    table = Table(title=title)
    table.add_column("metric", no_wrap=True)
    for s in summaries:
        table.add_column(s.system, justify="right", no_wrap=True)
    for name, render in _COLUMNS[1:]:
        table.add_row(name, *(render(s) for s in summaries))
    return table


def _md_cell(text: object) -> str:
    return " ".join(str(text).split()).replace("|", "\\|")


def markdown_report(
    summaries: Sequence[SystemSummary], results: Sequence[QuestionResult], config: Mapping[str, Any]
) -> str:
    """The summary table, the run's settings and a per-question table, as Markdown."""
    lines = ["# sleuth eval", ""]
    lines += [
        f"- {key}: `{_md_cell(value if isinstance(value, str) else json.dumps(value))}`"
        for key, value in config.items()
    ]
    lines += ["", "Steps and tokens are means per question; latency is wall-clock per question.", ""]
    lines += [f"- **{name}**: {text}" for name, text in DEFINITIONS] + [""]
    lines.append("| " + " | ".join(name for name, _ in _COLUMNS) + " |")
    lines.append("|" + "|".join("---" for _ in _COLUMNS) + "|")
    lines += ["| " + " | ".join(_md_cell(render(s)) for _, render in _COLUMNS) + " |" for s in summaries]
    lines += [
        "",
        "## Per question",
        "",
        "| system | id | correct | match | judge | page hit | steps | evidence tokens | latency | "
        "citations (valid) | status | answer |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]

    def mark(value: bool | None) -> str:
        return "–" if value is None else ("✓" if value else "✗")

    for r in results:
        answer = r.answer if len(r.answer) <= 160 else r.answer[:157] + "…"
        lines.append(
            f"| {r.system} | {_md_cell(r.id)} | {mark(r.correct)} | {mark(r.match)} | {mark(r.judge)} | "
            f"{mark(r.evidence_page_hit)} | {r.steps} | {r.evidence_tokens:,} | {r.latency_s:.2f}s | "
            f"{r.citations} ({r.citations_valid}) | {r.status} | {_md_cell(answer or r.error or '')} |"
        )
    return "\n".join(lines) + "\n"


def write_report(
    out_dir: Path,
    summaries: Sequence[SystemSummary],
    results: Sequence[QuestionResult],
    config: Mapping[str, Any],
) -> dict[str, Path]:
    """`report.json` (settings, summary rows, every record) and `report.md` under `out_dir`."""
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = {"json": out_dir / "report.json", "markdown": out_dir / "report.md"}
    document = {
        "config": dict(config),
        "summary": [s.to_json() for s in summaries],
        "results": [r.to_json() for r in results],
    }
    paths["json"].write_text(json.dumps(document, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    paths["markdown"].write_text(markdown_report(summaries, results, config), encoding="utf-8")
    return paths
