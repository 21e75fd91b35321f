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
from dataclasses import dataclass

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

#: Bumped when the same pages give a different identity: carried-over sources are identified again.
#: 3: period dates, fiscal quarter, fiscal year off the calendar; 4: a registrant line's rule
#: (`______ AMAZON.COM, INC.`) is not part of the issuer's name.
#: 5: a cover names its type on a title-like line; a lowercase file name names no issuer; an
#: organisation's name does not run across a sentence's end.
IDENTITY_VERSION = 5
LEAD_CHARS = 4_000  # how much of the first pages is read: covers and front matter, not the body
COVER_CHARS = 600  # where a document says what it is; further in, "annual report" is a mention

_PERIOD_END = re.compile(
    rf"\b(?P<span>fiscal year|year|quarter(?:ly period)?|period|(?:three|six|nine|twelve) months)"
    rf"\s+ended\s+(?P<month>{MONTH_NAMES})\.?\s+(?P<day>\d{{1,2}}),?\s+(?P<year>(?:19|20)\d\d)\b",
    re.IGNORECASE,
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
    dates = _dates(ended, quarter, doc_type)
    return DocumentIdentity(issuer, doc_type, period, year, _aliases(issuer, lead), *dates)


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
        return None
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


def _dates(
    ended: _StatedEnd | None, quarter: int | None, doc_type: str | None
) -> tuple[str | None, str | None, int | None, bool | None]:
    """(period start, period end, fiscal quarter, fiscal year not the calendar's) from the period end
    the front matter states and the quarter the name says; None where nothing says."""
    if ended is None:
        return None, None, quarter, None
    month, day = ended.month, ended.day
    try:
        end = datetime.date(ended.year, month, day)
    except ValueError:  # "February 30": not a date
        return None, None, quarter, None
    span = ended.span
    months = _SPAN_MONTHS.get(span.split()[0], 12)
    if span.startswith("period") or (doc_type == "quarterly report" and months == 12):
        months = 3 if doc_type == "quarterly report" or quarter is not None else 12
    if quarter is not None and months in (6, 9):  # "three and nine months ended": the quarter's three
        months = 3
    start = _months_before(end, months)
    # A year that ends in the first week of January is a 52/53-week calendar year ("January 2, 2021").
    calendar_end = (month == 12 and day >= 24) or (month == 1 and day <= 7)
    differs: bool | None
    if months == 12:
        differs = not calendar_end
    elif quarter is not None:
        # A quarter of a calendar year ends in month 3q, or (52/53 weeks) in the first week after it.
        differs = not (month == 3 * quarter or (month == (3 * quarter) % 12 + 1 and day <= 7))
    else:
        differs = None  # a quarter's end alone does not say where the fiscal year ends
    return start.isoformat(), end.isoformat(), quarter, differs


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
        if "quarter" in span or span.startswith(("three", "six", "nine")) or doc_type == "quarterly report":
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
