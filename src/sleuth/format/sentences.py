"""Sentences of stored text, as offsets (`text[a:b]` is the sentence): where evidence windows and
citation groundings snap (spec/runtime.md §8.1, §8.3) and where a hit's snippet starts (`sdk.matches`).

A full stop ends a sentence only when a capital, a digit, a currency sign or an opening quote follows,
and never after an abbreviation, an initial or an initialism ("U.S."), or inside a figure ("$5.5
billion"); blank lines, bullets, numbered items, headings and table rows are breaks of their own.
"""

from __future__ import annotations

import itertools
import re

__all__ = ["BLOCK_LINE", "is_abbreviation", "is_title", "split_sentences"]

_ABBREVIATION_WORDS = """e.g i.e etc vs cf al approx inc ltd co corp llc plc no nos nr mr mrs ms dr prof
    st jr sr fig figs eq eqs chap vol vols pp para ref refs dept jan feb mar apr jun jul aug sep sept oct
    nov dec u.s u.k u.n e.u a.m p.m ph.d"""
_ABBREVIATIONS = frozenset(_ABBREVIATION_WORDS.split())
_TERMINAL = re.compile(r"[.!?]+[\"'”’)\]]*(\s+)|[。！？]+[」』”’)]*\s*")
_OPENERS = "\"'“‘([«"
_CURRENCY = "$€£¥"  # "… $5.5 billion. $3.1 billion was repaid": a figure may open a sentence
BLOCK_LINE = re.compile(r"[ \t]*(?:[-*+•▪◦‣]\s|\d{1,3}[.)]\s|[A-Za-z][.)]\s|#{1,6}\s|\||>)")
_HARD_LINE = re.compile(r"[ \t]*(?:#{1,6}\s|\|)")


def is_abbreviation(text: str, dot: int) -> bool:
    """Is the '.' at `dot` the end of an abbreviation, an initial or an initialism (`U.S.`)?"""
    start = dot
    while start > 0 and not text[start - 1].isspace():
        start -= 1
    token = text[start:dot].lstrip("\"'“‘([«").lower()
    if not token:
        return False
    if token in _ABBREVIATIONS:
        return True
    if len(token) == 1 and token.isalpha():  # an initial: "John F. Kennedy"
        return True
    if token.isdigit() and len(token) <= 3 and not text[text.rfind("\n", 0, start) + 1 : start].strip():
        return True  # an item number at the start of a line: "1. First step"
    return bool(re.fullmatch(r"(?:[a-z]\.)+[a-z]", token))  # "u.s", "e.g", "a.k.a"


def _hard_breaks(text: str) -> list[int]:
    """Offsets where a new block starts: after blank lines and at line-level structure."""
    breaks: list[int] = []
    lines = text.split("\n")
    pos = 0
    prev: str | None = None
    for line in lines:
        if prev is not None:
            blank = not prev.strip() or not line.strip()
            if blank or BLOCK_LINE.match(line) or _HARD_LINE.match(prev) or is_title(prev, line):
                breaks.append(pos)
        prev = line
        pos += len(line) + 1
    return breaks


def is_title(line: str, following: str) -> bool:
    """A bare heading line ("Remote Work") before a capitalised line: short, no closing punctuation,
    and title-cased, so a hard-wrapped sentence ("It keeps the rule") is never cut there."""
    words = line.split()
    if not words or len(words) > 8 or len(line.strip()) > 60 or line.rstrip()[-1] in ".,;:!?":
        return False
    capitalised = sum(1 for w in words if w[0].isupper() or w[0].isdigit())
    nxt = following.lstrip()
    return capitalised * 2 > len(words) and words[0][0].isupper() and bool(nxt) and nxt[0].isupper()


def _strip(text: str, a: int, b: int) -> tuple[int, int] | None:
    while a < b and text[a].isspace():
        a += 1
    while b > a and text[b - 1].isspace():
        b -= 1
    return (a, b) if a < b else None


def split_sentences(text: str) -> list[tuple[int, int]]:
    """Offsets `(start, end)` of the sentences of `text`, whitespace-trimmed, in order.

    Splits on `.`/`!`/`?` followed by whitespace and a capital, a digit or an opening quote or bracket
    (never after a known abbreviation, an initial or inside a decimal such as 3.5), on CJK full stops,
    on blank lines, and on line breaks before bullets, numbered items, headings and table rows (and after
    headings and table rows). Offsets are exact, so `text[start:end]` is the sentence.
    """
    cuts = [0, *_hard_breaks(text), len(text)]
    out: list[tuple[int, int]] = []
    for a, b in itertools.pairwise(cuts):
        block_start = a
        for m in _TERMINAL.finditer(text, a, b):
            end_of_mark = m.start(1) if m.group(1) is not None else m.end()
            nxt = m.end()
            if m.group(1) is not None:
                if nxt >= b:
                    continue
                ch = text[nxt]
                if ch in _OPENERS and nxt + 1 < b:
                    ch = text[nxt + 1]
                if not (ch.isupper() or ch.isdigit() or ch in _OPENERS or ch in _CURRENCY):
                    continue
                if (
                    text[m.start()] == "."
                    and m.group().rstrip().rstrip("\"'”’)]") == "."
                    and (is_abbreviation(text, m.start()))
                ):
                    continue
            piece = _strip(text, block_start, end_of_mark)
            if piece:
                out.append(piece)
            block_start = nxt
        piece = _strip(text, block_start, b)
        if piece:
            out.append(piece)
    return out
