"""`sleuth eval`: run a question set through an answering system and score it (README, command line).

The pieces are plain functions so the Sleuth loop and the agentic-RAG baseline are measured by the
same code: `run_eval` takes any `AnswerFn` (question → `AnswerRecord`) and scores each answer, checks
its citations against the stored page text itself (a system's own claim that its citations verify is
not trusted), and `summarize` folds the records into one row per system.

Matching rules (all documented here because accuracy numbers are only comparable when they are):

- `numeric_match` applies when the gold answer states a number. The gold's *key numbers* are its
  numbers minus framing numbers (bare integers that are years 1900–2100, days of a date such as
  `January 28`, or period lengths such as `12 months`; kept only when the gold has no other number);
  numbers glued to letters (`FY2022`, `Q2`, `10-K`, `3M`, `COVID-19`) never count. A key number is
  matched by any number in the prediction that agrees within 1% relative, or equals it once rounded
  half-up to the gold's displayed decimals (gold `1.9%` accepts `1.87%`). Citation markers, file
  paths and page references are removed from the prediction first.
  Signs: `-1,234`, `(1,234)`, `$(1,234)`, `(2.1)%` and `−1.2` are negative (`(3.4%)` and a bullet
  dash are not); a sign mismatch is forgiven when either text words the direction (`decreased`,
  `decline`, `loss`, …).
  Scales: when both sides state a scale (`million`, `bn`, `$1.5B`) the full values are compared; when
  only one does, the bare number may be in units, thousands, millions or billions (filings state
  tables "in millions"). A percentage also matches its fraction (`25%` = `0.25`).
  A gold with n key numbers needs ⌈2n/3⌉ of them matched (a derived change such as "a 3.4% jump" is
  often left out of a correct answer).
- `text_match` applies to every gold: after Unicode folding and punctuation removal, the gold is
  contained in the prediction, or at least 60% of the gold's content words appear in it. A gold that
  opens with yes/no fails when the prediction opens with the opposite.
- The heuristic verdict is `numeric_match` when it applies (vetoed by a contradicting yes/no), else
  `text_match`. With a judge model, the final verdict is the judge's; the heuristic is kept beside it.
"""

from __future__ import annotations

import json
import math
import re
import time
import unicodedata
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from decimal import ROUND_HALF_UP, Decimal, InvalidOperation
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING, Any

from sleuth.agent.extractive import content_words
from sleuth.models.base import CompletionParams, Message, Model, ModelError

if TYPE_CHECKING:
    from rich.table import Table

    from sleuth.agent.records import Query
    from sleuth.agent.turn import Runtime
    from sleuth.store.search import VersionReader

__all__ = [
    "AnswerFn",
    "AnswerRecord",
    "EvalDataError",
    "EvalQuestion",
    "EvidencePage",
    "PageLookup",
    "QuestionResult",
    "SystemSummary",
    "citation_verifies",
    "doc_key",
    "extract_numbers",
    "judge",
    "load_questions",
    "markdown_report",
    "numeric_match",
    "record_from_query",
    "rich_table",
    "run_eval",
    "score_answer",
    "select_questions",
    "sleuth_answer_fn",
    "summarize",
    "text_match",
    "write_report",
]

CHARS_PER_TOKEN = 4
REL_TOLERANCE = 0.01
TEXT_RECALL = 0.6
DOC_SUFFIXES = frozenset({".pdf", ".md", ".txt", ".html", ".htm", ".docx", ".csv", ".json", ".jsonl"})


# ==================================================================================== questions


class EvalDataError(ValueError):
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


# ==================================================================================== numbers


@dataclass(frozen=True)
class Number:
    """A number as written: signed value before any scale, displayed decimals, stated scale."""

    value: float
    decimals: int
    scale: float | None = None
    percent: bool = False
    currency: bool = False
    plain_integer: bool = False  # no decimals, no thousands separator, no currency, unit or scale
    framing: bool = False  # a year, a day of a date or a period length (`12 months`): not an answer


