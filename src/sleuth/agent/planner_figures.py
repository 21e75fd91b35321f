"""How the offline planner states a figure it read from a table cell: the cell as its row, period and
printed figure say it, its unit, and the amount in words when the unit scales it (spec/runtime.md §10).
"""

from __future__ import annotations

import re
from typing import Any

from sleuth.format.figures import cell_caption
from sleuth.format.periods import period_length

#: What a table's unit (`_cells.unit`) multiplies its figures by; the planner's arithmetic scales by it too.
UNIT_SCALES = {"thousands": 1e3, "millions": 1e6, "billions": 1e9}
#: Rows a table's `(in millions)` does not scale: per-share amounts, share and head counts, ratios.
_UNSCALED = re.compile(r"\bper\b|\bshares?\b|\bemployees?\b|\bheadcount\b|\bratio\b|\bdays?\b|%", re.I)


def stated(entry: Any) -> tuple[str, str] | None:
    """(evidence label, sentence) of a plan's cell entry: `[ref, label, header, text, unit, path,
    page, value, section]`, as `StepCode._figure_lines` prints it."""
    said = _said(entry)
    if said is None:
        return None
    path, page = entry[5], entry[6]
    where = f"According to {path} (p. {page}), " if isinstance(path, str) else ""
    return said[0], f"{where}{said[1]}"


def _said(entry: Any) -> tuple[str, str] | None:
    """(evidence label, the cell's sentence and its citation) of a plan's cell entry."""
    if not (isinstance(entry, list) and len(entry) >= 7 and all(isinstance(v, str) for v in entry[:4])):
        return None
    ref, label, header, text, unit = entry[:5]
    value = entry[7] if len(entry) > 7 and isinstance(entry[7], int | float) else None
    section = entry[8] if len(entry) > 8 and isinstance(entry[8], str) else None
    sentence = figure_sentence(label, header, text, unit if isinstance(unit, str) else None, value, section)
    return ref, f"{sentence} [{ref}]."


def figure_sentence(
    label: str, header: str, text: str, unit: str | None, value: float | None, section: str | None = None
) -> str:
    """`Revenues, year ended Dec 31, 2015: $6,779,511 thousand ($6.78 billion)`: the cell as its row,
    period and printed figure say it (`format.figures`), its unit, and the amount in words when the unit
    scales it past a million. A figure in parentheses is an outflow or a deduction: its amount in words
    says so rather than carrying a minus sign a person did not read."""
    said = cell_caption(label, section, header, text)
    if unit not in UNIT_SCALES or text.rstrip().endswith("%") or _UNSCALED.search(f"{section or ''} {label}"):
        return said
    stated = f"{said} {unit.removesuffix('s')}"
    amount = (value or 0.0) * UNIT_SCALES[unit]
    word, scale = ("billion", 1e9) if abs(amount) >= 1e9 else ("million", 1e6)
    if value is None or abs(amount) < 1e6 or scale <= UNIT_SCALES[unit]:
        return stated  # `6.9 million` says it already
    currency = next((c for c in "$€£¥" if c in text), "")
    words = f"{currency}{abs(amount) / scale:,.2f} {word}"
    if amount < 0 and "(" in text:
        return f"{stated} ({words}, in parentheses: an outflow or a deduction)"
    return f"{stated} ({'-' if amount < 0 else ''}{words})"


BY_START = "names its fiscal years by the calendar year they begin in"


def fiscal_naming(entry: list[Any], issuer: str, also: list[Any] | None) -> str:
    """What to say after a year's figure from a document whose company names a fiscal year by the
    calendar year it begins in (issue 45, item 1): that the company calls the year by the one before,
    and `also` — the cell of the company's own fiscal year of the asked number, a year later — so
    neither reading is left to guess. No year is written out: the cited cells' headers say them. ""
    for a column that is not a year's."""
    if period_length(str(entry[2]))[0] != 12:
        return ""
    said = f" {issuer} {BY_START}, so it calls this year"
    own = _said(also)
    if own is None:
        return said + " by the year before."
    return said + f" by the year before; its own fiscal year of the asked number: {own[1]}"


def own_fiscal_year(entry: list[Any], issuer: str) -> str | None:
    """A year's figure read by the company's own name for the asked fiscal year, where no column ends
    in the asked year (Ulta's fiscal 2021 ended in January 2022)."""
    said = stated(entry)
    if said is None or period_length(str(entry[2]))[0] != 12:
        return None
    return f"{said[1]} {issuer} {BY_START}, so this is the year it calls by the asked number."
