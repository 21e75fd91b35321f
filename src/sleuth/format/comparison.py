"""One section of two documents compared sentence by sentence (issue 43: comparing a filing's risk
factors with the last one's by hand found differences wherever a page or a chunk ended).

A section is read as one text across its pages (`stitch`): each page as a reader reads it
(`format.reading`: no running headers, footers or page numbers, wrapped lines joined), a page break
read as a space inside a sentence and as a line break after one, so where a page ends changes no
sentence. Its sentences (`format.sentences`) are compared by a key that ignores case, spacing and the
form of quotes and dashes, never a word or a figure (`sentence_key`), and aligned with the standard
library's `difflib` (`align`): equal runs are unchanged, a sentence found on both sides out of order
is moved, and of the rest a removed and an added sentence in the same place that share most of their
words are one changed sentence. Every sentence keeps the page offsets it stands on
(`Stitched.places`), so what is reported is cited on the verbatim page.
"""

from __future__ import annotations

import bisect
import difflib
import itertools
import re
from collections.abc import Sequence
from dataclasses import dataclass

from sleuth.format.reading import Kept
from sleuth.format.sentences import BLOCK_LINE, is_title, split_sentences

__all__ = [
    "CHANGED_AT",
    "MAX_PAIRS",
    "Alignment",
    "Stitched",
    "align",
    "has_words",
    "sentence_key",
    "stitch",
    "word_edits",
]

#: A removed and an added sentence in the same place (between the same unchanged sentences) are one
#: changed sentence when this share of their words is common (difflib's ratio over words). Only the
#: same place: a new risk elsewhere in the section that shares a stock phrase ("could have a material
#: adverse effect on our business") with a removed one is no change of it.
CHANGED_AT = 0.6
#: The most (removed, added) pairs weighed for a change in one comparison (`Alignment.unpaired`
#: says when a place had more than were left).
MAX_PAIRS = 20_000
_ENDS = ".!?:;"
_INLINE_BULLET = re.compile(r"[ \t][•▪◦‣][ \t]")
_FORMS = str.maketrans(
    {
        "‘": "'",
        "’": "'",
        "‚": "'",
        "‛": "'",
        "“": '"',
        "”": '"',
        "„": '"',
        "–": "-",
        "—": "-",
        "‑": "-",
        "\u00ad": None,
    }
)


@dataclass(frozen=True)
class Stitched:
    """A run of page pieces read as one text: `pieces[k]` is `(its start in text, page, its Kept)`."""

    text: str
    pieces: tuple[tuple[int, int, Kept], ...]

    def places(self, start: int, end: int) -> list[tuple[int, int, int]]:
        """`(page, page start, page end)` of `text[start:end]`: one per page it covers, each the
        verbatim page range from its first character to its last."""
        at = max(0, bisect.bisect_right([s for s, _p, _k in self.pieces], start) - 1)
        out: list[tuple[int, int, int]] = []
        for offset, page, kept in self.pieces[at:]:
            if offset >= end:
                break
            inside = kept.offsets[max(0, start - offset) : max(0, end - offset)]
            if inside:
                out.append((page, inside[0], inside[-1] + 1))
        return out

    def sentences(self) -> list[tuple[int, int]]:
        """Offsets in `text` of its sentences that hold a word (a stray page number or rule holds
        none); a bullet inside a line starts one, as a bullet at a line's start does (one text
        layer runs a list into its paragraph: "as a result of: • The failure …; • Volatility …")."""
        out = []
        for a, b in split_sentences(self.text):
            cuts = [a, *(m.start() + 1 for m in _INLINE_BULLET.finditer(self.text, a, b)), b]
            for low, high in itertools.pairwise(cuts):
                piece = self.text[low:high]
                start, end = low + len(piece) - len(piece.lstrip()), high - len(piece) + len(piece.rstrip())
                if start < end and has_words(self.text[start:end]):
                    out.append((start, end))
        return out


def stitch(pieces: Sequence[tuple[int, Kept]]) -> Stitched:
    """Pieces of pages `(page, what a reader reads of it)` in reading order as one text; an empty
    piece (a page that is all furniture) is skipped."""
    text = ""
    placed: list[tuple[int, int, Kept]] = []
    for page, kept in pieces:
        if not kept.text:
            continue
        if text:
            text += _page_break(text, kept.text)
        placed.append((len(text), page, kept))
        text += kept.text
    return Stitched(text, tuple(placed))


def _page_break(before: str, after: str) -> str:
    """How a page break between two pieces reads: nothing inside a hyphenated word (its hyphen kept,
    as `format.reading` joins a line break), a line break after a sentence, a heading or before a
    block, else a space (the sentence goes on)."""
    last = before.rsplit("\n", 1)[-1]
    first = after.split("\n", 1)[0]
    if len(last) > 1 and last.endswith("-") and last[-2].isalpha() and first[:1].islower():
        return ""
    if last.rstrip()[-1:] in _ENDS or BLOCK_LINE.match(first) or is_title(last, first):
        return "\n"
    return " "