_CORE = re.compile(r"(?<![\w.])(\d{1,3}(?:,\d{3})+(?:\.\d+)?|\d+(?:\.\d+)?|\.\d+)")
_SCALES = {"thousand": 1e3, "million": 1e6, "billion": 1e9, "trillion": 1e12}
_SHORT_SCALES = {"k": 1e3, "m": 1e6, "mm": 1e6, "mn": 1e6, "mln": 1e6, "b": 1e9, "bn": 1e9, "t": 1e12}
_GLUED = re.compile(r"[A-Za-z]+")
_SPACED_UNIT = re.compile(
    r"\s*(?:(?P<pct>%|percent\b|per\s+cent\b|percentage\s+points?\b|pp\b)"
    r"|(?P<word>thousand|million|billion|trillion)s?\b|(?P<short>mn|mln|bn|mm)\b)",
    re.IGNORECASE,
)
_CURRENCIES = ("US$", "USD", "EUR", "GBP", "$", "€", "£")
_MINUS = "-−–"  # hyphen-minus, minus sign, en dash (PDF text uses all three)
_NEGATIVE_CUE = re.compile(
    r"\b(?:decreas\w*|declin\w*|drop\w*|fell|fall\w*|lower\w*|loss\w*|negative|deficit\w*|down|"
    r"reduc\w*|shr[iau]nk\w*|contract\w*|outflow\w*|less)\b",
    re.IGNORECASE,
)
_MONTH = (
    r"(?:jan(?:uary)?|feb(?:ruary)?|mar(?:ch)?|apr(?:il)?|may|june?|july?|aug(?:ust)?|sep(?:t(?:ember)?)?"
    r"|oct(?:ober)?|nov(?:ember)?|dec(?:ember)?)\.?"
)
_MONTH_BEFORE = re.compile(rf"\b{_MONTH}\s+$", re.IGNORECASE)
_MONTH_AFTER = re.compile(rf"\s+{_MONTH}\b", re.IGNORECASE)
_PERIOD_AFTER = re.compile(r"\s*-?\s*(?:months?|years?|weeks?|quarters?|days?)\b", re.IGNORECASE)
_MARKERS = re.compile(r"[\[【［]\s*\d{1,3}(?:\s*[-–,;]\s*\d{1,3})*\s*[\]】］]")
_PATHS = re.compile(r"\S+\.(?:pdf|md|txt|html?|docx|csv|jsonl?)\b", re.IGNORECASE)
_PAGE_REFS = re.compile(r"\b(?:pp?\.|pages?)\s*\d+(?:\s*[-–]\s*\d+)?", re.IGNORECASE)


def _is_bullet(text: str, pos: int) -> bool:
    """A dash that opens a line other than the first is a list bullet, not a sign (`\n-100% equity`)."""
    line_start = text.rfind("\n", 0, pos) + 1
    return line_start > 0 and not text[line_start:pos].strip()


def _scan_prefix(text: str, start: int) -> tuple[bool, bool, bool]:
    """Walk back from a number over a sign, a currency and an opening parenthesis, in any order:
    `-$5`, `$-5`, `($5)`, `$(5)`, `USD 5`. Returns (negative, currency, parenthesised)."""
    pos, negative, currency, paren = start, False, False, False
    for _ in range(3):
        if not negative and pos > 0 and text[pos - 1] in _MINUS:
            before = text[pos - 2] if pos >= 2 else " "
            if not before.isalnum() and before not in ".,)" and not _is_bullet(text, pos - 1):
                negative, pos = True, pos - 1
                continue
        if not currency:
            back = pos - 1 if pos > 0 and text[pos - 1] == " " else pos  # one space: `USD 1,577`
            symbol = next((s for s in _CURRENCIES if text[:back].endswith(s)), None)
            if symbol is not None:
                left = back - len(symbol)
                if not (symbol[0].isalpha() and left > 0 and text[left - 1].isalpha()):
                    currency, pos = True, left
                    continue
        if not paren and pos > 0 and text[pos - 1] == "(":
            paren, pos = True, pos - 1
            continue
        break
    return negative, currency, paren


