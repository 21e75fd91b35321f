"""What each document is (issue 11, 1): its issuer, its type and the period it covers.

People name documents by these ("Acme's Q3 2024 quarterly report", "the 2022 annual report", "the
travel policy"), so search can rank the named document first (`store.search.VersionReader
.resolve_documents`). Everything here is read from what any corpus has: the file name, the title, and
the first page's text. Nothing is guessed when nothing says so: a field is then None.
"""

from __future__ import annotations

import calendar
import datetime
import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, replace

from sleuth.compile import fiscal
from sleuth.compile.pages import Page
from sleuth.format.dates import MONTH_NAMES, MONTHS
from sleuth.format.identity import (
    DOC_TYPES,
    NAME_SPLIT,
    TOKEN,
    YEAR,
    DocumentIdentity,
    issuer_in_name,
    letters,
)
from sleuth.format.periods import FiscalPeriod, fiscal_period, month_ended, months_between

#: Bumped when the same pages give a different identity: carried-over sources are identified again.
#: 3: period dates, fiscal quarter, fiscal year off the calendar; 4: a registrant line's rule
#: (`______ AMAZON.COM, INC.`) is not part of the issuer's name.
#: 5: a cover names its type on a title-like line; a lowercase file name names no issuer; an
#: organisation's name does not run across a sentence's end.
#: 6: fiscal year and quarter from the company's fiscal year end, the calendar quarter beside them
#: (issue 43); a file name's quarter alone is no fiscal quarter.
IDENTITY_VERSION = 6
LEAD_CHARS = 4_000  # how much of the first pages is read: covers and front matter, not the body
COVER_CHARS = 600  # where a document says what it is; further in, "annual report" is a mention

_WEEKS = (
    r"(?:twelve|thirteen|fourteen|sixteen|twenty[\s-]four|twenty[\s-]six|thirty[\s-]six|thirty[\s-]nine"
    r"|forty|fifty[\s-]two|fifty[\s-]three|\d{1,2})[\s-]+weeks?(?:\s+period)?"
)
_PERIOD_END = re.compile(
    rf"\b(?P<span>fiscal year|year|quarter(?:ly period)?|period|(?:three|six|nine|twelve) months|{_WEEKS})"
    # "the quarter and year ended", "fifty-two-week period (“fiscal year”) ended"
    r"(?:\s+and\s+(?:full\s+|fiscal\s+)?year)?(?:\s*\([^)\n]{0,40}\))?"
    rf"\s+ended\s+(?P<month>{MONTH_NAMES})\.?\s+(?P<day>\d{{1,2}}),?\s+(?P<year>(?:19|20)\d\d)\b",
    re.IGNORECASE,
)
#: How a release may name its quarter: "June 2023 quarter", "the December 2022 quarter".
_MONTH_QUARTER = re.compile(
    rf"\b(?P<month>{MONTH_NAMES})\.?\s+(?P<year>(?:19|20)\d\d)\s+quarter\b", re.IGNORECASE
)
_QUARTER = re.compile(r"(?<![A-Za-z])(?:Q(?P<q1>[1-4])|(?P<q2>[1-4])Q)(?![0-9A-Za-z])", re.IGNORECASE)
_FY = re.compile(r"\bFY\s?'?((?:19|20)?\d\d)\b", re.IGNORECASE)
# A name's words may hold a dot inside (`AMAZON.COM`) but not end in one: "the Security Officer. Company
# cards are…" is two sentences, not an organisation.
_ORG_WORD = r"[A-Z](?:[\w&'-]|\.(?=[\w&'-]))*"
_ORG = re.compile(
    rf"\b((?:{_ORG_WORD}[ \t]){{0,4}}{_ORG_WORD},?[ \t](?:Inc|Incorporated|Corporation|Corp|Company|Co"
    r"|Ltd|Limited|LLC|L\.P|plc|PLC|N\.V|S\.A|AG|SE|GmbH|Group|Holdings|Bancorp|University|Institute)\b\.?)"
)
#: A rule or leader drawn with characters around a name on a cover page: `_____ AMAZON.COM, INC.`.
_RULE = re.compile(r"^[\s_\-–—=*.·]+|[\s_\-–—=*·]+$")
_REGISTRANT = re.compile(r"^(.{2,80})\n[^\n]*exact name of registrant", re.IGNORECASE | re.MULTILINE)
# Organisations a cover page names that are not who the document is by: exchanges, regulators, the
# filer-status checkboxes of a filing.
_NOT_AN_ISSUER = re.compile(
    r"exchange|commission|reporting company|growth company|filer|document|the company", re.IGNORECASE
)


