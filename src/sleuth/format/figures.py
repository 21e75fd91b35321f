"""A table cell said as a person reads it: its row, its column's period and the figure as printed.

`Earnings per share — Diluted, year ended Dec 31, 2018: $8.89`, not `$ 8.89` alone or `for Years ended
December 31 2018 was $ 8.89` (issue 39, item 5). One wording for the offline answer's sentence, the
citation's `cell` and so the CLI's and the console's citation lists.
"""

from __future__ import annotations

import re

from sleuth.format.text import collapsed

_MONTHS = ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec")
_DATE = re.compile(
    r"\b(Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec)[a-z]*\.?\s+(\d{1,2}),?\s+((?:19|20)\d\d)\b",
    re.IGNORECASE,
)
_SPAN = re.compile(r"\b((?:year|month|quarter|week|period)s?)\s+(ended|ending)\b", re.IGNORECASE)
_CURRENCY_GAP = re.compile(r"([$€£¥])\s+(?=[\d(])")
#: A column of the change between two periods (`% Change`, `Percent Change Operations`, `Increase
#: (decrease)`), not a period's own figures: the compiler gives it the period it compares, and a
#: question about a period's figure never takes it.
CHANGE_COLUMN = re.compile(r"\bchange\b|%|\bvariance\b|\b(?:increase|decrease)\b", re.IGNORECASE)


def period_phrase(header: str | None) -> str:
    """A column header as a period: `Years ended December 31 2018` → `year ended Dec 31, 2018`,
    `MAY 31 2019` → `May 31, 2019`; anything else as printed, on one line."""
    text = collapsed(header or "")

    def span(m: re.Match[str]) -> str:
        word = m.group(1).lower()
        if m.start() == 0 and word.endswith("s"):  # a column is one period: "Years ended Dec 31, 2018"
            word = word[:-1]
        return f"{word} {m.group(2).lower()}"

    text = _SPAN.sub(span, text)

    def date(m: re.Match[str]) -> str:
        month = _MONTHS[[name.lower() for name in _MONTHS].index(m.group(1)[:3].lower())]
        return f"{month} {int(m.group(2))}, {m.group(3)}"

    return _DATE.sub(date, text)


def printed_figure(text: str) -> str:
    """The cell as printed, less the typesetter's gap after a currency sign: `$ 8.89` → `$8.89`."""
    return _CURRENCY_GAP.sub(r"\1", collapsed(text))


def row_name(label: str, section: str | None = None) -> str:
    """The row's label, under its group where the label alone is not a name: a label of one word
    (`Diluted` under `Earnings per share` → `Earnings per share — Diluted`)."""
    label = collapsed(label)
    group = collapsed(section or "").rstrip(":")
    if group and group.lower() not in label.lower() and len(label.split()) == 1:
        return f"{group} — {label}"
    return label


def cell_caption(label: str, section: str | None, header: str | None, text: str) -> str:
    """`Revenue, 2025: 48.2`: the row, the period its column names (when it names one) and the cell."""
    period = period_phrase(header)
    row = row_name(label, section)
    return f"{row}, {period}: {printed_figure(text)}" if period else f"{row}: {printed_figure(text)}"
