"""A table read by where its words stand (issue 43, item 1): its columns and each column's header.

The page text gives a table's rows as lines but not which column a figure is in, nor which columns a
header phrase heads. The words' boxes (`parse.pdf_boxes`) say both: the figures of one column stand
one under another, so the columns are the runs of x over which figures overlap; a header phrase
heads the columns it stands over ("Three Months Ended" over two, "2023" over one), and stacked header
lines add up ("Three Months Ended" + "September 30," + "2023" head one column). A header line is
short phrases over the columns: a line that runs from the labels' side into the columns (a sentence,
a caption, a centred title) ends the header, so prose above a table never heads its columns.
"""

from __future__ import annotations

import itertools
import re
import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from typing import NamedTuple

#: Header lines read above a table's first row, at most, and the most space between two of them,
#: in lines' heights.
MAX_HEADER_ROWS = 8
MAX_HEADER_GAP = 2.5
#: Lines over the labels alone (not a unit's) passed over between the first row and the header
#: (`Assets` / `Current assets:`); one above a header line ends the header (a title).
LABEL_LINES_FIRST = 3
#: Words further apart than this share of their height are two phrases (a word space is about 0.25).
PHRASE_GAP = 0.6
#: A column is a run of figures in at least this many rows, and this share of the table's rows.
MIN_COLUMN_ROWS = 2
MIN_COLUMN_SHARE = 0.2
#: A header phrase that names a period for the columns under it: alone on its line, it heads them all.
_GROUP_WORDS = 6
_UNIT_NOTE = re.compile(r"\bin\s+(?:thousands|millions|billions)\b|\bexcept\s+per\s+share\b", re.IGNORECASE)
PERIOD_GROUP = re.compile(r"\b(?:ended|ending)\b|\bfiscal\s+(?:years?\b|(?:19|20)\d\d\b)", re.IGNORECASE)
_PERIOD_WORDS = 8
_CENTRED = 3.0  # points: runs of columns whose centres differ by less are as well centred
_WIDEN = 0.6  # of `reach`: how far off a wider run's centre a phrase may stand and still head it all
_MONTH_NAME = re.compile(
    r"\b(?:jan|feb|mar|apr|may|jun|jul|aug|sep|oct|nov|dec)[a-z]*\.?\s+\d{1,2}\b", re.IGNORECASE
)
_DATE = re.compile(
    r"\b(?:jan|feb|mar|apr|may|jun|jul|aug|sep|oct|nov|dec)[a-z]*\.?\s+\d{1,2},?\s+(?P<year>(?:19|20)\d\d)\b",
    re.IGNORECASE,
)
_YEAR = re.compile(r"(?<![\d,.$])(?:19|20)\d\d(?![\d,.%])")
#: A company's name: set under a statement's title (the caption is the line above it); beside the
#: title, above the header (`Parent Company` may head a column: a name of three words or more ends it).
ENTITY = re.compile(
    r"\b(?:inc|incorporated|corp|corporation|company|companies|co|ltd|plc|llc)\b\.?|\band\s+subsidiar(?:y|ies)\b",
    re.IGNORECASE,
)
#: A header phrase that names a period (and so may head columns of years and of their change alike).
_SPANS_PERIOD = re.compile(
    r"\b(?:ended|ending|quarters?|months|weeks|years?|fiscal|ytd|qtd)\b|\bQ[1-4]\b", re.IGNORECASE
)


class Box(NamedTuple):
    """A word's extent on the page, in PDF points (y grows upwards)."""

    left: float
    right: float
    bottom: float
    top: float

    @property
    def height(self) -> float:
        return max(self.top - self.bottom, 1.0)

    @property
    def center(self) -> float:
        return (self.left + self.right) / 2


@dataclass(frozen=True)
class Word:
    text: str
    box: Box
    line: int  # the index of the page-text line it is on


@dataclass(frozen=True)
class Phrase:
    text: str
    left: float
    right: float
    lines: frozenset[int]

    @property
    def center(self) -> float:
        return (self.left + self.right) / 2


@dataclass(frozen=True)
class Header:
    """Each column's header (its phrases top line first, joined), the phrases on the labels' side
    (`(In millions)`), and the page-text lines that gave a column's header."""

    columns: list[str]
    label_side: list[str]
    lines: frozenset[int]


