"""Claims checked against what they cite (issue 46; spec/runtime.md §8.4).

A citation that verifies proves that its quote is on its page, not that the sentence beside it says
what the page says: "Employees can work remotely 5 days a week. [1]" over the span "Remote work must
follow the Information Security Policy." verified. Here each sentence of an answer is held to the spans
its markers cite, by the facts it states:

- numbers with their scale, currency and percent (`format.numbers`: within 1 %, or equal once
  rounded to the decimals the answer shows, so "$1.2 billion" is stated by "1,187" in a table in
  millions; signs are not compared: prose words a loss, and its asides in parentheses, "(305.83
  million)", read as a table's negatives), years, days of dates and period lengths (exactly: "5 days"
  is not "3 days"), counts
  written as words ("three days"), codes such as `ERR-4012`, and quoted words (three or more);
- each is looked for in the cited spans as synthesis was shown them (the text, a table cell's row and
  period, the section path, the file name), in what the turn computed (`query_db` counts, …), and in
  the question (what the question names frames the answer: it is not a claim);
- a number that no cited span states may be worked out from two that are stated, as a difference, a
  sum, an average, a ratio, or a percent change or share, when it is a percentage or its sentence
  words a computation ("grew", "difference", "margin", …). The operands are the figures the answer
  itself states and finds, and those of short cited spans (a table row, a cell), never every pair of
  numbers on a page, where almost any value is some difference;
- a number a sentence's own working gives ("24.26 = 6,489 [1] / ((282 [2] + 253 [3]) / 2)", any
  number of steps) is derived, with the working's small constants; its operands are held to their
  spans like any other figure (`equations`);
- a sentence with a fact found nowhere loses its markers (`claim_not_in_evidence`) and is reported
  unsupported; a sentence without markers whose facts none of the answer's cited spans states is
  reported as `uncited`, and so is every such sentence of an answer that cites nothing.

Sentences that state none of these facts are not judged: this reads values, not meaning.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from sleuth.agent.equations import shown_working
from sleuth.agent.evidence import content_words
from sleuth.agent.spans import EvidenceSpan
from sleuth.format.numbers import Number, agree, extract_numbers
from sleuth.format.text import TYPOGRAPHIC, folded

__all__ = ["FILE_NAMES", "PAGE_REFS", "Unsupported", "check_claims", "sentence_bounds"]

Reason = Literal["claim_not_in_evidence", "uncited"]

#: A span with more numbers than this (a page-long window) lends none of them as an operand.
MAX_OPERAND_NUMBERS = 12
#: Operands tried in all, so that the pairs stay few.
MAX_OPERANDS = 24

CANONICAL_MARKER = re.compile(r"\[(\d+)\]")  # a marker once normalised: `[3]`
_END = re.compile(r"[.!?][\"'”’)\]]*(?=\s|$)")
_LEADING_RUN = re.compile(r"[ \t]*(?:\[\d+\])+")
_ENUMERATOR = re.compile(r"^[ \t>]*(?:#{1,6}[ \t]+)?(?:\d{1,3}[.)]|[-*•+])[ \t]+", re.M)
#: Page references and file names in prose: never claims (the eval matcher strips them too).
PAGE_REFS = re.compile(r"\b(?:pp?\.|pages?)\s*\d+(?:\s*[-–]\s*\d+)?", re.IGNORECASE)
FILE_NAMES = re.compile(r"\S+\.(?:pdf|md|txt|html?|docx|csv|jsonl?)\b", re.IGNORECASE)
_CODE = re.compile(r"\b[A-Z]{2,}[A-Z0-9]*-\d+[A-Z0-9-]*\b")
_QUOTE = re.compile(r"[\"“]([^\"“”\n]{3,300})[\"”]")
_QUOTE_MIN_WORDS = 3
_ABBREVIATIONS = frozenset(
    {"pp", "no", "nos", "vs", "etc", "inc", "co", "corp", "ltd", "llc", "plc", "u.s", "u.k", "e.g", "i.e"}
    | {"approx", "fig", "figs", "mr", "mrs", "ms", "dr", "st", "jr", "sr", "est", "dept", "div"}
    | {"jan", "feb", "mar", "apr", "jun", "jul", "aug", "sep", "sept", "oct", "nov", "dec"}
)
_WORDS = {
    "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7, "eight": 8, "nine": 9, "ten": 10,
    "eleven": 11, "twelve": 12, "fifteen": 15, "twenty": 20, "thirty": 30, "forty": 40, "fifty": 50,
    "hundred": 100,
}  # fmt: skip
_COUNT_WORD = re.compile(rf"\b(?:{'|'.join(_WORDS)})\b", re.IGNORECASE)
_ONE = re.compile(r"\bone\b", re.IGNORECASE)
_COMPUTATION = re.compile(
    r"\b(?:gr[eo]w\w*|growth|increas\w*|decreas\w*|declin\w*|ris(?:e|es|en|ing)|rose|fell|fall\w*|"
    r"drop\w*|chang\w*|differ\w*|more|less|fewer|higher|lower|up|down|ratio|margin|total\w*|combined|"
    r"sum|average|times|gap|net|compared|versus|vs|share|per)\b",
    re.IGNORECASE,
)


@dataclass(frozen=True)
class Unsupported:
    """A sentence of the answer, by its offsets in the text checked, whose facts are not all found."""

    start: int
    end: int
    missing: tuple[str, ...]
    reason: Reason
    markers: tuple[int, ...]  # the evidence positions it cited, whose markers it loses


@dataclass
class _Facts:
    numbers: list[Number]
    words: list[str]  # codes and quotations, as written


def sentence_bounds(text: str) -> list[tuple[int, int]]:
    """Each sentence of `text` as `(start, end)`: a line, or a part of one that ends in `.`, `!` or `?`;
    the markers right after a sentence's end are its own (`… a week. [1] Remote …`)."""
    out: list[tuple[int, int]] = []
    pos = 0
    for line in text.split("\n"):
        begin, line_end = pos, pos + len(line)
        cursor = begin
        for m in _END.finditer(text, begin, line_end):
            if not _ends_sentence(text, m.start(), m.end(), line_end):
                continue
            end = m.end()
            run = _LEADING_RUN.match(text, end, line_end)
            if run:
                end = run.end()
            if end <= cursor:
                continue
            if text[cursor:end].strip():
                out.append((cursor, end))
            cursor = end
        if text[cursor:line_end].strip():
            out.append((cursor, line_end))
        pos = line_end + 1
    return out


