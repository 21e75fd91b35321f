"""The forms text takes, declared once. One stored form, and the comparison forms derived from it:

- `normalize_text`: extracted text as a version stores it (spec/context.md §7.1), before any offset is
  taken; page text, chunks, groundings and the keyword index are all slices of it.
- `collapsed`: whitespace runs to one space, trimmed (how a step output and a span are matched, §8.1).
- `plain_line`: outside text (a model's sentence) as one line a person reads as stored: invisible and
  bidirectional controls dropped, whitespace collapsed.
- `comparable`: NFC, then collapsed: the form groundings and pages are compared in (§8.4).
- `folded`: comparable, then casefolded: the form a shaped answer's string is found in its evidence
  (§8.5).
- `QuoteForm`: whitespace runs as one space, typographic quotes and dashes as ASCII (`TYPOGRAPHIC`),
  optionally lower-cased, with every character's offset in the original: how a model's quote is found
  in a page (curation, spec/context.md §5.4) and an answer's quotation in its span (§8.3), so a match
  maps back to a verbatim slice.

The evaluator's answer matching (`agent/evaluation/matching.py`) has a looser form of its own on
purpose (NFKC, punctuation and units), since it judges answers, not quotes.
"""

from __future__ import annotations

import functools
import hashlib
import re
import unicodedata
from dataclasses import dataclass
from pathlib import Path

_TRAILING_SPACES = re.compile(r"[ \t]+(?=\n|$)")
# A hyphen the extractor marked as soft (PDFium writes U+0002, some producers U+FFFE or U+00AD). Between
# letters it is the hyphen the page shows ("open-market"); at a line end it joins the word it split.
_SOFT_HYPHEN = "[\u0002\ufffe\u00ad]"
_SOFT_AT_LINE_END = re.compile(rf"(?<=\w){_SOFT_HYPHEN}[ \t]*\n[ \t]*(?=\w)")
_SOFT_BETWEEN = re.compile(rf"(?<=\w){_SOFT_HYPHEN}(?=\w)")
_SOFT_ANY = re.compile(_SOFT_HYPHEN)
_LIGATURES = str.maketrans(
    {
        "\ufb00": "ff",
        "\ufb01": "fi",
        "\ufb02": "fl",
        "\ufb03": "ffi",
        "\ufb04": "ffl",
        "\ufb05": "st",
        "\ufb06": "st",
    }
)
# Spaces that print as a space (no-break, figure, thin, ideographic …) and characters that print as
# nothing (zero-width, BOM, C0/C1 controls other than tab and newline).
_ODD_SPACES = re.compile("[\u00a0\u1680\u2000-\u200a\u202f\u205f\u3000\u000b\u000c]")
_INVISIBLE = re.compile("[\u0000-\u0008\u000e-\u001f\u007f-\u009f\u200b-\u200d\u2060\ufeff]")
#: Bidirectional controls (embeddings, overrides, isolates, marks): a name holding U+202E shows
#: `report\u202eexe.md` as `reportdm.exe`, and a sentence holding one reads in another order than it
#: is stored, so what a reader sees is not what was written.
BIDI_CONTROLS = frozenset("\u061c\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069")
_BIDI = re.compile("[" + "".join(sorted(BIDI_CONTROLS)) + "]")
#: Characters that print as nothing and join nothing (zero-width space, word joiner, invisible
#: operators, BOM, soft hyphen, grapheme joiner, Hangul and Khmer fillers): two names that differ only
#: by one look the same, so a name holding one is refused (`compile.sources`).
INVISIBLE_IN_NAMES = frozenset(
    "\u00ad\u034f\u115f\u1160\u17b4\u17b5\u180e\u200b\u2060\u2061\u2062\u2063\u2064\u3164\ufeff\uffa0"
)
#: Zero-width non-joiner and joiner: invisible too, but Persian, Indic scripts and emoji sequences need
#: them between their own characters, so a name may hold one only between two non-ASCII characters.
JOINERS = frozenset("\u200c\u200d")


# A PDF's text layer may drop the second f of an ff, ffi or ffl ligature and leave a space in its place
# ("af ect", "Of icer", "suf icient", "dif erent": measured on FinanceBench filings, ~250 such words).
_DROPPED_F = re.compile(r"\b([A-Za-z]*f) ([a-z]+)\b")
_SUFFIXES = ("s", "es", "ed", "d", "ing", "ly", "er", "ers")


@functools.cache
def english_words() -> frozenset[str]:
    """Lower-case English words (`data/words.txt`: the whole words of the MiniLM vocabulary)."""
    text = (Path(__file__).parent / "data" / "words.txt").read_text("utf-8")
    return frozenset(line for line in text.splitlines() if line and not line.startswith("#"))


def _is_word(word: str) -> bool:
    words = english_words()
    if word in words:
        return True
    for suffix in _SUFFIXES:
        stem = word[: -len(suffix)]
        if word.endswith(suffix) and len(stem) > 2 and (stem in words or stem + "e" in words):
            return True
    return False


