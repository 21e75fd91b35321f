"""From the loop's observations to the evidence handed to synthesis (spec/runtime.md §8.1).

Everything here is a pure function over `EvidenceSpan`s and strings (`mark_seen` only flips the spans'
`seen` flags, which is its purpose), so the whole path can be replayed byte for byte.
The invariant every function keeps: a span's `text == page_text[start:end]`; windows are slices of a
span's text, so their offsets are the span's `start` plus the slice offsets.
"""

from __future__ import annotations

import bisect
import dataclasses
import re
from collections.abc import Iterable, Sequence

from sleuth.agent.spans import EvidenceSpan
from sleuth.format.sentences import split_sentences
from sleuth.format.text import collapsed
from sleuth.models.base import ModelConfig
from sleuth.store.version.stop_words import OVERLAP_STOP_WORDS

__all__ = [
    "COMPUTED_FNS",
    "best_window",
    "computed_results",
    "content_words",
    "evidence_budget",
    "format_evidence",
    "mark_seen",
    "select_evidence",
    "split_sentences",
    "window_candidates",
]

SEEN_PREFIX_CHARS = 60
MAX_SPANS = 24
MAX_CHARS = 40_000
MIN_CHARS = 2_000  # the least evidence a synthesis prompt gets, however small its model's window
SYNTHESIS_REPLY_TOKENS = 2_048
PROMPT_OVERHEAD_CHARS = 3_000  # the synthesis rules, the shape and the ask
WINDOW_CHARS = 1_600
COMPUTED_FNS = ("query_db", "get_fact", "read_rosters")
COMPUTED_EACH = 2_000
COMPUTED_TOTAL = 6_000

_WORD = re.compile(r"\w+")
_TOKEN = re.compile(r"\S+")
_LABEL_NUM = re.compile(r"(\d+)$")


def content_words(text: str) -> set[str]:
    """Lower-cased word tokens minus stop words: the vocabulary that overlap scores compare."""
    return {w for w in _WORD.findall(text.lower()) if w not in OVERLAP_STOP_WORDS}


def _label_number(ref: str) -> int:
    m = _LABEL_NUM.search(ref)
    return int(m.group(1)) if m else 1 << 30


# --- seen ----------------------------------------------------------------------------------------------

_ESCAPES = re.compile(r"\\[ntr]")


def _first_sighting(span: EvidenceSpan, views: Sequence[str]) -> int | None:
    """Earliest position of the span's label (a whole token) or of its collapsed 60-char prefix, as
    stored or as the model read it (without its page furniture: `EvidenceSpan.read_form`)."""
    label = re.compile(rf"(?<!\w){re.escape(span.ref)}(?!\w)") if span.ref else None
    read = span.read_form()
    texts = [span.text] if read is None else [span.text, read.text.lstrip()]
    prefixes = [p for p in dict.fromkeys(collapsed(t[:SEEN_PREFIX_CHARS]) for t in texts) if p]
    best: int | None = None
    for view in views:
        hits: list[int] = []
        if label is not None and (m := label.search(view)):
            hits.append(m.start())
        hits += [i for prefix in prefixes if (i := view.find(prefix)) >= 0]
        if hits and (best is None or min(hits) < best):
            best = min(hits)
    return best


def mark_seen(spans: Iterable[EvidenceSpan], observation: str, counter: int) -> int:
    """Mark the spans this observation shows and number them in order of first sighting.

    A span is seen when its label appears as a whole token (`E7` does not match `E71`) or when its
    first 60 characters, whitespace-collapsed, appear in the whitespace-collapsed observation (those
    of its text as stored, or as the model read it, its running header cut). A printed
    `repr` writes newlines as `\\n`, so the observation is also tried with those escapes read as spaces.
    Newly seen spans get `seen_order` from `counter` in order of appearance (ties by label number);
    the new counter is returned.
    """
    plain = collapsed(observation)
    views = [plain]
    unescaped = collapsed(_ESCAPES.sub(" ", observation))
    if unescaped != plain:
        views.append(unescaped)
    found: list[tuple[int, int, EvidenceSpan]] = []
    for span in spans:
        if span.seen:
            continue
        pos = _first_sighting(span, views)
        if pos is not None:
            found.append((pos, _label_number(span.ref), span))
    for _, _, span in sorted(found, key=lambda t: (t[0], t[1])):
        if span.seen:  # the same object listed twice
            continue
        span.sighting.seen = True
        span.sighting.order = counter
        counter += 1
    return counter


# --- windows -------------------------------------------------------------------------------------------


def _word_windows(text: str, a: int, b: int, width: int) -> list[tuple[int, int]]:
    """Windows of at most `width` chars inside `text[a:b]`, starting and ending on word boundaries."""
    tokens = [(m.start(), m.end()) for m in _TOKEN.finditer(text, a, b)]
    ends = [e for _, e in tokens]
    out: list[tuple[int, int]] = []
    for s, e in tokens:
        k = bisect.bisect_right(ends, s + width) - 1
        end = ends[k] if k >= 0 and ends[k] > s else min(e, s + width)  # one token wider than the window
        out.append((s, end))
    return out


def window_candidates(text: str, width: int, *, join_sentences: bool) -> list[tuple[int, int]]:
    """Candidate windows of at most `width` chars, snapped to sentences where a sentence fits.

    With `join_sentences`, each candidate is the longest run of whole sentences from a starting
    sentence; a sentence longer than `width` contributes word-snapped windows instead.
    """
    sentences = split_sentences(text)
    out: list[tuple[int, int]] = []
    for i, (s, e) in enumerate(sentences):
        if e - s > width:
            out.extend(_word_windows(text, s, e, width))
            continue
        end = e
        if join_sentences:
            for _, e2 in sentences[i + 1 :]:
                if e2 - s > width:
                    break
                end = e2
        out.append((s, end))
    if not out:
        out = _word_windows(text, 0, len(text), width)
    return out


