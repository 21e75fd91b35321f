"""From the synthesis model's markers to verified citations (spec/runtime.md §8.3–8.4, spec/api.md §8.4).

The model's text cites evidence by its position in the numbered list it was shown. This module parses
those markers leniently, picks each cited span's grounding sentence, checks every grounding against the
stored page text, and rewrites the markers so that `[n]` always means `citations[n-1]`.

Marker rules (what counts as a citation):
- Outside code, a bracket group whose body is a list of items separated by `,` or `;` is a citation
  group. An item is an integer `3`, a range `3-5` (also `–`/`—`), or a label `E7` (mapped through
  `labels`). Brackets may be `[…]`, `【…】` or `［…］`. Groups standing next to each other (only spaces
  and at most one `,`/`;` between them) form one run, written canonically as `[3][5]`.
- A group with an integer of four or more digits (`[2024]`, `[1990-2020]`) is not a citation: it is
  rewritten `(2024)`. Inside inline code or fenced code, `[n]` is never a citation and becomes `(n)`,
  so that every `[n]` left in the text is one (spec/api.md §8.4 rules 1 and 4).
- Items naming evidence that does not exist (out of range, unknown label, reversed or huge range) are
  removed and reported (`unknown_marker`); a run left empty is deleted with the space before it, so
  `foo [9].` becomes `foo.`.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from sleuth.agent.claims import CANONICAL_MARKER, Unsupported, check_claims
from sleuth.agent.evidence import best_window, content_words, split_sentences, window_candidates
from sleuth.agent.records import Citation
from sleuth.agent.spans import EvidenceSpan
from sleuth.format.text import QuoteForm, comparable

__all__ = [
    "GROUNDING_WINDOW",
    "CitationResult",
    "PageText",
    "build_citations",
    "grounding_order",
    "normalize_markers",
    "renumber_grounding",
    "verify_grounding",
]

PageText = Callable[[str, str, int], str | None]
"""`page_text(context, source_path, page)`: the stored extracted text of a page, or None."""

GROUNDING_WINDOW = 400
_MAX_RANGE = 50

_ITEM = r"(?:[Ee]\d{1,6}|\d{1,9}(?:\s*[-–—]\s*\d{1,9})?)"
_GROUP = re.compile(rf"[\[【［]\s*({_ITEM}(?:\s*[,;]\s*{_ITEM})*)\s*[\]】］]")
_CODE = re.compile(r"(?ms)^[ \t]*(`{3,}|~{3,})[^\n]*\n.*?(?:^[ \t]*\1[ \t]*$|\Z)|(`+)[^`\n]+\2")
_RUN_SEP = re.compile(r"[ \t]*[,;]?[ \t]*")
_BRACKETED_INT = re.compile(r"\[(\d+)\]")
_CLOSERS = ".,;:!?)]}»”’\"'"


@dataclass
class CitationResult:
    """The answer text with final markers, its citations, and what was dropped on the way."""

    text: str
    citations: list[Citation] = field(default_factory=list)
    dropped: list[dict[str, Any]] = field(default_factory=list)  # {marker, source, page, reason}
    evidence_to_citation: dict[int, int] = field(default_factory=dict)  # 1-based position → number
    #: Sentences whose facts their citations do not state (`agent.claims`): {start, end, text, missing,
    #: reason}, offsets in `text`.
    unsupported: list[dict[str, Any]] = field(default_factory=list)


# --- scanning ------------------------------------------------------------------------------------------


@dataclass
class _Cite:
    positions: list[int]


_Token = str | _Cite
_GroupFn = Callable[[str], list[int] | str]


def _code_free_segments(text: str) -> list[tuple[bool, str]]:
    """Split into `(is_code, piece)` so markers are never read inside code."""
    out: list[tuple[bool, str]] = []
    pos = 0
    for m in _CODE.finditer(text):
        if m.start() > pos:
            out.append((False, text[pos : m.start()]))
        out.append((True, m.group()))
        pos = m.end()
    if pos < len(text):
        out.append((False, text[pos:]))
    return out


def _tokenize(text: str, group_fn: _GroupFn) -> list[_Token]:
    """Literal strings and citation runs; `group_fn` decides each bracket group's fate."""
    tokens: list[_Token] = []
    for is_code, piece in _code_free_segments(text):
        if is_code:
            tokens.append(_BRACKETED_INT.sub(r"(\1)", piece))
            continue
        pos = 0
        for m in _GROUP.finditer(piece):
            between = piece[pos : m.start()]
            verdict = group_fn(m.group(1))
            if isinstance(verdict, str):
                tokens.append(between + verdict)
            elif tokens and isinstance(tokens[-1], _Cite) and _RUN_SEP.fullmatch(between):
                tokens[-1].positions.extend(verdict)  # `[3][5]`, `[3], [5]`: one run
            else:
                tokens.append(between)
                tokens.append(_Cite(list(verdict)))
            pos = m.end()
        tokens.append(piece[pos:])
    return tokens