def sentence_key(text: str) -> str:
    """What two sentences must share to be the same: their characters without case, whitespace,
    soft hyphens, or the difference between straight and curly quotes and between dashes."""
    return "".join(text.translate(_FORMS).casefold().split())


def has_words(text: str) -> bool:
    return any(ch.isalpha() for ch in text)


def _words(text: str) -> list[str]:
    return text.translate(_FORMS).casefold().split()


@dataclass(frozen=True)
class Alignment:
    """Old and new sentences aligned: indexes of the removed (old) and added (new), changed pairs
    `(old, new, similarity)` in the new text's order, and counts of the unchanged and the moved."""

    removed: list[int]
    added: list[int]
    changed: list[tuple[int, int, float]]
    unchanged: int
    moved: int
    #: Some removed and added sentences were too many to weigh as changes (`MAX_PAIRS`).
    unpaired: bool = False


def align(old: Sequence[str], new: Sequence[str], open_end: bool = False) -> Alignment:
    """Align two texts' sentences (see the module). With `open_end` (a text was cut short), what
    follows the last sentence both share is left out: the rest of either may be in the other's
    uncompared part (where they share none, nothing is left out). Cost: difflib over the sentence
    keys, then at most `MAX_PAIRS` word-level ratios."""
    old_keys, new_keys = [sentence_key(s) for s in old], [sentence_key(s) for s in new]
    matcher = difflib.SequenceMatcher(None, old_keys, new_keys, autojunk=False)
    opcodes = matcher.get_opcodes()
    if open_end and any(op[0] == "equal" for op in opcodes):
        while opcodes[-1][0] != "equal":
            opcodes.pop()
    unchanged = sum(i2 - i1 for tag, i1, i2, _j1, _j2 in opcodes if tag == "equal")
    hunks = [(range(i1, i2), range(j1, j2)) for tag, i1, i2, j1, j2 in opcodes if tag != "equal"]
    # A sentence on both sides out of order: moved, not removed and added.
    waiting: dict[str, list[int]] = {}
    for _olds, news in hunks:
        for j in news:
            waiting.setdefault(new_keys[j], []).append(j)
    moved_old, moved_new = set(), set()
    for olds, _news in hunks:
        for i in olds:
            found = waiting.get(old_keys[i])
            if found:
                moved_old.add(i)
                moved_new.add(found.pop(0))
    local = [([i for i in a if i not in moved_old], [j for j in b if j not in moved_new]) for a, b in hunks]
    pairs, unpaired = _pairs(local, [_words(s) for s in old], [_words(s) for s in new])
    paired_old, paired_new = {i for i, _j, _r in pairs}, {j for _i, j, _r in pairs}
    return Alignment(
        [i for olds, _news in local for i in olds if i not in paired_old],
        [j for _olds, news in local for j in news if j not in paired_new],
        sorted(pairs, key=lambda p: p[1]),
        unchanged,
        len(moved_old),
        unpaired,
    )


def _pairs(
    hunks: Sequence[tuple[Sequence[int], Sequence[int]]],
    old: Sequence[list[str]],
    new: Sequence[list[str]],
) -> tuple[list[tuple[int, int, float]], bool]:
    """The changed pairs: in each hunk (removed and added sentences between the same two unchanged
    ones), the pairs whose words are at least `CHANGED_AT` alike, the most alike first, each sentence
    in one pair at most; and whether `MAX_PAIRS` left some hunk unweighed."""
    budget = MAX_PAIRS
    out: list[tuple[int, int, float]] = []
    unpaired = False
    for olds, news in hunks:
        if len(olds) * len(news) > budget:
            unpaired = unpaired or bool(olds and news)
            continue
        budget -= len(olds) * len(news)
        weighed: list[tuple[float, int, int]] = []
        for i in olds:
            for j in news:
                a, b = old[i], new[j]
                if not a or not b or 2 * min(len(a), len(b)) < CHANGED_AT * (len(a) + len(b)):
                    continue  # even all the shorter one's words in common would be too few
                matcher = difflib.SequenceMatcher(None, a, b, autojunk=False)
                if matcher.quick_ratio() >= CHANGED_AT and (ratio := matcher.ratio()) >= CHANGED_AT:
                    weighed.append((ratio, i, j))
        taken_old: set[int] = set()
        taken_new: set[int] = set()
        for ratio, i, j in sorted(weighed, key=lambda w: (-w[0], w[1], w[2])):
            if i not in taken_old and j not in taken_new:
                taken_old.add(i)
                taken_new.add(j)
                out.append((i, j, ratio))
    return out, unpaired


def word_edits(old: str, new: str) -> list[tuple[str, str]]:
    """Where two sentences differ, word by word: `(old words, new words)` for each edit (either may
    be empty), in order; spacing, case and quote forms are not edits."""
    a, b = old.split(), new.split()
    matcher = difflib.SequenceMatcher(None, _words(old), _words(new), autojunk=False)
    return [
        (" ".join(a[i1:i2]), " ".join(b[j1:j2]))
        for tag, i1, i2, j1, j2 in matcher.get_opcodes()
        if tag != "equal"
    ]