def extract_numbers(text: str) -> list[Number]:
    """Every number in `text` with its sign, currency, percent and scale (see the module rules)."""
    text = unicodedata.normalize("NFKC", text).replace("\u2212", "-")
    out: list[Number] = []
    for m in _CORE.finditer(text):
        core = m.group(1)
        if m.start() >= 2 and text[m.start() - 1] == "-" and text[m.start() - 2].isalpha():
            continue  # `COVID-19`, `Form-10`: part of a name
        negative, currency, paren = _scan_prefix(text, m.start())
        end = m.end()
        scale: float | None = None
        glued = _GLUED.match(text, end)
        if glued:
            suffix = glued.group().lower()
            decimal_or_money = currency or "." in core
            if suffix in ("mn", "mln", "bn", "mm") or (decimal_or_money and suffix in _SHORT_SCALES):
                scale, end = _SHORT_SCALES[suffix], glued.end()
            elif suffix == "x":
                end = glued.end()
            else:
                continue  # `3M`, `10K`, `2nd`: part of a name, not a quantity
        elif end < len(text) - 1 and text[end] == "-" and text[end + 1].isalpha():
            continue  # `10-K`, `8-K`, `10-year`
        percent = False
        unit = _SPACED_UNIT.match(text, end)
        if unit and scale is None:
            if unit.group("pct"):
                percent = True
            elif unit.group("word"):
                scale = _SCALES[unit.group("word").lower()]
            elif unit.group("short"):
                scale = _SHORT_SCALES[unit.group("short").lower()]
            end = unit.end()
        try:
            value = float(core.replace(",", ""))
        except ValueError:
            continue
        decimals = len(core.split(".", 1)[1]) if "." in core else 0
        plain = decimals == 0 and "," not in core and not (currency or percent or scale)
        if paren and not percent and text[end : end + 2] == ")%":
            negative, percent = True, True  # `(2.1)%`, a table's negative percentage
        elif paren and not percent and text[end : end + 1] == ")" and not (plain and 1900 <= value <= 2100):
            negative = True  # `(1,234)`; `(3.4%)` and `(2018)` stay positive
        framing = plain and (
            1900 <= value <= 2100
            or (
                value <= 31
                and (
                    _MONTH_BEFORE.search(text, max(0, m.start() - 12), m.start())
                    or _MONTH_AFTER.match(text, end)
                )
            )
            or _PERIOD_AFTER.match(text, end) is not None
        )
        signed = -value if negative else value
        out.append(Number(signed, decimals, scale, percent, currency, plain, bool(framing)))
    return out


def _clean_prediction(text: str) -> str:
    """Drop what is not part of the answer's claims: citation markers, file paths, page references."""
    return _PAGE_REFS.sub(" ", _PATHS.sub(" ", _MARKERS.sub(" ", text)))


def _key_numbers(gold: str) -> list[Number]:
    """The gold's answer numbers: framing numbers (years, dates, `12 months`) only when it has no other."""
    numbers = extract_numbers(gold)
    if not all(n.framing for n in numbers):
        numbers = [n for n in numbers if not n.framing]
    unique: list[Number] = []
    for n in numbers:
        if all((n.value, n.scale, n.percent) != (u.value, u.scale, u.percent) for u in unique):
            unique.append(n)
    return unique


def _rounds_to(value: float, gold: float, decimals: int) -> bool:
    try:
        quantum = Decimal(1).scaleb(-decimals)
        return Decimal(repr(value)).quantize(quantum, ROUND_HALF_UP) == Decimal(repr(gold)).quantize(
            quantum, ROUND_HALF_UP
        )
    except InvalidOperation:
        return False


def _close(value: float, gold: float, decimals: int) -> bool:
    if gold == 0:
        return abs(value) < 0.5 * 10.0**-decimals
    return abs(value - gold) <= REL_TOLERANCE * abs(gold) or _rounds_to(value, gold, decimals)