def best_window(
    text: str, candidates: Sequence[tuple[int, int]], words: set[str], *, by_hits: bool = True
) -> tuple[int, int]:
    """The candidate sharing the most distinct words with `words` (then, `by_hits`, the most
    occurrences of them); remaining ties go to the earliest candidate."""
    tokens = [(m.start(), m.end(), m.group().lower()) for m in _WORD.finditer(text)]
    starts = [t[0] for t in tokens]
    best: tuple[int, int] | None = None
    best_key: tuple[int, int] = (-1, -1)
    for a, b in sorted(candidates):
        i, j = bisect.bisect_left(starts, a), bisect.bisect_left(starts, b)
        hits = [w for _, e, w in tokens[i:j] if e <= b and w in words] if words else []
        key = (len(set(hits)), len(hits) if by_hits else 0)
        if key > best_key:
            best, best_key = (a, b), key
    if best is None:
        raise ValueError("no candidate windows")
    return best


def _windowed(span: EvidenceSpan, question_words: set[str], width: int) -> EvidenceSpan:
    if len(span.text) <= width:
        return span
    a, b = best_window(span.text, window_candidates(span.text, width, join_sentences=True), question_words)
    return dataclasses.replace(
        span,
        text=span.text[a:b],
        start=span.start + a,
        end=span.start + b,
        section_path=list(span.section_path),
        artifact_sources=list(span.artifact_sources),
    )


def select_evidence(
    spans: Sequence[EvidenceSpan],
    final_labels: Sequence[str],
    question: str,
    max_spans: int = MAX_SPANS,
    max_chars: int = MAX_CHARS,
    window: int = WINDOW_CHARS,
) -> list[EvidenceSpan]:
    """The evidence list for synthesis: `final(evidence=…)` spans first, then seen spans by first sighting.

    Duplicates (same label or same page slice) are kept once; a span longer than `window` chars is
    replaced by a copy cut to the window that best matches the question, so `text == page[start:end]`
    still holds. A span that would push the total over `max_chars` is skipped, and the list stops at
    `max_spans`.
    """
    by_ref = {s.ref: s for s in reversed(spans)}  # the first span wins for a repeated label
    ordered: list[EvidenceSpan] = [by_ref[r] for r in final_labels if r in by_ref]
    seen = [s for s in spans if s.seen]
    seen.sort(key=lambda s: (s.seen_order is None, s.seen_order or 0, _label_number(s.ref)))
    ordered.extend(seen)

    question_words = content_words(question)
    out: list[EvidenceSpan] = []
    keys: set[object] = set()
    total = 0
    for span in ordered:
        if len(out) >= max_spans:
            break
        location = (span.context, span.source_path, span.page, span.start, span.end)
        if span.ref in keys or location in keys:
            continue
        keys.update((span.ref, location))
        cut = _windowed(span, question_words, window)
        if total + len(cut.text) > max_chars:
            continue
        total += len(cut.text)
        out.append(cut)
    return out


# --- what synthesis reads ------------------------------------------------------------------------------


def computed_results(
    observations: Sequence[tuple[list[str], str]],
    each: int = COMPUTED_EACH,
    total: int = COMPUTED_TOTAL,
) -> str:
    """Observations of the steps that computed something (`query_db`, `get_fact`, `read_rosters`).

    Counts and lists live in these outputs rather than in spans, so synthesis sees them. Each is cut to
    `each` chars and all together to `total` chars (headers not counted). `observations` holds one
    `(called fn names, observation)` per step, in step order; the header numbers steps from 1.
    """
    parts: list[str] = []
    budget = total
    for number, (fns, observation) in enumerate(observations, start=1):
        names = [n for n in dict.fromkeys(f.rsplit(".", 1)[-1] for f in fns) if n in COMPUTED_FNS]
        body = observation.strip()
        if not names or not body or budget <= 0:
            continue
        body = body[: min(each, budget)]
        budget -= len(body)
        parts.append(f"Step {number} ({', '.join(names)}):\n{body}")
    return "\n\n".join(parts)


def format_evidence(spans: Sequence[EvidenceSpan]) -> str:
    """The numbered list synthesis cites from: `[n] (source, p. page, § A > B) "text"`."""
    lines: list[str] = []
    for n, span in enumerate(spans, start=1):
        where = f"{span.source_path}, p. {span.page}"
        if span.section_path:
            where += f", § {' > '.join(span.section_path)}"
        lines.append(f'[{n}] ({where}) "{span.text}"')
    return "\n\n".join(lines)


def evidence_budget(configs: Sequence[ModelConfig], prompt_chars: int) -> int:
    """Evidence characters the synthesis prompt can hold: `MAX_CHARS`, or less when the synthesis
    model's context window, minus its reply and the rest of the prompt (`prompt_chars`: instructions,
    history, computed results), is smaller. `configs`: the turn's provider models (none: offline)."""
    if not configs:
        return MAX_CHARS
    window_chars = (configs[0].context_window - SYNTHESIS_REPLY_TOKENS) * 4
    used = PROMPT_OVERHEAD_CHARS + prompt_chars
    return max(MIN_CHARS, min(MAX_CHARS, int((window_chars - used) * 0.9)))