def columns_of(figures: Sequence[Sequence[tuple[float, float]]]) -> list[tuple[float, float]]:
    """The columns of a table, left to right, from each row's figures' x-extents: figures that
    overlap are one column; a run in fewer than `MIN_COLUMN_ROWS` rows (and `MIN_COLUMN_SHARE` of
    them) is no column (a footnote's `(1)` beside a label)."""
    spans = sorted((left, right, row) for row, found in enumerate(figures) for left, right in found)
    runs: list[tuple[float, float, set[int]]] = []
    for left, right, row in spans:
        if runs and left <= runs[-1][1] + 1.0:
            run_left, run_right, rows = runs[-1]
            rows.add(row)
            runs[-1] = (run_left, max(run_right, right), rows)
        else:
            runs.append((left, right, {row}))
    least = max(MIN_COLUMN_ROWS, MIN_COLUMN_SHARE * sum(1 for found in figures if found))
    return [(left, right) for left, right, rows in runs if len(rows) >= least]


def column_of(left: float, right: float, columns: Sequence[tuple[float, float]]) -> int | None:
    """The column a figure stands in: the one it overlaps most, else None."""
    best, most = None, 0.0
    for index, (a, b) in enumerate(columns):
        overlap = min(right, b) - max(left, a)
        if overlap > most or (overlap >= 0 and best is None and right - left < 1.0):
            best, most = index, overlap
    return best


def read_header(
    words: Sequence[Word], columns: Sequence[tuple[float, float]], below: float, labels_right: float
) -> Header:
    """The header of a table whose columns are `columns`, whose first row's bottom is `below` and
    whose labels stand left of `labels_right`, from the words above it (in any order: a text layer
    may give a header cell's lines apart). Going up from the first row: a line of phrases that
    start right of the labels is a header line; one that starts among the labels and reaches into
    the columns (a sentence) ends the header; lines over the labels alone (a group's name, a unit)
    are passed over below the header (`LABEL_LINES_FIRST` at most), a unit's within it too."""
    rows = _visual_rows([w for w in words if w.box.bottom > below + 0.5 * w.box.height])
    gaps = [b[0] - a[1] for a, b in itertools.pairwise(columns)]
    gap = statistics.median(gaps) if gaps else 24.0
    reach = max(2.0, 0.5 * gap)  # a phrase this near a column may head it
    area_left = columns[0][0] - reach
    area_right = columns[-1][1] + 3 * reach
    picked: list[tuple[list[Phrase], list[Phrase]]] = []  # each header line: its phrases, the shared
    label_side: list[str] = []
    last_bottom = below
    label_lines = 0
    for row in rows[:MAX_HEADER_ROWS]:
        height = max(w.box.height for w in row)
        if row[0].box.bottom - last_bottom > MAX_HEADER_GAP * height + height:
            break  # a space between: what is above is not this table's
        phrases = _phrases(row)
        if any(ENTITY.search(p.text) and len(p.text.split()) >= 3 for p in phrases):
            break  # `Corning Incorporated and Subsidiary Companies` beside the title: above the header
        if len(phrases) == 1 and _names_period(phrases[0].text):
            picked.append(([], phrases))  # `For the Year Ended December 28, 2019` centred above all
            last_bottom, label_lines = row[0].box.bottom, 0
            continue
        if any(_crosses(p, columns, max(labels_right, area_left), reach) for p in phrases):
            break  # runs from the labels' side into the columns: a sentence or a title
        heads = [_heads(p, columns, labels_right, reach) for p in phrases]
        notes_only = all(_is_note(p.text) for p in phrases)  # `(Unaudited)  (Unaudited)`
        over = [p for p, h in zip(phrases, heads, strict=True) if h and not _is_note(p.text, notes_only)]
        if any(p.right > area_right for p in over):
            break
        side = [p for p, h in zip(phrases, heads, strict=True) if not h]
        label_side += [p.text for p in side]
        # `Years ended December 31` over the labels, the years over the columns: it heads them all
        shared = [p for p in side if _heads_all(p.text)]
        if len(over) == 1 and (PERIOD_GROUP.search(over[0].text) or _YEAR.search(over[0].text)):
            shared, over = [*shared, *over], []  # `Years ended …`, `December 31, 2018` alone on its line
        if not over and not shared and not all(_is_note(p.text) for p in phrases):
            label_lines += 1
            if picked or label_lines > LABEL_LINES_FIRST:
                break
        else:
            label_lines = 0
        last_bottom = row[0].box.bottom
        if over or shared:
            picked.append((over, shared))
    # from the table up: a phrase heads the columns whose header so far it stands over
    extents = list(columns)
    by_line: list[list[tuple[int, Phrase]]] = []
    lower: dict[int, Phrase] = {}  # the line below: each column's phrase
    spanning: list[list[tuple[int, Phrase]]] = []  # each line's phrases over several columns
    for over, _shared in picked:
        headed = [  # each column's header so far, from the lines below
            " ".join(p.text for line in by_line for i, p in line if i == column)
            for column in range(len(columns))
        ]
        found = _assigned(over, extents, reach, headed)
        held = dict(found)
        for index, phrase in list(found):  # `Change` over `2015 vs. 2014`: over both its columns
            found += [(i, phrase) for i, p in lower.items() if i not in held and p is lower.get(index)]
        lower = dict(found)
        for index, phrase in found:
            if sum(1 for i, p in found if p is phrase) == 1:
                extents[index] = (min(extents[index][0], phrase.left), max(extents[index][1], phrase.right))
        spanning.append([(i, p) for i, p in found if sum(1 for _i, q in found if q is p) > 1])
        by_line.append(found)
    _share_below(by_line, spanning)
    # what heads every column comes first, then each column's phrases, the top line first
    prefix = [(i, p) for _over, shared in reversed(picked) for p in shared for i in range(len(columns))]
    parts: list[list[str]] = [[] for _ in columns]
    lines: set[int] = set()
    for assigned in [prefix, *reversed(by_line)]:
        for index, phrase in sorted(assigned, key=lambda found: (found[0], found[1].left)):
            if not parts[index] or parts[index][-1] != phrase.text:
                parts[index].append(phrase.text)
            lines |= phrase.lines
    headers = _dated([" ".join(p) for p in parts], [*label_side, *(p.text for o, _s in picked for p in o)])
    return Header(headers, label_side, frozenset(lines))


