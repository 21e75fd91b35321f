"""The lines of a page's text as the table finder reads them (issue 25, item 2; issue 43, item 1):
each line's label and the figures that end it, a heading broken a word a line joined again, the
unit a line states, the caption above a table. `layout_tables` finds tables in them by their text,
`layout_grid` by where their words stand.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Collection, Iterator, Mapping
from dataclasses import dataclass

from sleuth.compile.parse.table_grid import ENTITY, Box
from sleuth.format.dates import MONTH_NAMES
from sleuth.format.furniture import line_key

#: A figure: an optional currency sign, a number with thousands separators or decimals, parentheses
#: for a negative, an optional percent sign; or a dash standing for nil.
FIGURE = re.compile(r"^\(?[-−+]?[$€£¥]?\(?(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?%?\)?%?$|^[—–-]{1,2}$")
CURRENCY = frozenset("$€£¥")
TOKEN = re.compile(r"\S+")
YEAR = re.compile(r"(?<![\d,.$])(?:19[5-9]\d|20\d\d)(?![\d,.%])")
MONTH = rf"(?:{MONTH_NAMES})\.?"
MONTH_START = re.compile(rf"{MONTH}(?:\s|$)", re.IGNORECASE)
#: A period group heading several columns: `Three Months Ended`, `Years ended`, `52 weeks ended`.
GROUP = re.compile(
    r"\b(?:(?:three|six|nine|twelve|\d{1,2})\s+months|(?:\d{1,2}\s+)?weeks|years?|quarters?|fiscal)\b"
    r"[^|]{0,60}?\bended\b|\bended\b",
    re.IGNORECASE,
)
UNIT = re.compile(r"\b(thousand|million|billion)s?\b", re.IGNORECASE)
#: Lines above a table read for its headers.
HEADER_LINES = 6
#: Lines above a line ending in figures whose words' boxes are read (`wanted_lines`), and lines after
#: the page's last such line (a text layer may give a table's header after its rows).
WANTED_ABOVE = 14
WANTED_AFTER = 8
MIN_ROWS = 3
MAX_LABEL = 160
_LEAD_IN_WORDS = 5


@dataclass(frozen=True)
class Line:
    start: int
    end: int
    text: str
    label: tuple[int, int] | None  # the label's span, when the line has text before its figures
    figures: tuple[tuple[int, int], ...]  # each figure's span, currency sign included
    boxes: tuple[Box, ...] | None = None  # each word's box on the page, where the parser read them

    @property
    def is_years(self) -> bool:
        """A header line of periods: every figure a bare year (`(Millions) 2018 2017 2016`)."""
        return len(self.figures) >= 1 and all(YEAR.fullmatch(self.text_of(f)) for f in self.figures)

    def text_of(self, span: tuple[int, int]) -> str:
        return self.text[span[0] - self.start : span[1] - self.start]


def wanted_lines(text: str) -> list[int]:
    """The lines whose words' boxes `find_tables` reads: each line that ends in a figure, and the
    lines above it where its table's header and title stand; none on a page with fewer such lines
    than a table has rows."""
    ending = [index for index, raw in enumerate(text.split("\n")) if _ends_in_figure(raw.split())]
    if len(ending) < MIN_ROWS:
        return []
    wanted: set[int] = set(range(ending[-1] + 1, ending[-1] + 1 + WANTED_AFTER))
    for index in ending:
        wanted.update(range(max(0, index - WANTED_ABOVE), index + 1))
    return sorted(i for i in wanted if i < text.count("\n") + 1)


def _ends_in_figure(words: list[str]) -> bool:
    if len(words) > 1 and words[-1] in {"%", ")"}:  # `12.5 %`, `(22,245 )`
        return FIGURE.match(words[-2] + words[-1].replace("%", "")) is not None
    return bool(words) and FIGURE.match(words[-1]) is not None


def read_lines(text: str, boxes: Mapping[int, tuple[Box, ...]]) -> list[Line]:
    """The page's lines; a run of text lines of one or two words each (a layout that breaks a
    heading or label a word a line: `Property` / `and` / `equipment,`) is read as one line, of at
    most about a label's length."""
    out: list[Line] = []
    offset = 0
    in_run = False  # whether the last line read is a run of word lines
    parts = (
        part for index, raw in enumerate(text.split("\n")) for part in _printed_lines(raw, boxes.get(index))
    )
    for raw, boxed in parts:
        if raw is None:
            offset += 1  # the line break
            continue
        line = parse_line(raw, offset, boxed)
        offset += len(raw)
        if _is_word_line(line):
            if in_run and not _starts_element(line.text) and len(out[-1].text) < MAX_LABEL:
                out[-1] = joined(out[-1], line)
                continue
            in_run = True
        else:
            in_run = False
        out.append(line)
    return out


def _printed_lines(
    raw: str, boxes: tuple[Box, ...] | None
) -> Iterator[tuple[str, tuple[Box, ...] | None] | tuple[None, None]]:
    """A text line as the lines it prints on: a text layer may give two rows of a table as one line
    (`Loss on early retirement of debt 126,462 198,151 3,619 Provision for credit losses 71,422 …`),
    the second starting back left and below the first. Then the line break after it, as None."""
    cuts = [0]
    tokens = list(TOKEN.finditer(raw))
    if boxes is not None and len(boxes) == len(tokens):
        for k in range(1, len(tokens)):
            before, box = boxes[k - 1], boxes[k]
            if box.left < before.left and box.top < before.bottom + 0.5 * (before.top - before.bottom):
                cuts.append(k)
    ends = [*cuts[1:], len(tokens)]
    for first, last in zip(cuts, ends, strict=True):
        start = 0 if first == 0 else tokens[first].start()
        end = len(raw) if last == len(tokens) else tokens[last].start()
        yield raw[start:end], boxes[first:last] if boxes is not None else None
    yield None, None


