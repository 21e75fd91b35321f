"""What a figure question asks for (`FigureAsk`), and how the offline planner states a figure it read
from a table cell: the cell as its row, period and printed figure say it, its unit, and the amount in
words when the unit scales it (spec/runtime.md §10).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from sleuth.format.figures import cell_caption
from sleuth.format.periods import period_length

#: What a row's label adds after its quantity to say what was netted from it: `Capital expenditures, net
#: of construction payable` is capital expenditures.
NET_OF = re.compile(r",?\s+net\s+of\b.*$", re.IGNORECASE)
#: What a label says its quantity is of: `Depreciation and amortization of property, equipment and
#: intangibles` is depreciation and amortization where its head names two words or more (`Cost of sales`
#: is no cost).
OF_WHAT = re.compile(r"\s+of\s+.*$", re.IGNORECASE)
#: A financial statement's title (`Consolidated Statement of Income`, `Balance Sheets`): a computation's
#: operand is read there before a note's table of the same row (3M's stock-based compensation by line).
STATEMENT = re.compile(r"\bstatements?\s+of\b|\bbalance\s+sheets?\b", re.IGNORECASE)
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


@dataclass(frozen=True)
class FigureAsk:
    """What a figure question asks for (`extractive.asked_quantity`, `asked_year`) and the contexts
    whose tables can answer it."""

    quantity: tuple[str, ...]
    contexts: tuple[str, ...]
    #: The question asks for a computed quantity: only a row labelled with exactly its words answers.
    exact: bool = False
    #: The question's content words (stemmed) and the years it names: the rows it names are read too.
    words: tuple[str, ...] = ()
    years: tuple[int, ...] = ()
    #: The statements or tables the question points at (`extractive.named_tables`): a cell of a table
    #: whose title holds one of them ranks above the same row elsewhere.
    tables: tuple[tuple[str, ...], ...] = ()
    #: How long a period the question asks for (`asked_months`): a cell of a column as long answers it,
    #: or one whose length its table does not say; a quarter's column never answers a year's question.
    months: int | None = None
    #: The quarter it names (`second quarter`, `Q2`): a column that names another quarter is not it.
    quarter: int | None = None
    #: It asks how the quantity moved ("over time", "each year") and names no years: every column's
    #: figure is read, not only the latest (`planner_periods.per_period` lines them up).
    trend: bool = False
    #: Documents whose company names a fiscal year by the year it begins: their own fiscal Y (the
    #: period ending in Y + 1) is read beside the period that ends in the asked year.
    named_by_start: tuple[str, ...] = ()
    #: Other names statements give the quantity (`formulas.other_names`), each as its words: a row
    #: labelled so answers as well, after a row of the question's own words.
    others: tuple[tuple[str, ...], ...] = ()
    #: A computation's operand words (its quantity, the rows it implies, their other names): the rows
    #: they name are looked up first and rank above rows named only by the question's other words
    #: ("the statement of income" names `Net income`; "capex as a % of revenue" does not).
    operands: tuple[str, ...] = ()

    @property
    def year(self) -> int | None:
        """The one year the question names; None for none or several (`extractive.asked_year`)."""
        return self.years[0] if len(self.years) == 1 else None