def _render(tokens: Sequence[_Token], sort: bool = False) -> str:
    """Join tokens; an emptied run takes the space before it (or after it, at a line start) along."""
    out: list[str] = []
    strip_next = False
    for i, tok in enumerate(tokens):
        if isinstance(tok, str):
            out.append(tok.lstrip(" \t") if strip_next else tok)
            strip_next = False
            continue
        positions = list(dict.fromkeys(tok.positions))
        if sort:
            positions.sort()
        if positions:
            out.append("".join(f"[{p}]" for p in positions))
            continue
        before = "".join(out)
        after = next((t for t in tokens[i + 1 :] if isinstance(t, str) and t), "")
        trimmed = before.rstrip(" \t")
        if not trimmed or trimmed.endswith("\n"):
            out = [trimmed]
            strip_next = True
        elif trimmed != before and (not after or after[0] in _CLOSERS or after[0].isspace()):
            out = [trimmed]
    return "".join(out)


# --- markers -------------------------------------------------------------------------------------------


def normalize_markers(text: str, n_evidence: int, labels: Mapping[str, int]) -> tuple[str, list[str]]:
    """Rewrite lenient markers to canonical `[n][m]` over evidence positions 1..n_evidence.

    `labels` maps an evidence label (`E7`) to its 1-based position in the evidence list. Returns the
    new text and the unknown markers removed from it (each written `[9]` or `[E42]`), in text order.
    Canonical text comes back unchanged, so the function is idempotent.
    """
    unknown: list[str] = []
    upper_labels = {k.upper(): v for k, v in labels.items()}

    def judge(body: str) -> list[int] | str:
        items = [i.strip() for i in re.split(r"[,;]", body)]
        if any(len(d) >= 4 for i in items if not i[:1].isalpha() for d in re.findall(r"\d+", i)):
            return f"({body.strip()})"
        positions: list[int] = []
        for item in items:
            if item[:1].isalpha():
                pos = upper_labels.get(item.upper())
                if pos is not None and 1 <= pos <= n_evidence:
                    positions.append(pos)
                else:
                    unknown.append(f"[{item}]")
                continue
            ends = [int(d) for d in re.findall(r"\d+", item)]
            lo, hi = ends[0], ends[-1]
            if hi < lo or hi - lo > _MAX_RANGE:
                unknown.append(f"[{item}]")
                continue
            for n in range(lo, hi + 1):
                if 1 <= n <= n_evidence:
                    positions.append(n)
                else:
                    unknown.append(f"[{n}]")
        return positions

    return _render(_tokenize(text, judge)), unknown


def _cited_in_order(text: str) -> list[int]:
    """Evidence positions in order of first appearance in canonical text."""
    order: dict[int, None] = {}
    for is_code, piece in _code_free_segments(text):
        if not is_code:
            for m in CANONICAL_MARKER.finditer(piece):
                order.setdefault(int(m.group(1)))
    return list(order)


