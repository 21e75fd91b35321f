"""The question sets of `sleuth eval`: one JSON object per line, FinanceBench's format or the generic
one, and `doc_key`, which matches a gold evidence document to cited source paths."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any

from sleuth.errors import Invalid

__all__ = ["EvalDataError", "EvalQuestion", "EvidencePage", "doc_key", "load_questions", "select_questions"]

DOC_SUFFIXES = frozenset({".pdf", ".md", ".txt", ".html", ".htm", ".docx", ".csv", ".json", ".jsonl"})


class EvalDataError(Invalid, ValueError):
    """The question file cannot be read; the message names the line."""


@dataclass(frozen=True)
class EvidencePage:
    """A gold evidence page. `source` is a source path or a document name (FinanceBench's
    `evidence_doc_name`); both are matched against cited source paths by `doc_key`. `page` is 1-based."""

    source: str
    page: int


@dataclass
class EvalQuestion:
    id: str
    question: str
    answer: str
    evidence: list[EvidencePage] = field(default_factory=list)
    meta: dict[str, Any] = field(default_factory=dict)


def doc_key(source: str) -> str:
    """The comparison key of a document: its file name without a document extension, case-folded, so
    FinanceBench's `3M_2018_10K` meets the source path `uploads/pdfs/3M_2018_10K.pdf`."""
    name = PurePosixPath(source.replace("\\", "/")).name
    suffix = PurePosixPath(name).suffix
    if suffix.lower() in DOC_SUFFIXES:
        name = name[: -len(suffix)]
    return name.casefold()


def _page_number(value: object, where: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        raise EvalDataError(f"{where}: page must be an integer, got {value!r}")
    try:
        number = int(value)
    except ValueError:
        raise EvalDataError(f"{where}: page must be an integer, got {value!r}") from None
    if isinstance(value, float) and value != number:
        raise EvalDataError(f"{where}: page must be an integer, got {value!r}")
    return number


def _financebench(row: dict[str, Any], where: str) -> EvalQuestion:
    """FinanceBench as published: `evidence_page_num` is 0-based, so one is added."""
    evidence: list[EvidencePage] = []
    for item in row.get("evidence") or []:
        if not isinstance(item, dict):
            continue
        # The published file names the document `doc_name` inside each item; the paper says
        # `evidence_doc_name`. Either works, and the question's own `doc_name` is the fallback.
        doc = item.get("evidence_doc_name") or item.get("doc_name") or row.get("doc_name")
        if not doc or item.get("evidence_page_num") is None:
            continue
        page = _page_number(item.get("evidence_page_num"), where)
        if page < 0:
            raise EvalDataError(f"{where}: evidence_page_num must be ≥ 0 (it is 0-based), got {page}")
        found = EvidencePage(str(doc), page + 1)
        if found not in evidence:
            evidence.append(found)
    meta = {
        key: row[key]
        for key in ("company", "doc_name", "question_type", "question_reasoning")
        if row.get(key) is not None
    }
    return EvalQuestion(str(row["financebench_id"]), str(row["question"]), str(row["answer"]), evidence, meta)


def _generic(row: dict[str, Any], where: str, line_no: int) -> EvalQuestion:
    evidence: list[EvidencePage] = []
    raw = row.get("evidence") or []
    if not isinstance(raw, list):
        raise EvalDataError(f"{where}: evidence must be a list of {{source, page}}")
    for item in raw:
        if not isinstance(item, dict) or not item.get("source"):
            raise EvalDataError(f"{where}: each evidence item needs a source and a 1-based page")
        page = _page_number(item.get("page"), where)
        if page < 1:
            raise EvalDataError(f"{where}: evidence page must be ≥ 1 (it is 1-based), got {page}")
        found = EvidencePage(str(item["source"]), page)
        if found not in evidence:
            evidence.append(found)
    qid = str(row["id"]) if row.get("id") not in (None, "") else f"q{line_no}"
    meta = {k: v for k, v in row.items() if k not in {"id", "question", "answer", "evidence"}}
    return EvalQuestion(qid, str(row["question"]), str(row["answer"]), evidence, meta)


def load_questions(path: Path) -> list[EvalQuestion]:
    """Read a question set: one JSON object per line, FinanceBench's format or the generic one
    (`question`, `answer`, optional `id` and `evidence: [{source, page}]` with 1-based pages)."""
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as exc:
        raise EvalDataError(f"cannot read {path}: {exc}") from None
    out: list[EvalQuestion] = []
    seen: set[str] = set()
    for line_no, line in enumerate(lines, 1):
        if not line.strip():
            continue
        where = f"{path.name}:{line_no}"
        try:
            row = json.loads(line)
        except ValueError as exc:
            raise EvalDataError(f"{where}: not JSON: {exc}") from None
        if not isinstance(row, dict):
            raise EvalDataError(f"{where}: each line must be a JSON object")
        for key in ("question", "answer"):
            if not isinstance(row.get(key), str | int | float) or not str(row[key]).strip():
                raise EvalDataError(f"{where}: {key} is required")
        question = _financebench(row, where) if "financebench_id" in row else _generic(row, where, line_no)
        if question.id in seen:
            raise EvalDataError(f"{where}: duplicate id {question.id!r}")
        seen.add(question.id)
        out.append(question)
    return out


def select_questions(
    questions: Sequence[EvalQuestion],
    ids: Sequence[str] | None = None,
    offset: int = 0,
    limit: int | None = None,
) -> list[EvalQuestion]:
    """`ids` (in file order) first, then `offset` and `limit`. Unknown ids raise: a typo must not
    silently shrink the run."""
    chosen = list(questions)
    if ids:
        wanted = set(ids)
        missing = wanted - {q.id for q in chosen}
        if missing:
            raise EvalDataError(f"unknown question id(s): {', '.join(sorted(missing))}")
        chosen = [q for q in chosen if q.id in wanted]
    chosen = chosen[max(0, offset) :]
    return chosen if limit is None else chosen[: max(0, limit)]