def _agree(pred: Number, gold: Number, forgive_sign: bool) -> bool:
    """Does `pred` state `gold`, in the gold's units, under the scale, percent and sign rules?"""
    values = [pred.value]
    if pred.scale and gold.scale:
        values = [pred.value * pred.scale / gold.scale]
    elif pred.scale:
        values += [pred.value * pred.scale / f for f in (1.0, 1e3, 1e6, 1e9)]
    elif gold.scale:
        values += [pred.value * f / gold.scale for f in (1.0, 1e3, 1e6, 1e9)]
    if pred.percent and not gold.percent:
        values += [v / 100 for v in values]
    elif gold.percent and not pred.percent:
        values += [v * 100 for v in values]
    target = abs(gold.value) if forgive_sign else gold.value
    return any(_close(abs(v) if forgive_sign else v, target, gold.decimals) for v in values)


def numeric_match(predicted: str, gold: str) -> bool | None:
    """Does the prediction state the gold's key numbers? None when the gold states none."""
    wanted = _key_numbers(gold)
    if not wanted:
        return None
    cleaned = _clean_prediction(predicted)
    stated = extract_numbers(cleaned)
    if not stated:
        return False
    forgive = bool(_NEGATIVE_CUE.search(cleaned) or _NEGATIVE_CUE.search(gold))
    matched = sum(1 for g in wanted if any(_agree(p, g, forgive) for p in stated))
    return matched >= math.ceil(2 * len(wanted) / 3)


# ==================================================================================== text


def _fold(text: str) -> str:
    """Unicode-folded, case-folded, punctuation to spaces (keeping `.` and `%` inside numbers)."""
    text = unicodedata.normalize("NFKC", text).casefold()
    text = re.sub(r"[.,](?!\d)|(?<!\d)[.,]|[^\w\s.,%]", " ", text)
    return " ".join(text.split())


def _polarity(text: str) -> str | None:
    words = _fold(_MARKERS.sub(" ", text)).split()
    return words[0] if words and words[0] in ("yes", "no") else None


def text_match(predicted: str, gold: str) -> bool | None:
    """Normalised containment, or content-word recall ≥ 0.6; None for an empty gold."""
    gold_folded, pred_folded = _fold(gold), _fold(_MARKERS.sub(" ", predicted))
    if not gold_folded:
        return None
    gold_pol, pred_pol = _polarity(gold), _polarity(predicted)
    if gold_pol and pred_pol and gold_pol != pred_pol:
        return False
    if gold_folded in ("yes", "no"):
        return pred_pol == gold_pol
    if f" {gold_folded} " in f" {pred_folded} ":
        return True
    words = set(content_words(gold_folded))
    if not words:
        return gold_pol is not None and pred_pol == gold_pol
    recall = len(words & set(content_words(pred_folded))) / len(words)
    return recall >= TEXT_RECALL


@dataclass(frozen=True)
class MatchResult:
    numeric: bool | None
    text: bool | None
    correct: bool


def score_answer(predicted: str, gold: str) -> MatchResult:
    """The heuristic verdict: the numeric rule when it applies (a contradicting yes/no vetoes it)."""
    numeric = numeric_match(predicted, gold)
    text = text_match(predicted, gold)
    if numeric is not None:
        gold_pol, pred_pol = _polarity(gold), _polarity(predicted)
        correct = numeric and not (gold_pol and pred_pol and gold_pol != pred_pol)
    else:
        correct = bool(text)
    return MatchResult(numeric, text, bool(correct))


# ==================================================================================== judge

JUDGE_SYSTEM = (
    "You grade answers to questions about documents against a gold answer. Reply with exactly one "
    "word: YES if the candidate answer is correct, otherwise NO.\n"
    "Correct means: it gives the same key facts, figures and conclusion as the gold answer. Numbers may "
    "be rounded or written in other units (1,577 million = 1.577 billion; 25% = 0.25) and may differ by "
    "about 1%. Extra detail is fine if it does not contradict the gold answer. A refusal, a 'not found', "
    "a different figure or the opposite conclusion is NO."
)
_VERDICT = re.compile(r"\b(yes|no)\b", re.IGNORECASE)