def grounding_order(grounding: Mapping[str, Sequence[int]]) -> list[int]:
    """Evidence positions in order of first appearance in a shape's grounding (the `extra_cited` order)."""
    order: dict[int, None] = {}
    for numbers in grounding.values():
        for n in numbers:
            order.setdefault(int(n))
    return list(order)


def renumber_grounding(
    grounding: Mapping[str, Sequence[int]], evidence_to_citation: Mapping[int, int]
) -> dict[str, list[int]]:
    """Map a shape's grounding from evidence positions to final citation numbers.

    Positions whose citation was dropped (or never existed) disappear; a pointer left with no
    citation is removed, so every number in the result names a citation.
    """
    out: dict[str, list[int]] = {}
    for pointer, numbers in grounding.items():
        mapped = list(dict.fromkeys(evidence_to_citation[n] for n in numbers if n in evidence_to_citation))
        if mapped:
            out[pointer] = mapped
    return out


# --- grounding -----------------------------------------------------------------------------------------


def _citing_words(text: str) -> dict[int, set[str]]:
    """For each cited evidence position, the content words of the answer sentences that cite it."""
    words: dict[int, set[str]] = {}
    for a, b in split_sentences(text):
        sentence = text[a:b]
        cited = {int(n) for n in CANONICAL_MARKER.findall(sentence)}
        if cited:
            vocabulary = content_words(CANONICAL_MARKER.sub(" ", sentence))
            for n in cited:
                words.setdefault(n, set()).update(vocabulary)
    return words


def _grounding(span: EvidenceSpan, words: set[str]) -> tuple[int, int]:
    """Offsets in `span.text` of the sentence (or ≤400-char window) sharing the most words; ties: earliest."""
    candidates = window_candidates(span.text, GROUNDING_WINDOW, join_sentences=False)
    return best_window(span.text, candidates, words, by_hits=False)


# A quotation the answer attributes to a citation: `"…" [2]`, `“…”, the report says [2]`. The gap between
# the closing quote and the markers stays inside the sentence (no sentence end, no other quote).
_QUOTE_THEN_MARKERS = re.compile(
    r"[\"“](?P<quote>[\s\S]{15,4000}?)[\"”](?P<gap>[^\"“”\[\]\n]{0,80}?)(?P<run>(?:\[\d+\])+)"
)
_QUOTE_MARK = re.compile(r"[\"“”]")
_SENTENCE_END_IN_GAP = re.compile(r"[.!?]\s+\S")
_ELLIPSIS_ENDS = re.compile(r"^\s*(?:…|\.\.\.)\s*|\s*(?:…|\.\.\.)\s*$")


def locate_quote(quote: str, text: str | QuoteForm) -> tuple[int, int] | None:
    """Where `quote` stands verbatim in `text`, tolerating only what a writer may change without
    changing the words: whitespace runs, typographic quotes and dashes (`format.text.QuoteForm`, the
    form curation finds a model's quotes in), and an ellipsis at either end. Offsets are in `text`,
    so the grounding is `text[a:b]`; None when the words are not there."""
    form = text if isinstance(text, QuoteForm) else QuoteForm.of(text)
    return form.find(QuoteForm.of(_ELLIPSIS_ENDS.sub("", quote)).text)


def _forms(span: EvidenceSpan) -> list[QuoteForm]:
    """The forms a quote of `span` is looked for in: its text as stored, then as the model read it
    (`EvidenceSpan.read_form`: running headers, footers and page numbers cut, a hyphenated line
    break joined), each character still mapped to its offset in `span.text`."""
    forms = [QuoteForm.of(span.text)]
    read = span.read_form()
    if read is not None:
        form = QuoteForm.of(read.text)
        forms.append(QuoteForm(form.text, [read.offsets[i] for i in form.offsets]))
    return forms


