"""What the offline planner reads back of its own steps (spec/runtime.md §10): the `#PLAN ` line a step
printed first, as JSON, and its hits fused into the evidence of a `final`.

Like a model, the planner learns what happened only from what its code printed; a cut or missing line
reads as none. The hits are fused by reciprocal rank with the same `RRF_K` as search, ties broken by
score, source path, page and start, so the same plan always gives the same evidence (§10.3).
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from sleuth.agent.extractive import FINAL_EVIDENCE
from sleuth.agent.planner_code import PLAN_PREFIX
from sleuth.models.base import Message
from sleuth.store.version.fusion import RRF_K

_STEPS_LEFT = re.compile(r"at most (\d+) steps?", re.IGNORECASE)


@dataclass(frozen=True)
class PlanHit:
    """One entry of a `#PLAN` list: a span (with a label) or an artifact."""

    key: str
    ref: str | None
    score: float
    path: str  # source path; for an artifact its first source (or its name)
    page: int
    start: int
    artifact: str | None = None
    context: str | None = None
    source: str | None = None


def read_plan(observation: str) -> dict[str, Any] | None:
    """The JSON of the first `#PLAN ` line of an observation; None when missing or cut."""
    for line in observation.splitlines():
        if line.startswith(PLAN_PREFIX):
            try:
                data = json.loads(line[len(PLAN_PREFIX) :])
            except json.JSONDecodeError:
                return None
            return data if isinstance(data, dict) else None
    return None


def step_budget(messages: list[Message]) -> int | None:
    """`max_steps` as the orientation states it ("You have at most N steps"), when it does."""
    for message in reversed(messages):
        if message.role in ("user", "system"):
            found = _STEPS_LEFT.findall(message.content)
            if found:
                return int(found[-1])
    return None


def _path(plan: dict[str, Any], index: Any) -> str:
    paths = plan.get("paths") or []
    if isinstance(index, int) and 0 <= index < len(paths) and isinstance(paths[index], str):
        return str(paths[index])
    return ""


def _span_hit(plan: dict[str, Any], entry: Any) -> PlanHit | None:
    if not (isinstance(entry, list) and len(entry) >= 5 and isinstance(entry[0], str)):
        return None
    ref, score, path, page, start = entry[:5]
    if not isinstance(score, int | float) or not isinstance(page, int) or not isinstance(start, int):
        return None
    return PlanHit(ref, ref, float(score), _path(plan, path), page, start)


def plan_hits(plan: dict[str, Any], key: str) -> list[PlanHit]:
    entries = plan.get(key)
    if key == "keyword":
        entries = [e[1:] for e in entries or [] if isinstance(e, list) and e]
    hits = [_span_hit(plan, e) for e in entries or []] if isinstance(entries, list) else []
    return [h for h in hits if h is not None]


def keyword_groups(plan: dict[str, Any]) -> list[list[PlanHit]]:
    """The keyword entries of an exact_id plan, one list per token (each fused as its own ranking)."""
    groups: dict[int, list[PlanHit]] = {}
    for entry in plan.get("keyword") or []:
        if isinstance(entry, list) and entry and isinstance(entry[0], int):
            hit = _span_hit(plan, entry[1:])
            if hit is not None:
                groups.setdefault(entry[0], []).append(hit)
    return [groups[k] for k in sorted(groups)]


def artifact_hits(plan: dict[str, Any]) -> list[PlanHit]:
    out: list[PlanHit] = []
    for entry in plan.get("artifacts") or []:
        if not (isinstance(entry, list) and len(entry) >= 4 and isinstance(entry[0], str)):
            continue
        name, context, score, source = entry[:4]
        if not isinstance(score, int | float):
            continue
        path = _path(plan, source)
        out.append(
            PlanHit(
                f"artifact\x1f{context}\x1f{name}",
                None,
                float(score),
                path or name,
                0,
                0,
                name,
                context if isinstance(context, str) else None,
                path or None,
            )
        )
    return out


def fuse(lists: Sequence[Sequence[PlanHit]]) -> list[PlanHit]:
    """Reciprocal-rank fusion (k = 60); ties by score desc, source path, page, start (§10.3)."""
    fused: dict[str, float] = {}
    best: dict[str, PlanHit] = {}
    for hits in lists:
        for rank, hit in enumerate(hits, 1):
            fused[hit.key] = fused.get(hit.key, 0.0) + 1.0 / (RRF_K + rank)
            if hit.key not in best or hit.score > best[hit.key].score:
                best[hit.key] = hit
    return sorted(
        best.values(),
        key=lambda h: (-round(fused[h.key], 12), -h.score, h.path, h.page, h.start, h.key),
    )


def top_labels(lists: Sequence[Sequence[PlanHit]]) -> list[str]:
    return [h.ref for h in fuse(lists) if h.ref is not None][:FINAL_EVIDENCE]


def tabled_first(plan: dict[str, Any], labels: list[str]) -> list[str]:
    """The chunks of the tables the question names (`tabled`) before the searches' best: a person
    who says "in the balance sheet" means that page, wherever a search ranked it."""
    tabled = [h.ref for h in plan_hits(plan, "tabled") if h.ref is not None][: FINAL_EVIDENCE // 2]
    return list(dict.fromkeys([*tabled, *labels]))[:FINAL_EVIDENCE]  # half left for the searches


#: Chunks that state a number of the quantity put before the first search's evidence.
MAX_STATING = 3


def prose_evidence(plan: dict[str, Any], searched: dict[str, Any]) -> list[str]:
    """The evidence after a prose step (`plan`) that followed the search `searched`: up to
    `MAX_STATING` chunks that state a number of the quantity, then the search's best (in the named
    documents, where the question names some: another company's head count is no answer), then the
    rest of the prose step's."""
    found = top_labels([plan_hits(plan, "inside")])
    said = plan.get("stating")
    first = min(said, MAX_STATING) if isinstance(said, int) else 0
    named = plan_hits(searched, "named")
    paths = {h.path for h in named}
    chunks = [h for h in plan_hits(searched, "chunks") if not paths or h.path in paths]
    labels = [*found[:first], *top_labels([named, chunks]), *found[first:]]
    return list(dict.fromkeys(labels))[:FINAL_EVIDENCE]