def identify(source_path: str, title: str, pages: Sequence[Page]) -> DocumentIdentity:
    """The identity of one document from its file name, title and first pages."""
    name = source_path.rsplit("/", 1)[-1].rsplit(".", 1)[0]
    lead = ""
    for page in pages:
        lead += page.text + "\n"
        if len(lead) >= LEAD_CHARS:
            break
    lead = lead[:LEAD_CHARS]
    named = NAME_SPLIT.sub(" ", f"{name} {title}")  # `CEDAR_2022Q3_EARNINGS` → words
    doc_type = next((t for t, p in DOC_TYPES if p.search(named)), None) or _first_type(lead[:COVER_CHARS])
    ended, quarter = _stated_end(lead), _named_quarter(named)
    year, period = _period(named, ended, quarter, doc_type)
    issuer = _issuer(name, title, lead)
    span = _span(ended, quarter, doc_type)
    own = DocumentIdentity(
        issuer,
        doc_type,
        period,
        year,
        _aliases(issuer, lead),
        span.start.isoformat() if span else None,
        span.end.isoformat() if span else None,
    )
    if span is None:
        return with_year_end(own, None)
    text = ""
    for page in pages:
        text += page.text + "\n"
        if len(text) >= fiscal.TEXT_CHARS:
            break
    annual = span.months == 12 and not span.words.startswith("twelve")
    return with_year_end(own, fiscal.year_end(text, span.end, span.months, annual, quarter))


def with_year_end(identity: DocumentIdentity, found: fiscal.YearEnd | None) -> DocumentIdentity:
    """`identity` (what the document says of itself) with its fiscal and calendar labels for the fiscal
    year end `found` (its own, or one its issuer's other documents state): fiscal year and quarter,
    the calendar quarter, `period` the fiscal label. Without a year end, only the calendar label."""
    start, end = _date(identity.period_start), _date(identity.period_end)
    months = months_between(start, end) if start and end else None
    calendar = None
    if end is not None and months in (3, 12):
        _year, month = month_ended(end)
        calendar = fiscal_period(end, months, 12)  # the calendar year's own quarters
        if calendar is not None and months == 12 and month != 12:
            calendar = None
    known = replace(
        identity,
        calendar_year=calendar.calendar_year if calendar else None,
        calendar_quarter=calendar.calendar_quarter if calendar else None,
        calendar_period=calendar.calendar_label if calendar else None,
    )
    if found is None:
        return known
    where = _fiscal_place(known, end, months, found)
    if where is None:
        return known  # the period does not fit that year end: no label rather than a wrong one
    return replace(
        known,
        period=where.fiscal_label,
        year=where.fiscal_year,
        fiscal_year=where.fiscal_year,
        fiscal_year_named=where.fiscal_year + found.year_offset if found.year_offset else None,
        fiscal_quarter=where.fiscal_quarter,
        fiscal_differs=found.month != 12,
        fiscal_year_end=found.month,
        fiscal_basis=found.basis,
    )


_NAMED_LABEL = re.compile(r"^(?:Q(?P<q>[1-4]) |FY)(?P<year>(?:19|20)\d\d)$")


def _fiscal_place(
    identity: DocumentIdentity, end: datetime.date | None, months: int | None, found: fiscal.YearEnd
) -> FiscalPeriod | None:
    """Where the document's period falls in fiscal years ending in `found.month`: from its dates, or,
    for a document that states none, from its file name's label when the fiscal year is the calendar
    one (then "Q2 2023" can only mean one quarter)."""
    if end is not None and months is not None:
        return fiscal_period(end, months, found.month)
    named = _NAMED_LABEL.match(identity.period or "")
    if named is None or found.month != 12:
        return None
    quarter, year = named.group("q"), int(named.group("year"))
    calendar = int(quarter) if quarter else None
    return FiscalPeriod(year, calendar, year, calendar, 3 if calendar else 12)


def _date(text: str | None) -> datetime.date | None:
    try:
        return datetime.date.fromisoformat(text) if text else None
    except ValueError:
        return None