def _locate_in(quote: str, span: EvidenceSpan) -> tuple[int, tuple[int, int]] | None:
    """`locate_quote` for a quotation that may hold quotation marks of its own ("the "Fan" program"),
    or follow an uncited quote in the same match: the body, then what follows each inner mark; in
    each of the span's `_forms`. Returns where the located part starts in `quote`, and its offsets
    in `span.text` (a verbatim slice, whatever form it was found in)."""
    forms = _forms(span)
    for cut in [0] + [q.end() for q in _QUOTE_MARK.finditer(quote)]:
        if len(quote) - cut >= 15:
            for form in forms:
                if (where := locate_quote(quote[cut:], form)) is not None:
                    return cut, where
    return None


def _collapsed(text: str, where: tuple[int, int]) -> str:
    return " ".join(text[where[0] : where[1]].split())


@dataclass
class _Bound:
    """The answer's quotations bound to the spans they quote (see `_bind_quotes`)."""

    text: str
    evidence: list[EvidenceSpan]
    at: dict[int, tuple[int, int]] = field(default_factory=dict)  # position → grounding in span.text
    origin: dict[int, int] = field(default_factory=dict)  # added position → the evidence position it copies
    dropped: list[dict[str, Any]] = field(default_factory=list)


def _bind_quotes(text: str, evidence: Sequence[EvidenceSpan]) -> _Bound:
    """Make every quotation that sits beside a marker the grounding of that marker's citation.

    For `"…" [n]`: when the words are in span n, the citation's grounding is exactly that slice and the
    quotation is rewritten to it (whitespace collapsed), so what the reader sees beside `[n]` is what
    `[n]` proves. A second, different quotation of the same span gets a citation of its own (a copy of
    the span at a new position). A quotation whose words are not in span n loses that marker, recorded
    as `quote_not_in_evidence`: it stays in the text, but never as verified."""
    bound = _Bound(text, list(evidence))
    edits: list[tuple[int, int, str]] = []
    copies: dict[tuple[int, int, int], int] = {}
    offset = 0
    for is_code, piece in _code_free_segments(text):
        base, offset = offset, offset + len(piece)
        if is_code:
            continue
        for m in _QUOTE_THEN_MARKERS.finditer(piece):
            if _SENTENCE_END_IN_GAP.search(m.group("gap")):
                continue
            quote, kept = m.group("quote"), []
            shown: str | None = None  # the quotation as the reader will see it
            quoted_from = 0
            for n in (int(x) for x in CANONICAL_MARKER.findall(m.group("run"))):
                span = evidence[n - 1]
                found = _locate_in(quote, span)
                if found is not None and shown is not None and _collapsed(span.text, found[1]) != shown:
                    found = None  # one quotation, one text: each of its markers must prove exactly it
                if found is None:
                    bound.dropped.append(
                        {
                            "marker": f"[{n}]",
                            "source": span.source_path,
                            "page": span.page,
                            "reason": "quote_not_in_evidence",
                        }
                    )
                    continue
                cut, where = found
                if shown is None:
                    shown, quoted_from = _collapsed(span.text, where), cut
                if bound.at.setdefault(n, where) == where:
                    kept.append(n)
                    continue
                key = (n, *where)
                if key not in copies:
                    bound.evidence.append(span)
                    copies[key] = len(bound.evidence)
                    bound.origin[copies[key]] = n
                    bound.at[copies[key]] = where
                kept.append(copies[key])
            if shown is not None and shown != quote[quoted_from:]:
                edits.append((base + m.start("quote") + quoted_from, base + m.end("quote"), shown))
            run = "".join(f"[{n}]" for n in dict.fromkeys(kept))
            start, end = base + m.start("run"), base + m.end("run")
            if not run:  # the quotation keeps no marker: the space before the emptied run goes too
                start = base + m.end("quote") + 1 + len(m.group("gap").rstrip(" \t"))
            edits.append((start, end, run))
    out = text
    for a, b, new in sorted(edits, reverse=True):
        out = out[:a] + new + out[b:]
    bound.text = out
    return bound