def _share_below(by_line: list[list[tuple[int, Phrase]]], spanning: list[list[tuple[int, Phrase]]]) -> None:
    """Columns under one phrase (`January 28, 2023` over a figure's column and its percentage's) share
    the period a line below gives one of them only (`2023` over the figures); not a word (`Percent`
    over `to Sales`, not over `Amount`)."""
    for upper, phrases in enumerate(spanning):
        groups: dict[int, list[int]] = {}
        for index, phrase in phrases:
            groups.setdefault(id(phrase), []).append(index)
        for group in groups.values():
            for below in by_line[:upper]:
                held = {i: p for i, p in below if i in group}
                if len(held) == 1 and len(group) > 1 and _kind(next(iter(held.values())).text) == "period":
                    phrase = next(iter(held.values()))
                    below += [(i, phrase) for i in group if i not in held]


def _dated(headers: list[str], texts: Sequence[str]) -> list[str]:
    """The headers with the dates a line above lists one a column, in order (`Fiscal years ended
    December 31, 2022, December 25, 2021 and December 26, 2020` over `2022 2021 2020`), where each
    column's year, if it has one, is its date's."""
    for text in texts:
        dates = list(_DATE.finditer(text))
        if len(dates) != len(headers) or len(dates) < 2:
            continue
        years = [_YEAR.findall(h) for h in headers]
        if any(y and y[-1] != d.group("year") for y, d in zip(years, dates, strict=True)):
            continue
        if all(_DATE.search(h) for h in headers):
            return headers
        lead = text[: dates[0].start()].strip()
        lead = lead if PERIOD_GROUP.search(lead) else ""
        out = []
        for header, date in zip(headers, dates, strict=True):
            named = " ".join(f"{lead} {date.group()}".split())
            rest = header.removesuffix(date.group("year")).strip()
            out.append(" ".join(f"{named} {rest}".split()) if rest and not _DATE.search(rest) else named)
        return out
    return headers


