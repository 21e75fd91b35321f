"""A document's period as readers name it (issue 43): its fiscal year and quarter, counted from the
company's fiscal year end, and the calendar quarter beside them. A 10-Q for July-September 2022 of a
company whose fiscal year ends in June is fiscal Q1 FY2023 and calendar Q3 2022; people say either.

The arithmetic is here, once, for the compiler that labels documents (`compile.identity`,
`compile.fiscal`) and the reader that resolves a question's "fiscal Q1 2023" or "the September 2022
quarter" (`store.version.documents`).
"""

from __future__ import annotations

import datetime
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

MONTH_LABELS = (
    "January",
    "February",
    "March",
    "April",
    "May",
    "June",
    "July",
    "August",
    "September",
    "October",
    "November",
    "December",
)
#: A period that ends in a month's first week ends the month before, on a 52/53-week calendar: the
#: quarter "ended July 1, 2023" is April-June, the year "ended January 2, 2021" is 2020.
FIRST_WEEK = 7


def month_ended(end: datetime.date) -> tuple[int, int]:
    """(year, month) a period that ends on `end` closes: the month before for a first-week end."""
    if end.day > FIRST_WEEK:
        return end.year, end.month
    return (end.year, end.month - 1) if end.month > 1 else (end.year - 1, 12)


def months_between(start: datetime.date, end: datetime.date) -> int:
    """The whole months a period from `start` to `end` spans, rounded: 3 for a quarter of 13 weeks."""
    return max(1, round((end - start).days / 30.44))


@dataclass(frozen=True)
class FiscalPeriod:
    """Where a period falls: in its fiscal year (named by the calendar year it ends in, as most
    companies and readers name it) and, for a quarter, its fiscal quarter; and the calendar quarter
    it is, where it is one."""

    fiscal_year: int
    fiscal_quarter: int | None  # the quarter it covers, or that a six or nine months' period ends with
    calendar_year: int | None
    calendar_quarter: int | None
    months: int = 3

    @property
    def fiscal_label(self) -> str:
        """`Q1 FY2023`; `H1 FY2023` and `9M FY2023` for six and nine months to a quarter's end;
        `FY2023` for a year."""
        year = f"FY{self.fiscal_year}"
        if not self.fiscal_quarter:
            return year
        if self.months == 6 and self.fiscal_quarter in (2, 4):
            return f"H{self.fiscal_quarter // 2} {year}"
        if self.months == 9 and self.fiscal_quarter == 3:
            return f"9M {year}"
        return f"Q{self.fiscal_quarter} {year}"

    @property
    def calendar_label(self) -> str | None:
        """`Q3 2022`, or `2023` for a calendar year; None when the period is neither."""
        if self.calendar_year is None:
            return None
        return (
            f"Q{self.calendar_quarter} {self.calendar_year}"
            if self.calendar_quarter
            else str(self.calendar_year)
        )