def _starts_element(text: str) -> bool:
    """A word line that begins something else than the run above it: a unit in parentheses, a date."""
    stripped = text.strip()
    return stripped.startswith("(") or MONTH_START.match(stripped) is not None


def _is_word_line(line: Line) -> bool:
    return not line.figures and line.label is not None and len(line.text.split()) <= 2


def joined(first: Line, second: Line) -> Line:
    """Two text lines read as one: the text is their words, the label spans both in the page."""
    assert first.label is not None and second.label is not None
    boxes = None if first.boxes is None or second.boxes is None else first.boxes + second.boxes
    return Line(
        first.start,
        second.end,
        f"{first.text.strip()} {second.text.strip()}",
        (first.label[0], second.label[1]),
        (),
        boxes,
    )


def parse_line(raw: str, offset: int, boxes: tuple[Box, ...] | None = None) -> Line:
    tokens = [(m.start() + offset, m.end() + offset, m.group()) for m in TOKEN.finditer(raw)]
    figures: list[tuple[int, int]] = []
    k = len(tokens)
    while k > 0:
        start, end, token = tokens[k - 1]
        if token in {"%"} and k >= 2 and FIGURE.match(tokens[k - 2][2]):
            k -= 1  # `12.5 %`: the sign belongs to the figure before it
            start, end = tokens[k - 1][0], end
            token = tokens[k - 1][2]
        elif token == ")" and k >= 2 and FIGURE.match(tokens[k - 2][2] + token):
            k -= 1  # `(22,245 )`: a bracket set apart closes the figure before it
            start, end = tokens[k - 1][0], end
            token = tokens[k - 1][2] + ")"
        if not FIGURE.match(token) or token.count("(") != token.count(")"):
            break  # `11)` closes a parenthesis the label opened: `(Note 11)`
        if k >= 2 and tokens[k - 2][2] in CURRENCY:
            k -= 1
            start = tokens[k - 1][0]  # `$ 5,363`: the sign is part of the cell
        figures.append((start, end))
        k -= 1
    figures.reverse()
    label = None
    if k > 0:
        label = (tokens[0][0], tokens[k - 1][1])
    return Line(offset, offset + len(raw), raw, label, tuple(figures), boxes)


def is_page_numbers(block: list[Line]) -> bool:
    """Rows whose one figure is a small whole number that never decreases: page numbers."""
    numbers: list[int] = []
    for line in block:
        if len(line.figures) == 1:
            text = line.text_of(line.figures[0])
            if not text.isdigit() or int(text) > 2000:
                return False
            numbers.append(int(text))
    return len(numbers) >= MIN_ROWS and all(a <= b for a, b in itertools.pairwise(numbers))


def is_prose(text: str) -> bool:
    """A sentence, not a label: long, or closed by a full stop after several words."""
    stripped = text.strip()
    return len(stripped) > MAX_LABEL or (len(stripped.split()) >= 8 and ". " in f"{stripped} ")


def continues(text: str) -> bool:
    """A line that goes on with the label above it: it starts in lower case (`provided by …`)."""
    stripped = text.lstrip()
    return bool(stripped) and stripped[0].islower()


def unit_of(line: Line) -> str | None:
    if len(line.text) > MAX_LABEL:
        return None  # a sentence that mentions millions states no table's unit
    match = UNIT.search(line.text)
    return match.group(1).lower() + "s" if match else None


def units_of(lines: list[Line]) -> list[str | None]:
    """For each line, the unit the nearest line above it states: one pass, whatever the tables."""
    out: list[str | None] = []
    current: str | None = None
    for line in lines:
        out.append(current)
        if not line.figures:  # `Weighted shares (in thousands) 512 498` is a row, not the page's unit
            current = unit_of(line) or current
    return out


def title_of(lines: list[Line], header_lines: list[Line], running: Collection[str] = ()) -> str | None:
    """The nearest short text line above the headers: the table's caption, when it has one; a
    lead-in sentence that ends in a colon (`The following table presents …:`) is one too. Page
    furniture (`Table of Contents`, a running header: `running` holds their `line_key`s) is not."""
    skip = {line.start for line in header_lines}
    entity: str | None = None  # `PepsiCo, Inc. and Subsidiaries` under the statement's name
    for line in reversed(lines):
        if len(line.text) > MAX_LABEL:
            return entity  # prose above the table: it has no caption
        text = " ".join(line.text.split())
        if line.start in skip or line.figures or not text or is_furniture(text, running):
            continue
        if text.endswith(":") and len(text.split()) >= _LEAD_IN_WORDS and text[0].isupper():
            return entity or text
        if GROUP.search(text) or UNIT.search(text):
            continue
        if text.startswith("(") or MONTH_START.match(text):
            continue  # `(Unaudited)`, a date: not what the table is
        if is_prose(text) or len(text) > 100 or text[0].islower() or text.endswith((".", ",", ";")):
            return entity  # prose above the table: it has no caption
        if entity is None and ENTITY.search(text):
            entity = text
            continue
        return text
    return entity


def is_furniture(text: str, running: Collection[str]) -> bool:
    """`Table of Contents`, or a running header or footer of the document."""
    return text.casefold() == "table of contents" or line_key(text) in running