def repair_dropped_ligatures(text: str) -> str:
    """`text` with each "f " that stands for a dropped ff ligature joined again ("af ect" → "affect",
    "Of icer" → "Officer"): where the joined word is an English word and the two pieces are not both
    words themselves ("of ice" stays). The space becomes the f, so the text keeps its length."""
    if "f " not in text:
        return text

    def join(found: re.Match[str]) -> str:
        left, right = found.group(1), found.group(2)
        joined = f"{left}f{right}"
        if not _is_word(joined.lower()) or (_is_word(left.lower()) and _is_word(right)):
            return found.group(0)
        return joined

    return _DROPPED_F.sub(join, text)


def normalize_text(text: str) -> str:
    """Extracted text as it is stored, once, before any offset is taken (spec/context.md §7.1).

    NFC; CRLF/CR → LF; soft hyphens resolved (kept between letters, joined across a line break);
    typographic ligatures spelled out (`ﬁ` → `fi`); odd spaces → a space; invisible and control
    characters dropped; trailing spaces cut per line. Nothing else changes: words, digits, punctuation
    and line breaks stay, so page text, chunks, groundings and the keyword index agree."""
    text = unicodedata.normalize("NFC", text)
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    if _SOFT_ANY.search(text):
        text = _SOFT_AT_LINE_END.sub("", text)
        text = _SOFT_BETWEEN.sub("-", text)
        text = _SOFT_ANY.sub("", text)
    text = text.translate(_LIGATURES)
    text = _ODD_SPACES.sub(" ", text)
    text = _INVISIBLE.sub("", text)
    return _TRAILING_SPACES.sub("", text)


def collapsed(text: str) -> str:
    """Whitespace runs to one space, trimmed."""
    return " ".join(text.split())


def plain_line(text: str) -> str:
    """Text from outside (a model's sentence, a provider's message) as one plain line for a person to
    read: `normalize_text` (controls, zero-width characters dropped), bidirectional controls dropped so
    it reads in the order it is stored, whitespace collapsed."""
    return collapsed(_BIDI.sub("", normalize_text(text)))


def text_fingerprint(text: str) -> str:
    """16 hex digits of the SHA-256 of `text`: marks a text as a model's without holding it (a
    manifest's `model_written`), and stops matching once a person changes a character of it."""
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:16]


def hidden_in_name(name: str) -> str | None:
    """The first character of `name` a reader cannot see (`INVISIBLE_IN_NAMES`, a bidirectional
    control, or a joiner beside an ASCII character), or None: a name must look like what it is."""
    for index, ch in enumerate(name):
        if ch in INVISIBLE_IN_NAMES or ch in BIDI_CONTROLS:
            return ch
        if ch in JOINERS:
            before = name[index - 1] if index else ""
            after = name[index + 1] if index + 1 < len(name) else ""
            if not before or not after or before.isascii() or after.isascii():
                return ch
    return None


def comparable(text: str) -> str:
    """NFC, whitespace runs collapsed: groundings and pages are compared in this form."""
    return collapsed(unicodedata.normalize("NFC", text))


def folded(text: str) -> str:
    """`comparable`, casefolded: a string leaf of a shaped answer is looked for in this form."""
    return comparable(text).casefold()


#: Typographic quotes and dashes as their ASCII forms: how a quote is typeset is not what it says.
TYPOGRAPHIC = str.maketrans(
    {"\u2018": "'", "\u2019": "'", "\u201c": '"', "\u201d": '"', "\u2013": "-", "\u2014": "-"}
)


@dataclass(frozen=True)
class QuoteForm:
    """Text in the form quotes are matched in, with the offset in the original of each character."""

    text: str
    offsets: list[int]

    @classmethod
    def of(cls, text: str, lower: bool = False) -> QuoteForm:
        """Whitespace runs as one space (none at either end), `TYPOGRAPHIC` applied, and lower-cased
        where `lower` (a character whose lower case is longer is kept as it is, so offsets stay one
        per character)."""
        chars: list[str] = []
        offsets: list[int] = []
        pending_space = False
        for i, ch in enumerate(text):
            if ch.isspace():
                pending_space = bool(chars)
                continue
            if pending_space:
                chars.append(" ")
                offsets.append(i - 1)
                pending_space = False
            ch = ch.translate(TYPOGRAPHIC)
            if lower:
                low = ch.lower()
                ch = low if len(low) == 1 else ch
            chars.append(ch)
            offsets.append(i)
        return cls("".join(chars), offsets)

    def find(self, wanted: str) -> tuple[int, int] | None:
        """Where `wanted` (already in this form) stands in the original text: `(start, end)` offsets of
        its first match, or None (also for an empty `wanted`)."""
        at = self.text.find(wanted) if wanted else -1
        if at < 0:
            return None
        return self.offsets[at], self.offsets[at + len(wanted) - 1] + 1
