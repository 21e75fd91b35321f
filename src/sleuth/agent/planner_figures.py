"""How the offline planner states a figure it read from a table cell: the cell as its row, period and
printed figure say it, its unit, and the amount in words when the unit scales it (spec/runtime.md §10).
"""

from __future__ import annotations

import re
from typing import Any

from sleuth.format.figures import cell_caption

#: What a table's unit (`_cells.unit`) multiplies its figures by; the planner's arithmetic scales by it too.
UNIT_SCALES = {"thousands": 1e3, "millions": 1e6, "billions": 1e9}
#: Rows a table's `(in millions)` does not scale: per-share amounts, share and head counts, ratios.
_UNSCALED = re.compile(r"\bper\b|\bshares?\b|\bemployees?\b|\bheadcount\b|\bratio\b|\bdays?\b|%", re.I)


def stated(entry: Any) -> tuple[str, str] | None:
    """(evidence label, sentence) of a plan's cell entry: `[ref, label, header, text, unit, path,
    page, value, section]`, as `StepCode._figure_lines` prints it."""
    if not (isinstance(entry, list) and len(entry) >= 7 and all(isinstance(v, str) for v in entry[:4])):
        return None
    ref, label, header, text, unit, path, page = entry[:7]
    value = entry[7] if len(entry) > 7 and isinstance(entry[7], int | float) else None
    section = entry[8] if len(entry) > 8 and isinstance(entry[8], str) else None
    sentence = figure_sentence(label, header, text, unit if isinstance(unit, str) else None, value, section)
    where = f"According to {path} (p. {page}), " if isinstance(path, str) else ""
    return ref, f"{where}{sentence} [{ref}]."


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