def _heads(phrase: Phrase, columns: Sequence[tuple[float, float]], labels_right: float, reach: float) -> bool:
    """A phrase right of the labels that reaches a column's figures or is centred over a column (not
    `Ulta Beauty, Inc.` between the labels and the columns)."""
    if phrase.left < labels_right:
        return False
    return phrase.right >= columns[0][0] or _centred_over(phrase, columns, reach)


def _centred_over(phrase: Phrase, columns: Sequence[tuple[float, float]], reach: float) -> bool:
    """Centred over a column, or over a run of them (`Three months ended` over two)."""
    return any(
        abs(phrase.center - (columns[i][0] + columns[j][1]) / 2) <= reach
        for i in range(len(columns))
        for j in range(i, len(columns))
    )


def _crosses(
    phrase: Phrase, columns: Sequence[tuple[float, float]], labels_right: float, reach: float
) -> bool:
    """A phrase that starts among the labels, or left of the columns, and reaches into them (a
    sentence, a centred title), other than a header centred over a column or set flush with its
    right edge that overhangs to the left (`Years ended December 31,` over a narrow column)."""
    if phrase.left >= labels_right or phrase.right <= columns[0][0]:
        return False
    flush = any(abs(phrase.right - right) <= 2.0 for _left, right in columns)
    return not flush and not (phrase.left >= labels_right - reach and _centred_over(phrase, columns, reach))


def _visual_rows(words: Sequence[Word]) -> list[list[Word]]:
    """The words grouped into printed lines (a shared bottom), nearest the table (lowest) first,
    each line's words left to right."""
    rows: list[list[Word]] = []
    for word in sorted(words, key=lambda w: w.box.bottom):
        if rows and abs(word.box.bottom - rows[-1][0].box.bottom) <= 0.35 * word.box.height:
            rows[-1].append(word)
        else:
            rows.append([word])
    return [sorted(row, key=lambda w: w.box.left) for row in rows]


def _phrases(row: Sequence[Word]) -> list[Phrase]:
    out: list[Phrase] = []
    current: list[Word] = []
    for word in row:
        if current and word.box.left - current[-1].box.right > PHRASE_GAP * word.box.height:
            out.append(_phrase(current))
            current = []
        current.append(word)
    if current:
        out.append(_phrase(current))
    return out


def _phrase(words: Sequence[Word]) -> Phrase:
    text = " ".join(w.text for w in words).rstrip(",:")
    return Phrase(text, words[0].box.left, words[-1].box.right, frozenset(w.line for w in words))


def _is_note(text: str, among_notes: bool = True) -> bool:
    """`(Unaudited)`, `(In millions)`, a footnote's `(a)`, `$ in millions, except per share amounts`:
    said of the table, not of a column; but for a word in brackets on a line of column headers that
    are not (`Amount  to Sales  (Decrease)`: the last line of `Increase (Decrease)`)."""
    if _UNIT_NOTE.search(text):
        return True
    bracketed = text.startswith("(") and text.endswith(")") and not any(ch.isdigit() for ch in text)
    return bracketed and (among_notes or len(text) <= 4)


def _assigned(
    phrases: Sequence[Phrase], extents: Sequence[tuple[float, float]], reach: float, headed: Sequence[str]
) -> list[tuple[int, Phrase]]:
    """Each phrase of a header line with the columns it heads: those whose header below (`extents`:
    each column's figures and the phrases already over it) it stands over; else, set in the space
    between two columns, both (`Three Months Ended` centred over a pair); else the nearest column
    within `reach`; then as many more on both sides as it stays centred over (`_widened`). On a line
    of several phrases, a column none stands over takes the nearest within `reach`."""
    out: list[tuple[int, Phrase]] = []
    for phrase in phrases:
        touched = [i for i, (a, b) in enumerate(extents) if min(b, phrase.right) > max(a, phrase.left)]
        over = _centred_run(phrase, touched, extents)
        if not over:
            between = [
                i
                for i in range(len(extents) - 1)
                if extents[i][1] <= phrase.center <= extents[i + 1][0]
                and max(_distance(phrase, *extents[i]), _distance(phrase, *extents[i + 1])) <= reach
            ]
            over = [between[0], between[0] + 1] if between else []
        if not over:
            nearest = min(range(len(extents)), key=lambda i: _distance(phrase, *extents[i]))
            over = [nearest] if _distance(phrase, *extents[nearest]) <= reach else []
        out += [(i, phrase) for i in over]
    out = _widened(out, phrases, extents, reach, headed)
    if len(phrases) >= 2:  # a line of several phrases shares the columns out: the rest to the nearest
        for index, extent in enumerate(extents):
            if all(i != index for i, _p in out):
                closest = min(phrases, key=lambda p: _distance(p, *extent))
                if _distance(closest, *extent) <= reach:
                    out.append((index, closest))
    return out


