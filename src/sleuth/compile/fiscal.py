"""Where a company's fiscal year ends, read from its own documents (issue 43), so that a period is
labelled as its readers label it (`format.periods`).

A document says it in one of these ways, taken in this order; the first that says it decides:

1. an annual report's own period: "for the fiscal year ended June 30, 2023" ends the fiscal year;
2. a statement of the year end: "the Annual Report on Form 10-K for the fiscal year ended June 30,
   2022", "year ended December 31", "our fiscal year ends on the Saturday nearest the end of
   January" (the month most of them name);
3. the year to date an interim report states beside its quarter: "six months ended December 31,
   2022" began in July, so the year ends in June;
4. the fiscal quarter its cover names for its own period: "Fourth Quarter Fiscal 2022 Results" for
   the quarter ended January 28, 2023;
5. its file name's quarter, only when it is not the calendar quarter of the stated period end
   (`AMCOR_2023Q4` for the quarter ended June 30): then it can only be the fiscal one.

A document that says none of these borrows the year end of its issuer's other documents in the same
context when they agree (`lenders`, applied by `compile.documents.with_issuer_year_ends`); else its
fiscal labels stay empty, never guessed.
"""

from __future__ import annotations

import datetime
import re
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, replace

from sleuth.format.dates import MONTH_NAMES, MONTHS
from sleuth.format.identity import DocumentIdentity, issuer_terms
from sleuth.format.periods import FIRST_WEEK, fiscal_year_of, month_ended, year_end_month_of

#: How much of a document is read for its year end: a 10-Q says it in its first notes.
TEXT_CHARS = 400_000

_DATE = rf"(?P<month>{MONTH_NAMES})\.?\s+(?P<day>\d{{1,2}})"
_YEAR_END = re.compile(
    rf"(?<!calendar )\b(?:fiscal\s+)?year\s+(?:ended|ending|ends)\s+(?:on\s+)?{_DATE}\b", re.I
)
_YEAR_ENDS_ON = re.compile(
    rf"\bfiscal\s+year\s+(?:ends|ended|end)\s+(?:on|in)\s+(?:the\s+)?[^.;\n]{{0,50}}?\b(?P<month>{MONTH_NAMES})\b"
    r"(?:\s+(?P<day>\d{1,2})\b)?",
    re.I,
)
_TO_DATE = re.compile(
    rf"\b(?P<span>six|nine|twenty[\s-]six|thirty[\s-]nine|26|39)[\s-]+(?:months|weeks)\s+ended\s+{_DATE},?\s+"
    r"(?P<year>(?:19|20)\d\d)\b",
    re.I,
)
_ORDINALS = {"first": 1, "second": 2, "third": 3, "fourth": 4, "1st": 1, "2nd": 2, "3rd": 3, "4th": 4}
_ORDINAL = "first|second|third|fourth|1st|2nd|3rd|4th"
_FISCAL_YEAR = r"(?:fiscal|FY)\s*(?:year\s+)?'?(?P<year>(?:19|20)\d\d|\d\d)\b"
_NAMED_QUARTER = (
    re.compile(rf"\b(?P<ord>{_ORDINAL})[\s-]+quarter\s+(?:of\s+)?{_FISCAL_YEAR}", re.I),
    re.compile(rf"\bQ(?P<q>[1-4])\s+(?:of\s+)?{_FISCAL_YEAR}", re.I),
    re.compile(rf"\b{_FISCAL_YEAR}\s+(?P<ord>{_ORDINAL})[\s-]+quarter\b", re.I),
    re.compile(rf"\b{_FISCAL_YEAR}\s*Q(?P<q>[1-4])\b", re.I),
)
_FISCAL_NAMED = re.compile(rf"\b{_FISCAL_YEAR}", re.I)
_DATE_Y = rf"{_DATE},?\s+(?P<y>(?:19|20)\d\d)"
#: A fiscal year's name tied to a date in it: `January 31, 2018 ("fiscal 2018")`, "fiscal 2022 ended
#: January 28, 2023", "the second quarter of fiscal 2024 on July 29, 2023".
_NAME_AT_DATE = (
    re.compile(rf"\b{_DATE_Y}\s*\(\s*[\"“]?\s*fiscal\s+(?:year\s+)?(?P<named>(?:19|20)\d\d)\b", re.I),
    re.compile(
        rf"\bfiscal\s+(?:year\s+)?(?P<named>(?:19|20)\d\d),?\s+(?:which\s+)?(?:ended|ends|ending|on)\s+(?:on\s+)?"
        rf"{_DATE_Y}\b",
        re.I,
    ),
)
#: Where a document names itself: its title lines, as `compile.identity` reads its type there.
COVER_CHARS = 600
_TO_DATE_MONTHS = {"six": 6, "nine": 9, "twenty six": 6, "thirty nine": 9, "26": 6, "39": 9}


