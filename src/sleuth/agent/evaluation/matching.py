"""Scoring one answer against the gold: the numeric and text rules, the heuristic verdict and the LLM
judge.

Matching rules (all documented here because accuracy numbers are only comparable when they are):

- `numeric_match` applies when the gold answer states a number. The gold's *key numbers* are its
  numbers minus framing numbers (bare integers that are years 1900–2100, days of a date such as
  `January 28`, or period lengths such as `12 months`). A gold whose only numbers are framing ones is
  a dated statement, not a figure (`Yes, dividends were paid in 2022`): the numeric rule does not
  apply and the text rule decides, unless the gold *is* the date (`2015`, `In fiscal 2019.`, `March
  31, 2023`: at most one other content word), when the date is the key number;
  numbers glued to letters (`FY2022`, `Q2`, `10-K`, `3M`, `COVID-19`) never count. A key number is
  matched by any number in the prediction that agrees within 1% relative, or equals it once rounded
  half-up to the gold's displayed decimals (gold `1.9%` accepts `1.87%`). Citation markers, file
  paths (every path the answer cites, spaces and all, plus anything shaped like one) and page
  references are removed from the prediction first.
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
  opens with yes/no fails when the prediction opens with the opposite. A short gold that says the
  information is not there (`Not disclosed`) matches a prediction that says so too (`did not
  disclose`), and nothing else.
- A year or a date that is a key number must be stated exactly (2016 is not 2015 within 1%).
- The heuristic verdict is `numeric_match` when it applies (vetoed by a contradicting yes/no), else
  `text_match`. With a judge model, the final verdict is the judge's; the heuristic is kept beside it.
"""

from __future__ import annotations

import math
import re
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass

from sleuth.agent.claims import FILE_NAMES, PAGE_REFS
from sleuth.agent.extractive import content_words
from sleuth.format.dates import MONTH_NAMES
from sleuth.format.numbers import NEGATIVE_CUE, Number, agree, extract_numbers
from sleuth.models.base import CompletionParams, Message, Model, ModelError

__all__ = [
    "JUDGE_SYSTEM",
    "MatchResult",
    "Number",
    "extract_numbers",
    "judge",
    "numeric_match",
    "score_answer",
    "text_match",
]

TEXT_RECALL = 0.6


# ==================================================================================== numbers


_MARKERS = re.compile(r"[\[【［]\s*\d{1,3}(?:\s*[-–,;]\s*\d{1,3})*\s*[\]】］]")
_MONTH_WORDS = re.compile(rf"\b(?:{MONTH_NAMES})\.?", re.IGNORECASE)
_DATE_WORDS = frozenset(
    {"fiscal", "year", "years", "fy", "quarter", "quarters", "calendar", "ended", "ending", "end"}
    | {"period", "month", "months", "first", "second", "third", "fourth", "half", "as", "of"}
)


def _clean_prediction(text: str, cited_paths: Sequence[str] = ()) -> str:
    """Drop what is not part of the answer's claims: citation markers, file paths, page references.
    The answer's own cited paths go first, longest first, as exact strings: a file name such as
    `AMD 2022 10K.pdf` holds spaces and numbers that no path pattern can tell from prose."""
    for path in sorted({p for p in cited_paths if p}, key=len, reverse=True):
        text = text.replace(path, " ")
        name = path.rsplit("/", 1)[-1]
        if len(name) >= 5:
            text = text.replace(name, " ")
    return PAGE_REFS.sub(" ", FILE_NAMES.sub(" ", _MARKERS.sub(" ", text)))


MAX_DATE_WORDS = 1  # content words a gold may have beside its dates and still *be* a date


def _is_only_a_date(gold: str) -> bool:
    """`2015`, `In fiscal 2019.`, `March 31, 2023`, `FY2021`: nothing but the date it names."""
    words = [
        w for w in content_words(_fold(_MONTH_WORDS.sub(" ", gold))) if not any(ch.isdigit() for ch in w)
    ]
    return len([w for w in words if w not in _DATE_WORDS]) <= MAX_DATE_WORDS


def _key_numbers(gold: str) -> list[Number]:
    """The gold's answer numbers: framing numbers (years, dates, `12 months`) only when the gold is
    nothing but such a date; a gold whose only numbers frame a statement has none."""
    numbers = extract_numbers(gold)
    if all(n.framing for n in numbers):
        if not _is_only_a_date(gold):
            return []
    else:
        numbers = [n for n in numbers if not n.framing]
    unique: list[Number] = []
    for n in numbers:
        if all((n.value, n.scale, n.percent) != (u.value, u.scale, u.percent) for u in unique):
            unique.append(n)
    return unique


def numeric_match(predicted: str, gold: str, cited_paths: Sequence[str] = ()) -> bool | None:
    """Does the prediction state the gold's key numbers? None when the gold states none."""
    wanted = _key_numbers(gold)
    if not wanted:
        return None
    cleaned = _clean_prediction(predicted, cited_paths)
    stated = extract_numbers(cleaned)
    if not stated:
        return False
    forgive = bool(NEGATIVE_CUE.search(cleaned) or NEGATIVE_CUE.search(gold))
    matched = sum(1 for g in wanted if any(agree(p, g, forgive) for p in stated))
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


# "Not disclosed", "the report does not state it": an answer that the information is not there.
_UNAVAILABLE = re.compile(
    r"(?:\b(?:not|no|never|nor)\b|n't\b)[^.;]{0,40}?\b(?:disclos\w*|availab\w*|mention\w*|provid\w*|stat(?:e|ed|es)\b"
    r"|report\w*|found|specif\w*|given|included)",
    re.IGNORECASE,
)
UNAVAILABLE_WORDS = 6  # a longer gold says more than "not there", and the usual rules decide


def text_match(predicted: str, gold: str, cited_paths: Sequence[str] = ()) -> bool | None:
    """Normalised containment, or content-word recall ≥ 0.6; None for an empty gold."""
    gold_folded, pred_folded = _fold(gold), _fold(_clean_prediction(predicted, cited_paths))
    if not gold_folded:
        return None
    gold_pol, pred_pol = _polarity(gold), _polarity(predicted)
    if gold_pol and pred_pol and gold_pol != pred_pol:
        return False
    if gold_folded in ("yes", "no"):
        return pred_pol == gold_pol
    if _UNAVAILABLE.search(gold) and len(content_words(gold_folded)) <= UNAVAILABLE_WORDS:
        return bool(_UNAVAILABLE.search(_clean_prediction(predicted, cited_paths)))
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


def score_answer(predicted: str, gold: str, cited_paths: Sequence[str] = ()) -> MatchResult:
    """The heuristic verdict: the numeric rule when it applies (a contradicting yes/no vetoes it).
    `cited_paths` are the sources the answer cites; they are never part of its claims."""
    numeric = numeric_match(predicted, gold, cited_paths)
    text = text_match(predicted, gold, cited_paths)
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