def judge(model: Model, question: str, gold: str, predicted: str) -> bool | None:
    """An LLM verdict (temperature 0, strict yes/no); None when the model fails or says neither."""
    if not predicted.strip():
        return False
    messages = [
        Message("system", JUDGE_SYSTEM),
        Message(
            "user",
            f"Question: {question}\n\nGold answer: {gold}\n\nCandidate answer: {_MARKERS.sub('', predicted)}"
            "\n\nIs the candidate answer correct? Reply YES or NO.",
        ),
    ]
    params = CompletionParams(max_tokens=256, temperature=0.0, seed=model.config.seed, timeout_s=120.0)
    try:
        reply = model.complete(messages, [], params)
    except ModelError:
        return None
    found = _VERDICT.search(reply.text)
    return None if found is None else found.group(1).lower() == "yes"


# ==================================================================================== running


@dataclass
class AnswerRecord:
    """What a system returns for one question; `run_eval` scores it."""

    answer: str
    citations: list[dict[str, Any]] = field(default_factory=list)
    steps: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    evidence_chars: int = 0  # the characters tool results showed the model
    status: str = "completed"
    error: str | None = None
    query_id: str | None = None


AnswerFn = Callable[[EvalQuestion], AnswerRecord]
PageText = Callable[[str | None, str, int], str | None]


@dataclass
class QuestionResult:
    """One scored answer: the unit of `records.jsonl` and the per-question report."""

    system: str
    id: str
    question: str
    gold: str
    answer: str
    status: str
    error: str | None
    correct: bool
    match: bool
    numeric: bool | None
    text: bool | None
    judge: bool | None
    steps: int
    input_tokens: int
    output_tokens: int
    evidence_tokens: int
    latency_s: float
    citations: int
    citations_valid: int
    citation_validity: float | None
    evidence_page_hit: bool | None
    cited_pages: list[list[Any]] = field(default_factory=list)
    query_id: str | None = None

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


class PageLookup:
    """Stored page text by (context, source, page) over pinned version readers; a citation without a
    context is looked up in every reader (a baseline over one context may not say which)."""

    def __init__(self, readers: Mapping[str, VersionReader]) -> None:
        self.readers = dict(readers)

    def __call__(self, context: str | None, source: str, page: int) -> str | None:
        reader = self.readers.get(context) if context else None
        if reader is not None:
            return reader.page_text(source, page)
        for candidate in self.readers.values():
            text = candidate.page_text(source, page)
            if text is not None:
                return text
        return None


def _collapse(text: str) -> str:
    return " ".join(unicodedata.normalize("NFC", text).split())


def citation_verifies(citation: Mapping[str, Any], page_text: PageText) -> bool:
    """Recheck a citation ourselves: a non-empty grounding that is a verbatim slice of its page at
    `start:end` (whitespace-collapsed), or, without offsets, a verbatim part of the page."""
    grounding = _collapse(str(citation.get("grounding") or ""))
    pages = citation.get("pages") or []
    source = citation.get("source")
    if not grounding or not pages or not isinstance(pages[0], int) or not isinstance(source, str):
        return False
    context = citation.get("context")
    page = page_text(context if isinstance(context, str) else None, source, pages[0])
    if page is None or grounding not in _collapse(page):
        return False
    start, end = citation.get("start"), citation.get("end")
    if isinstance(start, int) and isinstance(end, int):
        return 0 <= start <= end <= len(page) and _collapse(page[start:end]) == grounding
    return True


def _cited_pages(citations: Sequence[Mapping[str, Any]]) -> list[tuple[str, int]]:
    out: list[tuple[str, int]] = []
    for c in citations:
        for page in c.get("pages") or []:
            if isinstance(page, int) and (str(c.get("source")), page) not in out:
                out.append((str(c.get("source")), page))
    return out


def _page_hit(cited: Sequence[tuple[str, int]], gold: Sequence[EvidencePage]) -> bool | None:
    if not gold:
        return None
    wanted = {(doc_key(e.source), e.page) for e in gold}
    return any((doc_key(source), page) in wanted for source, page in cited)