def _ends_sentence(text: str, at: int, after: int, line_end: int) -> bool:
    """Whether the `.`, `!` or `?` at `at` ends a sentence: not after an abbreviation or an initial
    (`p. 60`, `Inc.`, `U.S.`), and not before a lowercase word or a number."""
    following = text[after:line_end].lstrip()
    if following[:1].islower() or following[:1].isdigit():
        return False
    if text[at] != ".":
        return True
    word = re.search(r"[A-Za-z.]*$", text[max(0, at - 12) : at])
    before = word.group().lower() if word else ""
    return not (len(before.replace(".", "")) == 1 or before in _ABBREVIATIONS)


def _as_digits(text: str, ones: bool) -> str:
    """Counts written as words become digits ("three days" → "3 days"); `ones` also turns "one"."""
    text = _COUNT_WORD.sub(lambda m: str(_WORDS[m.group().lower()]), text)
    return _ONE.sub("1", text) if ones else text


def _facts(sentence: str) -> _Facts:
    """What a sentence states that can be looked up: markers, page references, file names and list
    enumerators are not claims."""
    plain = CANONICAL_MARKER.sub(" ", sentence)
    plain = _ENUMERATOR.sub(" ", PAGE_REFS.sub(" ", FILE_NAMES.sub(" ", plain)))
    quotes = [q.strip() for q in _QUOTE.findall(plain) if len(q.split()) >= _QUOTE_MIN_WORDS]
    codes = _CODE.findall(plain)
    return _Facts(extract_numbers(_as_digits(plain, ones=False)), [*codes, *quotes])


@dataclass
class _Source:
    """One cited span as synthesis saw it, read once."""

    text: str
    numbers: list[Number]
    operands: list[float]


def _source(span: EvidenceSpan) -> _Source:
    name = re.sub(r"[_/\\.\-]+", " ", span.source_path)
    text = "\n".join([span.text, span.cell or "", " > ".join(span.section_path), name])
    numbers = extract_numbers(_as_digits(text, ones=True))
    lent = [n for n in numbers if not n.framing]
    cell = extract_numbers(span.cell) if span.cell else []
    short = lent if len(lent) <= MAX_OPERAND_NUMBERS else []
    return _Source(folded(text.translate(TYPOGRAPHIC)), numbers, [_full(n) for n in [*cell, *short]])