@dataclass(frozen=True)
class YearEnd:
    """Where a document's fiscal year ends, how that is known (`basis`), and how the company names
    its fiscal years: `year_offset` -1 when its "fiscal 2022" ends in January 2023 (FY2023 as readers
    count), else 0."""

    month: int
    basis: str
    year_offset: int = 0


def year_end(
    text: str,
    end: datetime.date | None,
    months: int | None,
    annual: bool,
    named_quarter: int | None,
) -> YearEnd | None:
    """The fiscal year end a document states or implies (the module's order), for its period of
    `months` months ending on `end`; `annual` when the period is a fiscal year by what the document
    is. None when nothing in it says."""
    text = text[:TEXT_CHARS]
    found: YearEnd | None = None
    if end is not None and annual:
        found = YearEnd(month_ended(end)[1], "the annual period it reports")
    if found is None:
        found = _stated(text)
    if found is None and end is not None and months is not None and months < 12:
        found = _to_date(text, end) or _named(text, end)
        _year, month = month_ended(end)
        if found is None and named_quarter is not None and months == 3 and month != 3 * named_quarter:
            # not the calendar quarter of its end: the name counts fiscal quarters
            found = YearEnd(year_end_month_of(end, named_quarter), "its file name's fiscal quarter")
    if found is None or end is None:
        return found
    offset = _offset(text, found)
    if offset is None:  # nothing ties a name to a date: what the cover calls it
        offset = _cover_offset(text[:COVER_CHARS], end, found)
    return replace(found, year_offset=offset)


def _cover_offset(cover: str, end: datetime.date, found: YearEnd) -> int:
    """-1 when the first fiscal year the cover names is the one before the calendar year the
    document's fiscal year ends in ("Fourth Quarter Fiscal 2022 Results", quarter ended January 28,
    2023), else 0."""
    if found.month == 12:
        return 0
    named = _FISCAL_NAMED.search(cover)
    if named is None:
        return 0
    year = named.group("year")
    return (
        -1
        if (int(year) if len(year) == 4 else 2000 + int(year)) == fiscal_year_of(end, found.month) - 1
        else 0
    )


def _effective(month: int, day: int | None) -> int:
    """The month a year that ends on `month` `day` closes (a first-week end closes the month before)."""
    if day is not None and day <= FIRST_WEEK:
        return month - 1 or 12
    return month


def _stated(text: str) -> YearEnd | None:
    """The year end the text states most (rule 2), when most of its statements agree."""
    votes: Counter[int] = Counter()
    for pattern in (_YEAR_END, _YEAR_ENDS_ON):
        for m in pattern.finditer(text):
            day = m.group("day")
            votes[_effective(MONTHS[m.group("month").casefold().rstrip(".")], int(day) if day else None)] += 1
    if not votes:
        return None
    month, count = votes.most_common(1)[0]
    if count * 3 < sum(votes.values()) * 2:
        return None  # the text names several year ends: none is sure
    return YearEnd(month, "the fiscal year end it states")