def _citation(span: EvidenceSpan, words: set[str], quoted: tuple[int, int] | None = None) -> dict[str, Any]:
    if quoted is not None:
        a, b = quoted
    else:
        a, b = _grounding(span, words) if span.text.strip() else (0, 0)
    artifact = span.via == "artifact"
    return {
        "source": span.source_path,
        "section_paths": [list(span.section_path)],
        "pages": [span.page],
        "score": float(span.score) if span.score is not None else 0.0,
        "grounding": span.text[a:b],
        "kind": span.via,
        "sources": list(span.artifact_sources) if artifact else [],
        "artifact_name": span.artifact_name if artifact else None,
        "context": span.context,
        "start": span.start + a,
        "end": span.start + b,
        **({"cell": span.cell} if span.cell else {}),
    }


# --- verification --------------------------------------------------------------------------------------


def _failure(citation: Mapping[str, Any], page: str | None) -> str | None:
    """Why a citation fails verification (§8.4), or None when its grounding is verbatim at its offsets."""
    if page is None:
        return "page_missing"
    grounding = comparable(str(citation.get("grounding") or ""))
    start, end = citation.get("start"), citation.get("end")
    if not grounding or not isinstance(start, int) or not isinstance(end, int):
        return "not_verbatim"
    if not 0 <= start <= end <= len(page) or comparable(page[start:end]) != grounding:
        return "not_verbatim"
    if grounding not in comparable(page):
        return "not_verbatim"
    return None


def _page_of(citation: Mapping[str, Any], page_text: PageText) -> str | None:
    pages = citation.get("pages") or [None]
    page = pages[0]
    if not isinstance(page, int):
        return None
    return page_text(str(citation.get("context")), str(citation.get("source")), page)


def verify_grounding(citation: Citation | Mapping[str, Any], page_text: PageText) -> bool:
    """Is the citation's grounding a verbatim slice of its page at `start:end` (NFC, whitespace-collapsed)?

    A failure is a bug upstream (spans are page slices, groundings span slices), so callers drop the
    citation rather than trust it.
    """
    fields = citation.model_dump() if isinstance(citation, Citation) else citation
    return _failure(fields, _page_of(fields, page_text)) is None


# --- the whole path ------------------------------------------------------------------------------------


def build_citations(
    text: str,
    evidence: Sequence[EvidenceSpan],
    page_text: PageText,
    extra_cited: Sequence[int] = (),
    grounding_text: Mapping[int, str] | None = None,
    question: str = "",
    computed: str = "",
) -> CitationResult:
    """Turn the synthesis text into the released text and its verified citations.

    `evidence` is the list synthesis was shown (markers are 1-based positions in it; `[E7]` labels are
    mapped through the spans' refs). `extra_cited` are positions cited only by a shape's grounding (see
    `grounding_order`); their citations follow those in the text. `grounding_text` adds, per position,
    text the grounding sentence should match (e.g. the shape leaves it supports). The spans are not
    modified; `evidence_to_citation` tells the caller which were cited. Each sentence is held to what
    its markers cite (`agent.claims`): the question and the turn's `computed` results count as stated.
    """
    labels = {span.ref: i for i, span in enumerate(evidence, start=1)}
    text = text.replace(_OPEN, "").replace(_CLOSE, "")
    normalized, unknown = normalize_markers(text, len(evidence), labels)
    dropped: list[dict[str, Any]] = [
        {"marker": m, "source": None, "page": None, "reason": "unknown_marker"} for m in unknown
    ]
    bound = _bind_quotes(normalized, evidence)
    normalized, dropped = bound.text, dropped + bound.dropped
    evidence = bound.evidence
    normalized, unsupported = _hold_to_claims(normalized, evidence, question, computed, dropped)

    in_text = _cited_in_order(normalized)
    order = list(in_text)
    for n in extra_cited:
        if not 1 <= n <= len(evidence):
            dropped.append({"marker": f"[{n}]", "source": None, "page": None, "reason": "unknown_marker"})
        elif n not in order:
            order.append(n)

    words = _citing_words(normalized)
    if grounding_text:
        for n, extra in grounding_text.items():
            words.setdefault(n, set()).update(content_words(extra))
    everything = content_words(CANONICAL_MARKER.sub(" ", normalized))

    pages: dict[tuple[str, str, int], str | None] = {}
    kept: list[tuple[int, dict[str, Any]]] = []
    for n in order:
        span = evidence[n - 1]
        citation = _citation(span, words.get(n) or everything, bound.at.get(n))
        key = (span.context, span.source_path, span.page)
        if key not in pages:
            pages[key] = page_text(*key)
        reason = _failure(citation, pages[key])
        if reason is None:
            kept.append((n, citation))
        else:
            dropped.append(
                {"marker": f"[{n}]", "source": span.source_path, "page": span.page, "reason": reason}
            )

    numbers = {n: i for i, (n, _) in enumerate(kept, start=1)}

    def renumber(body: str) -> list[int] | str:
        if not body.isdigit():  # not canonical: cannot happen after normalize_markers; keep it inert
            return f"({body})"
        return [numbers[int(body)]] if int(body) in numbers else []

    final = _render(_tokenize(normalized, renumber), sort=True)
    # Rule 4, as a last guard: any bracketed integer that is not a citation number becomes `(n)`.
    final = _BRACKETED_INT.sub(
        lambda m: m.group() if 1 <= int(m.group(1)) <= len(kept) else f"({m.group(1)})", final
    )
    final, marked = _take_marks(final)
    return CitationResult(
        text=final,
        citations=[Citation.model_validate(c) for _, c in kept],
        dropped=dropped,
        evidence_to_citation=_first_citations(numbers, bound.origin),
        unsupported=[
            {"start": a, "end": b, "text": final[a:b], "missing": list(u.missing), "reason": u.reason}
            for (a, b), u in zip(marked, unsupported, strict=True)
        ],
    )