def fiscal_period(end: datetime.date, months: int, year_end_month: int) -> FiscalPeriod | None:
    """The fiscal year and quarter of a period of `months` months ending on `end`, for a fiscal year
    that ends in `year_end_month`; None when the period does not fit that calendar (a quarter that
    ends two months into a fiscal quarter: the year end is wrong, so no label is better than one)."""
    year, month = month_ended(end)
    into = (month - year_end_month) % 12  # months of the fiscal year gone at the period's end
    fiscal_year = fiscal_year_of(end, year_end_month)
    if months >= 12:
        if into != 0:
            return None
        calendar = year if year_end_month == 12 else None
        return FiscalPeriod(fiscal_year, None, calendar, None, 12)
    if into % 3 != 0:
        return None
    quarter = (into // 3) or 4
    calendar_quarter = month // 3 if months == 3 and month % 3 == 0 else None
    return FiscalPeriod(fiscal_year, quarter, year if calendar_quarter else None, calendar_quarter, months)


def fiscal_year_of(end: datetime.date, year_end_month: int) -> int:
    """The calendar year the fiscal year holding `end` ends in: how most companies name it."""
    year, month = month_ended(end)
    return year if month <= year_end_month else year + 1


def year_end_month_of(end: datetime.date, fiscal_quarter: int) -> int:
    """The month a fiscal year ends in, from a quarter's end and which fiscal quarter it is."""
    _year, month = month_ended(end)
    return (month + 3 * (4 - fiscal_quarter) - 1) % 12 + 1


def year_end_label(month: int | None) -> str | None:
    return None if month is None else MONTH_LABELS[month - 1]


# ---------------------------------------------------------------------------- as a question names it
_Q = r"(?:q(?P<q>[1-4])|(?P<qn>[1-4])q|(?P<ord>first|second|third|fourth|1st|2nd|3rd|4th)[\s-]+quarter)"
_KIND = r"(?P<kind>fiscal(?:\s+year)?|fy|calendar(?:\s+year)?|cy)"
_KIND2 = _KIND.replace("kind", "kind2")
_YEAR = r"(?P<year>(?:19|20)\d\d|'?\d\d)"
_MONTH = (
    r"(?P<month>jan(?:uary)?|feb(?:ruary)?|mar(?:ch)?|apr(?:il)?|may|june?|july?|aug(?:ust)?"
    r"|sept?(?:ember)?|oct(?:ober)?|nov(?:ember)?|dec(?:ember)?)"
)
_ORDINAL_NUMBERS = {"first": 1, "second": 2, "third": 3, "fourth": 4, "1st": 1, "2nd": 2, "3rd": 3, "4th": 4}
#: A quarter a question names: "fiscal Q1 2023", "Q1 FY23", "the first quarter of fiscal 2023", "FY2023
#: Q1", "Q3 2022", "3Q22", "2022Q3", "calendar Q3 2022"; or by the month it ends: "the September 2022
#: quarter", "the quarter ended September 30, 2022".
_NAMED_QUARTERS = tuple(
    re.compile(pattern, re.IGNORECASE)
    for pattern in (
        rf"\b(?:{_KIND}\s*)?{_Q}\s*(?:of\s+|in\s+)?(?:the\s+)?(?:{_KIND2}\s*)?{_YEAR}\b",
        rf"\b(?:{_KIND}\s*)?{_YEAR}\s*{_Q}",
        rf"\b{_MONTH}\.?\s+(?:\d{{1,2}},?\s+)?(?P<myear>(?:19|20)\d\d)\s+quarter\b",
        rf"\b(?:quarter|(?:three|3)\s+months)\s+(?:ended|ending)\s+{_MONTH}\.?\s+(?:\d{{1,2}},?\s+)?"
        r"(?P<myear>(?:19|20)\d\d)\b",
    )
)


@dataclass(frozen=True)
class NamedQuarter:
    """One quarter a question names, and the words that named it (`start`, `end` in its text)."""

    keys: frozenset[str]  # the `quarter_keys` of the documents it may mean
    start: int
    end: int


def named_quarters(text: str) -> list[NamedQuarter]:
    """The quarters `text` names. "fiscal …" or "FY…" names a fiscal quarter, "calendar …" a
    calendar one; a bare "Q3 2022" may be either, so it names both."""
    found: list[NamedQuarter] = []
    taken: list[tuple[int, int]] = []
    for pattern in _NAMED_QUARTERS:
        for m in pattern.finditer(text):
            if any(a < m.end() and m.start() < b for a, b in taken):
                continue
            keys = _keys_of(m)
            if keys:
                found.append(NamedQuarter(frozenset(keys), m.start(), m.end()))
                taken.append((m.start(), m.end()))
    return found


def _keys_of(m: re.Match[str]) -> set[str]:
    groups = m.groupdict()
    if groups.get("month"):
        month = _month_number(groups["month"])
        return {f"m{month}:{groups['myear']}"} if month else set()
    year_text = groups["year"].lstrip("'")
    if len(year_text) == 2:  # "FY23", "Q3'22", "3Q22": a two-digit year only beside what makes it one
        before = m.string[m.start() : m.start("year")].casefold()
        attached = re.search(r"(?:q[1-4]|[1-4]q)$", before) is not None
        if not (before.rstrip().endswith(("fy", "cy")) or groups["year"].startswith("'") or attached):
            return set()
        year = 2000 + int(year_text)
    else:
        year = int(year_text)
    if groups.get("q"):
        quarter = int(groups["q"])
    elif groups.get("qn"):
        quarter = int(groups["qn"])
    else:
        quarter = _ORDINAL_NUMBERS[groups["ord"].casefold()]
    kind = (groups.get("kind") or groups.get("kind2") or "").casefold()
    if kind.startswith(("fiscal", "fy")):
        return {f"f{quarter}:{year}"}
    if kind.startswith(("calendar", "cy")):
        return {f"c{quarter}:{year}"}
    return {f"f{quarter}:{year}", f"c{quarter}:{year}"}


def _month_number(name: str) -> int | None:
    key = name.casefold()[:3]
    names = [label[:3].casefold() for label in MONTH_LABELS]
    return names.index(key) + 1 if key in names else None


_NAME_LABEL = re.compile(r"^Q(?P<q>[1-4]) (?P<year>(?:19|20)\d\d)$")


def quarter_keys(entry: Mapping[str, Any]) -> set[str]:
    """The keys by which a question may name a document's quarter (`named_quarters`): its fiscal
    quarter `f1:2023` (and as the company names it, where that differs), its calendar quarter
    `c3:2022`, the month its quarter ends `m9:2022`; a file name's "Q3 2022" with no fiscal year
    known may be either (`f3:2022` and `c3:2022`)."""
    keys: set[str] = set()
    fiscal_quarter, fiscal_year = entry.get("fiscal_quarter"), entry.get("fiscal_year")
    if isinstance(fiscal_quarter, int) and isinstance(fiscal_year, int):
        keys.add(f"f{fiscal_quarter}:{fiscal_year}")
        named = entry.get("fiscal_year_named")  # Ulta's "fourth quarter of fiscal 2022": its own name
        if isinstance(named, int):
            keys.add(f"f{fiscal_quarter}:{named}")
    calendar_quarter, calendar_year = entry.get("calendar_quarter"), entry.get("calendar_year")
    if isinstance(calendar_quarter, int) and isinstance(calendar_year, int):
        keys.add(f"c{calendar_quarter}:{calendar_year}")
    named = _NAME_LABEL.match(str(entry.get("period") or ""))
    if named and not isinstance(fiscal_year, int):
        keys |= {f"f{named.group('q')}:{named.group('year')}", f"c{named.group('q')}:{named.group('year')}"}
    start, end = _iso(entry.get("period_start")), _iso(entry.get("period_end"))
    if start and end and months_between(start, end) == 3:
        year, month = month_ended(end)
        keys.add(f"m{month}:{year}")
    return keys


def _iso(value: Any) -> datetime.date | None:
    try:
        return datetime.date.fromisoformat(value) if isinstance(value, str) and value else None
    except ValueError:
        return None


#: How long a period a column header or a question names: `Three Months Ended`, `13 weeks ended`,
#: `second quarter`, `Q1`, `QTD`, `Year Ended`, `Fiscal 2023`; a date alone (a balance sheet's) names none.
_LENGTH = re.compile(
    r"\b(?P<n>three|six|nine|twelve|3|6|9|12)\s+months\b"
    r"|\b(?P<weeks>12|13|16|24|26|36|39|40|52|53|thirteen|twenty-six|thirty-nine|fifty-two|fifty-three)"
    r"\s+weeks\b"
    r"|\b(?P<quarter>quarters?)\s+ended\b|\b(?P<nth>first|second|third|fourth)\s+quarter\b"
    r"|(?<![a-z])(?P<q>q[1-4](?!\d)|[1-4]q(?=\d\d\b|\b)|qtd\b)"
    r"|\b(?P<year>years?|fiscal)\b",
    re.IGNORECASE,
)
_MONTH_WORDS = {"three": 3, "six": 6, "nine": 9, "twelve": 12}
_WEEK_WORDS = {"thirteen": 13, "twenty-six": 26, "thirty-nine": 39, "fifty-two": 52, "fifty-three": 53}


def period_length(text: str) -> tuple[int | None, int | None]:
    """(months, weeks) of the period `text` names: the months 3, 6, 9 or 12, a 52/53-week calendar's
    weeks where it counts them (`12 Weeks Ended` is a quarter: the nearest whole quarters, so PepsiCo's
    12- and 16-week quarters are quarters and 36 weeks three of them); (None, None) where it names no
    length. The most specific length named wins: months or weeks counted, then a quarter, then a year
    (`Fiscal Year Ended January 31, 2020 Q1` is Walmart's first quarter, not its year). One reading
    for the compiler's table columns and the offline planner's questions."""
    found = min(_LENGTH.finditer(text), key=_specificity, default=None)
    if found is None:
        return None, None
    if found.group("n"):
        n = found.group("n").lower()
        return _MONTH_WORDS.get(n) or int(n), None
    if found.group("weeks"):
        raw = found.group("weeks").lower()
        weeks = int(_WEEK_WORDS.get(raw, raw))
        return 3 * max(1, round(weeks / 13)), weeks
    return (12 if found.group("year") else 3), None


#: The quarter a column header or a question names: `Q2`, `2Q23`, `second quarter`.
QUARTER_NAMED = re.compile(
    r"(?<![a-z])q([1-4])(?!\d)|\b([1-4])q(?=\d\d\b|\b)|\b(first|second|third|fourth)\s+quarter\b",
    re.IGNORECASE,
)
NTH_QUARTER = {"first": 1, "second": 2, "third": 3, "fourth": 4}


def named_quarter(text: str) -> int | None:
    """The quarter (1-4) `text` names, None where it names none or several."""
    named = {
        int(m.group(1) or m.group(2)) if m.group(3) is None else NTH_QUARTER[m.group(3).lower()]
        for m in QUARTER_NAMED.finditer(text)
    }
    return named.pop() if len(named) == 1 else None


def _specificity(found: re.Match[str]) -> int:
    """0: a length counted (months, weeks); 1: a quarter; 2: a year (`min` keeps the first of a rank)."""
    if found.group("n") or found.group("weeks"):
        return 0
    return 2 if found.group("year") else 1