def _to_date(text: str, end: datetime.date) -> YearEnd | None:
    """The year end implied by a year to date that ends with the period (rule 3)."""
    for m in _TO_DATE.finditer(text):
        try:
            ended = datetime.date(
                int(m.group("year")), MONTHS[m.group("month").casefold().rstrip(".")], int(m.group("day"))
            )
        except ValueError:
            continue
        if ended != end:
            continue
        span = _TO_DATE_MONTHS[" ".join(m.group("span").casefold().replace("-", " ").split())]
        _year, month = month_ended(end)
        return YearEnd((month - span - 1) % 12 + 1, "the year to date it states")
    return None


def _named(text: str, end: datetime.date) -> YearEnd | None:
    """The year end implied by the fiscal quarter the cover names first (rule 4): a release's title
    names its own ("Announces Fourth Quarter Fiscal 2022 Results"). Only the cover: further in, a
    filing names other quarters as often as its own ("the fourth quarter of fiscal 2022" in a
    December quarter's notes)."""
    first: tuple[int, int] | None = None
    for pattern in _NAMED_QUARTER:
        m = pattern.search(text[:COVER_CHARS])
        if m is not None and (first is None or m.start() < first[0]):
            groups = m.groupdict()
            first = (m.start(), int(groups["q"]) if groups.get("q") else _ORDINALS[groups["ord"].casefold()])
    if first is None:
        return None
    return YearEnd(year_end_month_of(end, first[1]), "the fiscal quarter it names")


def _offset(text: str, found: YearEnd) -> int | None:
    """-1 when the company names its fiscal years by the calendar year they begin in (Ulta's "fiscal
    2022" ended January 28, 2023), else 0. Read where the document ties a name to a date: `January
    31, 2018 ("fiscal 2018")`, "the second quarter of fiscal 2024 on July 29, 2023"; else from the
    first fiscal year its cover names ("Fourth Quarter Fiscal 2022 Results" of the quarter ended
    January 28, 2023). Never for a year that ends in December; None when nothing ties one."""
    if found.month == 12:
        return 0
    votes: Counter[int] = Counter()
    for pattern in _NAME_AT_DATE:
        for m in pattern.finditer(text):
            try:
                date = datetime.date(
                    int(m.group("y")), MONTHS[m.group("month").casefold().rstrip(".")], int(m.group("day"))
                )
            except ValueError:
                continue
            votes[int(m.group("named")) - fiscal_year_of(date, found.month)] += 1
    votes = Counter({k: n for k, n in votes.items() if k in (0, -1)})
    return votes.most_common(1)[0][0] if votes else None


# ---------------------------------------------------------------------------- across documents
@dataclass(frozen=True)
class Dated:
    """What the context pass reads of one document: who it is from, its year end and how known."""

    issuer: str | None
    year_end_month: int | None
    basis: str | None
    year_offset: int = 0


#: How a document that borrowed its issuer's year end says so: "… its issuer's <path> states".
_BORROWED = re.compile(r"^the fiscal year end its issuer's (?P<path>.+) states$")


def borrowed_basis(lender: str) -> str:
    return f"the fiscal year end its issuer's {lender} states"


def borrowed_from(basis: str | None) -> str | None:
    """The document a borrowed year end came from; None for a document's own (or none)."""
    found = _BORROWED.match(basis or "")
    return found.group("path") if found else None


def lenders(documents: Mapping[str, Dated]) -> dict[str, tuple[str, int, int]]:
    """Each document that knows no fiscal year end of its own → (the first path of its issuer's other
    documents that state one, that month, their year offset), where every one of them agrees.
    Documents are of the same issuer when they share an issuer word (`format.identity.issuer_terms`:
    the issuer's name, a `NAME_YEAR…` file name)."""
    own = {
        p: d for p, d in documents.items() if d.year_end_month is not None and borrowed_from(d.basis) is None
    }
    terms = {p: issuer_terms(p, DocumentIdentity(d.issuer)) for p, d in documents.items()}
    out: dict[str, tuple[str, int, int]] = {}
    for path in documents:
        if path in own or not terms[path]:
            continue
        same = sorted(p for p in own if terms[p] & terms[path])
        ends = {(own[p].year_end_month, own[p].year_offset) for p in same}
        if len(ends) == 1:
            month, offset = next(iter(ends))
            if month is not None:
                out[path] = (same[0], month, offset)
    return out