def run_eval(
    questions: Sequence[EvalQuestion],
    answer_fn: AnswerFn,
    *,
    system: str,
    page_text: PageText | None = None,
    judge_model: Model | None = None,
    on_result: Callable[[QuestionResult], None] | None = None,
) -> list[QuestionResult]:
    """Answer and score every question with one system. A system that raises fails that question
    (scored wrong, its error kept); the run goes on."""
    results: list[QuestionResult] = []
    for q in questions:
        began = time.monotonic()
        try:
            record = answer_fn(q)
        except Exception as exc:  # one broken question must not lose a long run
            record = AnswerRecord(answer="", status="failed", error=f"{type(exc).__name__}: {exc}")
        latency = time.monotonic() - began
        match = score_answer(record.answer, q.answer)
        verdict = judge(judge_model, q.question, q.answer, record.answer) if judge_model else None
        valid = sum(1 for c in record.citations if page_text and citation_verifies(c, page_text))
        cited = _cited_pages(record.citations)
        result = QuestionResult(
            system=system,
            id=q.id,
            question=q.question,
            gold=q.answer,
            answer=record.answer,
            status=record.status,
            error=record.error,
            correct=verdict if verdict is not None else match.correct,
            match=match.correct,
            numeric=match.numeric,
            text=match.text,
            judge=verdict,
            steps=record.steps,
            input_tokens=record.input_tokens,
            output_tokens=record.output_tokens,
            evidence_tokens=math.ceil(record.evidence_chars / CHARS_PER_TOKEN),
            latency_s=round(latency, 3),
            citations=len(record.citations),
            citations_valid=valid,
            citation_validity=(valid / len(record.citations)) if record.citations and page_text else None,
            evidence_page_hit=_page_hit(cited, q.evidence),
            cited_pages=[[s, p] for s, p in cited],
            query_id=record.query_id,
        )
        results.append(result)
        if on_result is not None:
            on_result(result)
    return results


# ==================================================================================== Sleuth


def record_from_query(query: Query) -> AnswerRecord:
    """A finished turn as an `AnswerRecord`: evidence = every observation the loop showed the model."""
    steps = [s for s in query.steps if s.status != "running"]
    return AnswerRecord(
        answer=query.answer,
        citations=[dict(c) for c in query.citations],
        steps=len(steps),
        input_tokens=query.usage.input_tokens,
        output_tokens=query.usage.output_tokens,
        evidence_chars=sum(len(s.output or "") for s in steps),
        status=query.status,
        error=query.error,
        query_id=query.id,
    )


def sleuth_answer_fn(
    runtime: Runtime,
    scope: Sequence[str],
    model: str | None = None,
    max_steps: int | None = None,
    timeout_seconds: int = 900,
) -> AnswerFn:
    """Each question as one fresh Sleuth turn (its own session), exactly as `sleuth ask` runs it."""
    from sleuth.agent.turn import TurnRequest

    def answer(q: EvalQuestion) -> AnswerRecord:
        request = TurnRequest(
            ask=q.question,
            scope=list(scope),
            model=model,
            max_steps=max_steps,
            timeout_seconds=timeout_seconds,
        )
        return record_from_query(runtime.ask(request))

    return answer


# ==================================================================================== report


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
    mean_steps: float
    mean_input_tokens: float
    mean_output_tokens: float
    mean_evidence_tokens: float
    p50_latency_s: float
    p95_latency_s: float
    mean_citations: float
    citation_validity: float | None
    failures: int

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
    ("steps", lambda s: f"{s.mean_steps:.1f}"),
    ("in tokens", lambda s: f"{s.mean_input_tokens:,.0f}"),
    ("out tokens", lambda s: f"{s.mean_output_tokens:,.0f}"),
    ("evidence tokens", lambda s: f"{s.mean_evidence_tokens:,.0f}"),
    ("p50 latency", lambda s: f"{s.p50_latency_s:.2f}s"),
    ("p95 latency", lambda s: f"{s.p95_latency_s:.2f}s"),
    ("citations", lambda s: f"{s.mean_citations:.1f}"),
    ("citation validity", lambda s: _pct(s.citation_validity)),
    ("failures", lambda s: str(s.failures)),
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