def _full(number: Number) -> float:
    return number.value * (number.scale or 1.0)


def _stated(claim: Number, numbers: Sequence[Number]) -> bool:
    return any(agree(n, claim, forgive_sign=True) for n in numbers)


def _derived(claim: Number, operands: Sequence[float], computation: bool) -> bool:
    """Is `claim` one arithmetic step from two operands (see the module rules)?"""
    if claim.framing or not (claim.percent or computation):
        return False
    pool = list(dict.fromkeys(operands))[:MAX_OPERANDS]
    for i, a in enumerate(pool):
        for j, b in enumerate(pool):
            if i == j:
                continue
            if claim.percent:
                results = [a / b * 100, (a - b) / abs(b) * 100] if b else []
            else:
                results = [a - b, a + b, (a + b) / 2] + ([a / b] if b else [])
            for result in results:
                if agree(Number(result, 6, percent=claim.percent), claim, forgive_sign=True):
                    return True
    return False


def check_claims(
    text: str,
    evidence: Sequence[EvidenceSpan],
    question: str = "",
    computed: str = "",
) -> list[Unsupported]:
    """The sentences of `text` (canonical markers `[n]` over `evidence`, 1-based) that state a fact
    their citations do not, in text order."""
    sources: dict[int, _Source] = {}

    def source(n: int) -> _Source:
        if n not in sources:
            sources[n] = _source(evidence[n - 1])
        return sources[n]

    given = extract_numbers(_as_digits(f"{question}\n{computed}", ones=True))
    given_text = folded(f"{question}\n{computed}".translate(TYPOGRAPHIC))
    sentences = [(a, b, _cited(text[a:b], len(evidence))) for a, b in sentence_bounds(text)]
    answer_cited = sorted({n for _, _, cited in sentences for n in cited})
    found_numbers: list[float] = []  # figures the answer states and a source confirms: operands
    out: list[Unsupported] = []
    for start, end, cited in sentences:
        sentence = text[start:end]
        facts = _facts(sentence)
        if not facts.numbers and not facts.words:
            continue
        within = cited or answer_cited
        texts = [source(n).text for n in within]
        numbers = [x for n in within for x in source(n).numbers] + given
        operands = [x for n in within for x in source(n).operands]
        computation = bool(_COMPUTATION.search(sentence))
        missing: list[str] = []
        working = shown_working(sentence)  # "24.26 = 6,489 [1] / …": results its own working gives
        for claim in facts.numbers:
            if _stated(claim, numbers):
                found_numbers.append(_full(claim))
            elif any(agree(w, claim, forgive_sign=True) for w in working):
                continue
            elif not _derived(claim, [*found_numbers, *operands], computation):
                missing.append(claim.shown.strip())
        for words in facts.words:
            wanted = folded(words.translate(TYPOGRAPHIC))
            if not any(wanted in t for t in [*texts, given_text]):
                missing.append(words)
        if missing:
            reason: Reason = "claim_not_in_evidence" if cited else "uncited"
            out.append(Unsupported(start, end, tuple(dict.fromkeys(missing)), reason, tuple(cited)))
    return out


def stating(sentence: str, evidence: Sequence[EvidenceSpan], limit: int = 2) -> list[int]:
    """The evidence positions (1-based, at most `limit`, best first) that state every fact `sentence`
    states and share words with it: where an uncited sentence's facts are, for the repair request to
    point at. A small figure is on many pages, so the span must also speak of what the sentence does.
    Sleuth never cites on a model's behalf: the model adds the marker and the check runs again."""
    facts = _facts(sentence)
    if not facts.numbers and not facts.words:
        return []
    wanted = [folded(words.translate(TYPOGRAPHIC)) for words in facts.words]
    words = {w for w in content_words(CANONICAL_MARKER.sub(" ", sentence)) if not w.isdigit()}
    ranked: list[tuple[int, int]] = []
    for n, span in enumerate(evidence, start=1):
        source = _source(span)
        if all(_stated(c, source.numbers) for c in facts.numbers) and all(w in source.text for w in wanted):
            shared = len(words & content_words(span.text))
            if shared:
                ranked.append((-shared, n))
    return [n for _, n in sorted(ranked)[:limit]]


def _cited(sentence: str, n_evidence: int) -> list[int]:
    return list(
        dict.fromkeys(int(n) for n in CANONICAL_MARKER.findall(sentence) if 1 <= int(n) <= n_evidence)
    )
