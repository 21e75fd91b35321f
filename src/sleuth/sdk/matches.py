"""Where a hit's match is (issue 43, item 3): the offsets, in the text a hit shows (`Hit.chunk_text`),
of what the search matched, and a short window around it (`Hit.snippet`), so that a model reads the
sentence that answers without writing find-and-slice code.

What matched is, first, a phrase the search required word for word (`must_contain`, a quoted phrase of
the query), where it stands among the most query words; else the query's own words (lightly stemmed:
"revenues" meets "revenue"; a long word also meets one sharing its first six letters, "acquisition"
and "acquired" do not, "consolidated" and "consolidation" do), the window of `SNIPPET_CHARS` holding
the most of them. A hit holding none of them (the dense half of the search found it by meaning) has
no match, and its snippet is its opening sentences. A snippet starts at its sentence's start when
that leaves room for the match (`format.sentences`, which reads "$5.5 billion" and "U.S." whole), else
at a word, and is always a slice of the hit's text.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from sleuth.format.sentences import split_sentences
from sleuth.store.text import stem
from sleuth.store.version.keyword import quoted
from sleuth.store.version.stop_words import SEARCH_STOP_WORDS

__all__ = ["SNIPPET_CHARS", "Match", "find_match", "phrase_pattern"]

#: How long a snippet is, at most (about two sentences of a filing).
SNIPPET_CHARS = 240
#: Words at least this long also meet a word sharing their first `PREFIX_CHARS` letters.
PREFIX_CHARS = 6
_WORD = re.compile(r"\w+")


@dataclass(frozen=True)
class Match:
    """A hit's match in its text: `text[start:end]`, and the snippet `text[snippet_start:snippet_end]`."""

    start: int | None
    end: int | None
    snippet_start: int
    snippet_end: int


@dataclass(frozen=True, order=True)
class _Found:
    start: int
    end: int
    what: str  # the query word (stemmed) or the phrase it is
    phrase: bool


def phrase_pattern(text: str) -> re.Pattern[str] | None:
    """A phrase found where it stands in a text, any case and any run of spaces between its words,
    where no letter or digit runs on at either end (as `must_contain` matches); a trailing `*` lets its
    last word run on ("inventor*" finds "inventory"). None for a phrase of spaces."""
    prefix = text.rstrip().endswith("*")
    parts = text.strip().removesuffix("*").split() if prefix else text.split()
    if not parts:
        return None
    body = r"\s+".join(re.escape(part) for part in parts)
    return re.compile(rf"(?<!\w){body}" + (r"\w*" if prefix else r"(?!\w)"), re.IGNORECASE)


def _meets(word: str, wanted: set[str], prefixes: dict[str, str]) -> str | None:
    """The query word (stemmed) a text's word meets, or None."""
    key = stem(word)
    if key in wanted:
        return key
    return prefixes.get(key[:PREFIX_CHARS]) if len(key) > PREFIX_CHARS else None


def _occurrences(text: str, query: str, phrases: Sequence[str]) -> list[_Found]:
    found: list[_Found] = []
    for phrase in dict.fromkeys([*phrases, *quoted(query)]):
        pattern = phrase_pattern(phrase)
        if pattern is not None:
            found += [
                _Found(m.start(), m.end(), phrase, True)
                for m in pattern.finditer(text)
                if m.end() > m.start()
            ]
    words = [w.lower() for w in _WORD.findall(query)]
    wanted = {stem(w) for w in words if len(w) > 1 and w not in SEARCH_STOP_WORDS}  # "U.S." is no "s"
    prefixes = {k[:PREFIX_CHARS]: k for k in sorted(wanted) if len(k) > PREFIX_CHARS}
    for m in _WORD.finditer(text):
        what = _meets(m.group().lower(), wanted, prefixes)
        if what is not None:
            found.append(_Found(m.start(), m.end(), what, False))
    return sorted(found)


def _best(found: list[_Found]) -> list[_Found]:
    """The occurrences, from one to the first that completes what the window of `SNIPPET_CHARS`
    starting there holds, of the window with the most distinct phrases, then the most distinct
    words, then the shortest such run (the earliest of those): the query's words closest together."""
    best: list[_Found] = []
    best_key = (-1, -1, 0)
    j = 0
    for i, first in enumerate(found):
        j = max(j, i)
        while j + 1 < len(found) and found[j + 1].end - first.start <= SNIPPET_CHARS:
            j += 1
        window = found[i : j + 1]
        every = {(f.what, f.phrase) for f in window}
        seen: set[tuple[str, bool]] = set()
        for k, f in enumerate(window):
            seen.add((f.what, f.phrase))
            if len(seen) == len(every):
                run = window[: k + 1]
                break
        phrases = sum(1 for _what, phrase in every if phrase)
        key = (phrases, len(every) - phrases, -(run[-1].end - first.start))
        if key > best_key:
            best, best_key = run, key
    return best


def _word_start(text: str, at: int) -> int:
    """`at`, moved forward to the start of a word when it is inside one."""
    while 0 < at < len(text) and not text[at - 1].isspace():
        at += 1
    while at < len(text) and text[at].isspace():
        at += 1
    return at


def _word_end(text: str, at: int) -> int:
    """`at`, moved back to the end of a word when it is inside one."""
    while 0 < at < len(text) and not text[at].isspace():
        at -= 1
    while at > 0 and text[at - 1].isspace():
        at -= 1
    return at


def _snippet(text: str, start: int, end: int) -> tuple[int, int]:
    """A window of at most `SNIPPET_CHARS` around `text[start:end]`: from its sentence's start when
    that leaves room, else from a word a third of the spare room before it; to a word's end."""
    if len(text) <= SNIPPET_CHARS:
        return 0, len(text)
    spare = max(0, SNIPPET_CHARS - (end - start))
    starts = [a for a, _b in split_sentences(text)]
    opening = max((a for a in starts if a <= start), default=0)
    begin = opening if start - opening <= spare else _word_start(text, max(0, start - spare // 3))
    begin = min(begin, start)
    if begin + SNIPPET_CHARS >= len(text):  # near the end: the room left goes before the match,
        earliest = _word_start(text, len(text) - SNIPPET_CHARS)  # from a sentence's start if one fits
        fitting = [a for a in starts if earliest <= a <= begin]
        begin = min(fitting) if fitting else min(begin, earliest)
        return begin, len(text)
    stop = _word_end(text, begin + SNIPPET_CHARS)
    return begin, stop if stop > begin else begin + SNIPPET_CHARS


def find_match(text: str, query: str | None, phrases: Sequence[str] = ()) -> Match:
    """Where `query` (and the `phrases` the search required word for word) matched in `text`."""
    found = _occurrences(text, query or "", phrases) if text else []
    window = _best(found)
    if not window:
        a, b = _snippet(text, 0, 0)
        return Match(None, None, a, b)
    required = [f for f in window if f.phrase]
    start, end = (required[0].start, required[0].end) if required else (window[0].start, window[-1].end)
    a, b = _snippet(text, start, end)
    return Match(start, end, a, b)