def _widened(
    found: list[tuple[int, Phrase]],
    phrases: Sequence[Phrase],
    extents: Sequence[tuple[float, float]],
    reach: float,
    headed: Sequence[str],
) -> list[tuple[int, Phrase]]:
    """Each phrase over the wider runs of columns it is still centred over (within `_WIDEN` of `reach`:
    set to one side, `Three Months Ended` heads its pair alone), a column more on each side
    at a time, up to another phrase's columns: a header is set centred over what it heads, and is
    often narrower (`SECOND QUARTER` over five columns, `Percent Change` over three). A phrase that
    names no period widens only over headers of its own kind below (`Percent Change` over `Total
    Operations Currency`, not over the years beside them)."""
    owner = {i: p for i, p in found}
    out = list(found)
    for phrase in phrases:
        run = sorted(i for i, p in found if p is phrase)
        if not run or run[-1] - run[0] + 1 != len(run):
            continue
        kinds = None if _SPANS_PERIOD.search(phrase.text) else {_kind(headed[i]) for i in run}
        narrow = phrase.right - phrase.left <= extents[run[-1]][1] - extents[run[0]][0]
        if narrow and kinds == {"word"}:
            continue  # a word no wider than the words below it: a cell's upper line (`Percent` / `to Sales`)
        low, high = run[0], run[-1]
        while low > 0 and high < len(extents) - 1 and low - 1 not in owner and high + 1 not in owner:
            if abs((extents[low - 1][0] + extents[high + 1][1]) / 2 - phrase.center) > _WIDEN * reach:
                break
            if kinds is not None and not {_kind(headed[low - 1]), _kind(headed[high + 1])} <= kinds | {""}:
                break
            low, high = low - 1, high + 1
            owner[low] = owner[high] = phrase
            out += [(low, phrase), (high, phrase)]
    return out


def _kind(text: str) -> str:
    """What a column's header so far names: a period, something else, or nothing yet."""
    if not text:
        return ""
    return "period" if _YEAR.search(text) or _DATE.search(text) or _SPANS_PERIOD.search(text) else "word"


def _centred_run(phrase: Phrase, touched: list[int], extents: Sequence[tuple[float, float]]) -> list[int]:
    """Of the columns a phrase touches, the run of them it is centred over (a header is set centred
    over what it heads); of two runs about as well centred, the shorter (a wide date overhanging
    its neighbours heads its own column)."""
    best: list[int] = []
    best_off = 0.0
    for i, first in enumerate(touched):
        for last in touched[i:]:
            off = abs((extents[first][0] + extents[last][1]) / 2 - phrase.center)
            if not best or off < best_off - _CENTRED:
                best, best_off = list(range(first, last + 1)), off
    return best


def _heads_all(text: str) -> bool:
    """A phrase over the labels that heads every column: `Years ended December 31`, `Fiscal 2019`,
    a year or a date alone (`2016` above a segment table's rows for that year, `June 30, 2023`), a
    month and day beside the years (`December 31`)."""
    short = len(text.split()) <= _GROUP_WORDS
    alone = text.rstrip(":")
    return (
        (short and PERIOD_GROUP.search(text) is not None)
        or _YEAR.fullmatch(alone) is not None
        or _DATE.fullmatch(alone) is not None
        or _MONTH_NAME.fullmatch(alone) is not None
    )


def _names_period(text: str) -> bool:
    """A line that names the period of every column: `Year Ended December 31, 2018`, `December 31`
    over the years."""
    words = text.split()
    return (
        len(words) <= _PERIOD_WORDS
        and not text.endswith(":")
        and bool(
            PERIOD_GROUP.search(text)
            or (_YEAR.search(text) and _MONTH_NAME.search(text))
            or _MONTH_NAME.fullmatch(text)
        )
    )


def _distance(phrase: Phrase, left: float, right: float) -> float:
    return max(0.0, left - phrase.right, phrase.left - right)