@dataclass(frozen=True)
class _StatedEnd:
    """The period end a document's front matter states: "for the fiscal year ended June 30, 2023"."""

    span: str  # how it words the period, case-folded: "fiscal year", "quarter", "nine months", …
    year: int
    month: int
    day: int


def _stated_end(lead: str) -> _StatedEnd | None:
    ended = _PERIOD_END.search(lead)
    if ended is None:
        quarter = _MONTH_QUARTER.search(lead)  # "June 2023 quarter": the quarter that ends with June
        if quarter is None:
            return None
        year, month = int(quarter.group("year")), MONTHS[quarter.group("month").casefold().rstrip(".")]
        return _StatedEnd("quarter", year, month, calendar.monthrange(year, month)[1])
    month = MONTHS[ended.group("month").casefold().rstrip(".")]
    return _StatedEnd(
        ended.group("span").casefold(), int(ended.group("year")), month, int(ended.group("day"))
    )


def _named_quarter(named: str) -> int | None:
    """The quarter a document's file name or title says ("2022Q3", "Q3")."""
    found = _QUARTER.search(named)
    return int(found.group("q1") or found.group("q2")) if found else None


#: Months a stated period spans, by how the document words it.
_SPAN_MONTHS = {
    "three": 3,
    "six": 6,
    "nine": 9,
    "twelve": 12,
    "quarter": 3,
    "quarterly": 3,
    "year": 12,
    "fiscal": 12,
}
#: Weeks a stated period spans, by their number as words: 13 weeks are a quarter, 52 a year.
_WEEK_NUMBERS = {
    "twelve": 12,
    "thirteen": 13,
    "fourteen": 14,
    "sixteen": 16,
    "twenty four": 24,
    "twenty six": 26,
    "thirty six": 36,
    "thirty nine": 39,
    "forty": 40,
    "fifty two": 52,
    "fifty three": 53,
}


@dataclass(frozen=True)
class _Span:
    """The period a document covers: its dates, its length in months, and how it words it."""

    start: datetime.date
    end: datetime.date
    months: int
    words: str


def _span_months(span: str) -> int:
    """Months a period worded `span` lasts: "nine months" 9, "fifty-two-week" 12, "year" 12."""
    words = " ".join(span.replace("-", " ").split())
    if "week" in words:
        number = words.split(" week")[0]
        weeks = int(number) if number.isdigit() else _WEEK_NUMBERS.get(number, 52)
        return min(12, max(3, round(weeks / 13) * 3))
    return _SPAN_MONTHS.get(words.split()[0], 12)


def _span(ended: _StatedEnd | None, quarter: int | None, doc_type: str | None) -> _Span | None:
    """The period the front matter states it covers, from its end and its length; None where it
    states no end. An interim document's period is its quarter."""
    if ended is None:
        return None
    try:
        end = datetime.date(ended.year, ended.month, ended.day)
    except ValueError:  # "February 30": not a date
        return None
    span = ended.span
    months = _span_months(span)
    if span.startswith("period") or (doc_type == "quarterly report" and months == 12):
        months = 3 if doc_type == "quarterly report" or quarter is not None else 12
    interim = doc_type in ("quarterly report", "earnings release")
    if quarter is not None and (months in (6, 9) or (months == 12 and interim)):
        months = 3  # "three and nine months ended", "the quarter and year ended": the quarter's three
    return _Span(_months_before(end, months), end, months, span)