# --- claims --------------------------------------------------------------------------------------------

_OPEN, _CLOSE = "\ue000", "\ue001"  # private-use marks around an unsupported sentence while markers move


def _hold_to_claims(
    text: str,
    evidence: Sequence[EvidenceSpan],
    question: str,
    computed: str,
    dropped: list[dict[str, Any]],
) -> tuple[str, list[Unsupported]]:
    """Take the markers off each sentence whose facts they do not state (`agent.claims`), recording
    them in `dropped`, and enclose every unsupported sentence in marks that `_take_marks` turns into
    offsets once the markers are renumbered."""
    found = check_claims(text, evidence, question, computed)
    for u in reversed(found):
        sentence = text[u.start : u.end]
        if u.reason == "claim_not_in_evidence":
            sentence = _render(_tokenize(sentence, lambda _body: []))
        body = sentence.strip()
        lead = sentence.index(body[:1]) if body else 0
        text = (
            text[: u.start]
            + sentence[:lead]
            + _OPEN
            + body
            + _CLOSE
            + sentence[lead + len(body) :]
            + text[u.end :]
        )
    for u in found:
        if u.reason != "claim_not_in_evidence":
            continue
        for n in u.markers:
            span = evidence[n - 1]
            dropped.append(
                {
                    "marker": f"[{n}]",
                    "source": span.source_path,
                    "page": span.page,
                    "reason": "claim_not_in_evidence",
                    "missing": list(u.missing),
                }
            )
    return text, found


def _take_marks(text: str) -> tuple[str, list[tuple[int, int]]]:
    """`text` without the marks `_hold_to_claims` set, and the offsets of what each enclosed."""
    out: list[str] = []
    marked: list[tuple[int, int]] = []
    length = 0
    for piece in re.split(f"([{_OPEN}{_CLOSE}])", text):
        if piece == _OPEN:
            marked.append((length, length))
        elif piece == _CLOSE:
            marked[-1] = (marked[-1][0], length)
        else:
            out.append(piece)
            length += len(piece)
    return "".join(out), marked


def _first_citations(numbers: Mapping[int, int], origin: Mapping[int, int]) -> dict[int, int]:
    """Evidence position → its first citation number, copies made for a second quotation folded back."""
    out: dict[int, int] = {}
    for position, number in sorted(numbers.items(), key=lambda item: item[1]):
        out.setdefault(origin.get(position, position), number)
    return out