def _months_before(end: datetime.date, months: int) -> datetime.date:
    """The first day of a period of `months` months that ends on `end`."""
    after = end + datetime.timedelta(days=1)
    index = after.year * 12 + after.month - 1 - months
    day = min(after.day, calendar.monthrange(index // 12, index % 12 + 1)[1])
    return datetime.date(index // 12, index % 12 + 1, day)


#: A cover names its type on a line of its own: "FORM 10-K", "Annual Report 2025", "Minutes of the
#: Product Council". A type word inside prose ("… reports and meeting minutes.", "[ ] Contract signed
#: and returned") is a mention, not what the document is.
_FORM = re.compile(r"^form\s+", re.IGNORECASE)
_TITLE_LINE_WORDS = 10


def _first_type(cover: str) -> str | None:
    """The type the cover names first on a title-like line: a line of at most ten words that opens
    with the type (after "Form"). A letter that mentions "the annual report" is no annual report, a
    10-K cover names its form before anything else."""
    for line in cover.splitlines():
        line = _FORM.sub("", line.strip())
        if not line or len(line.split()) > _TITLE_LINE_WORDS:
            continue
        found = [
            (rank, name)
            for rank, (name, p) in enumerate(DOC_TYPES)
            if (m := p.match(line)) and m.start() == 0
        ]
        if found:
            return min(found)[1]
    return None


def _period(
    named: str, ended: _StatedEnd | None, quarter: int | None, doc_type: str | None
) -> tuple[int | None, str | None]:
    """(year, period): the period end the front matter states, else the file name's year and quarter."""
    fiscal = _FY.search(named)
    years = [int(y) for y in YEAR.findall(named)]
    if fiscal:
        value = fiscal.group(1)
        years.insert(0, int(value) if len(value) == 4 else 2000 + int(value))
    if ended:
        year, span = ended.year, ended.span
        date = f"{year}-{ended.month:02d}-{ended.day:02d}"
        if quarter is not None:
            return year, f"Q{quarter} {years[0] if years else year}"
        if (
            "quarter" in span
            or span.startswith(("three", "six", "nine"))
            or (_span_months(span) < 12 and "week" in span)
            or doc_type == "quarterly report"
        ):
            return year, date
        return (years[0] if years else year), f"FY{years[0] if years else year}"
    if years:
        if quarter is not None:
            return years[0], f"Q{quarter} {years[0]}"
        return years[0], f"FY{years[0]}" if doc_type in ("annual report", "earnings release") else str(
            years[0]
        )
    return None, None


def _issuer(name: str, title: str, lead: str) -> str | None:
    """The registrant line of a filing, else the organisation the front matter names most, else the
    first word of a `NAME_YEAR…` file name (`3M_2018_10K` → `3M`, `AMCOR_2023Q4` → `AMCOR`)."""
    registrant = _REGISTRANT.search(lead)
    if registrant:
        named = _RULE.sub("", " ".join(registrant.group(1).split()))
        if named:
            return named
    names = (" ".join(m.split()).rstrip(",") for m in _ORG.findall(f"{title}\n{lead}"))
    found = Counter(n for n in names if not _NOT_AN_ISSUER.search(n))
    if found:
        return found.most_common(1)[0][0]
    return issuer_in_name(name)


# A short name the front matter defines: `Johnson & Johnson (“J&J”)`, `(the "Fund" or "ACME")`; a
# ticker: `(NYSE: ACME)`, or the cover table's `Trading Symbol(s)` column of a securities filing.
_DEFINED = re.compile(r"[(“\"]\s*(?:the\s+)?[“\"]([A-Z][A-Za-z0-9&.\-]{1,11})[”\"]")
_TICKER = re.compile(r"\((?:NYSE|NASDAQ|Nasdaq|AMEX|LSE|TSX|ASX|Euronext)[A-Za-z ]*:\s*([A-Z][A-Z.]{0,5})\)")
_SYMBOL_COLUMN = re.compile(
    r"Trading\s+Symbol\(?s?\)?.{0,200}?\b([A-Z]{1,5})\s+(?:The\s+)?(?:New York|NYSE|Nasdaq|NASDAQ)", re.DOTALL
)


def _aliases(issuer: str | None, lead: str) -> tuple[str, ...]:
    """The short names the front matter gives its issuer, kept only when they abbreviate its name
    (`J&J`, `JNJ` for Johnson & Johnson; not `Company` or `Agreement`, which every document defines)."""
    if not issuer:
        return ()
    found = [m.group(1) for rx in (_SYMBOL_COLUMN, _TICKER, _DEFINED) for m in rx.finditer(lead)]
    first = (TOKEN.findall(issuer.casefold()) or [""])[0]
    out = [a for a in dict.fromkeys(found) if abbreviates(a, issuer) and letters(a) != first]
    return tuple(out[:4])


def abbreviates(alias: str, name: str) -> bool:
    """Whether `alias` reads as a short form of `name`: it opens with the name's first letter and its
    letters follow in the name's order (`JnJ`, `J&J` of Johnson & Johnson, `AXP` of American Express)."""
    short, full = letters(alias), letters(name)
    if len(short) < 2 or not full or short[0] != full[0] or short == full:
        return False
    rest = iter(full[1:])
    return all(ch in rest for ch in short[1:])
