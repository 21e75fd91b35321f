"""What a document is, as a version records it (`sources.json`, `_sources`): the identity record,
the document types, and the words by which a question names a document. `compile.identity` derives
identities from the pages; `store.documents` resolves questions against them."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from sleuth.format.periods import MONTH_LABELS

#: Document types by the words that name them, most specific first. Generic on purpose: filings,
#: policies, manuals, papers and minutes alike.
DOC_TYPES: tuple[tuple[str, re.Pattern[str]], ...] = tuple(
    (name, re.compile(pattern, re.IGNORECASE))
    for name, pattern in (
        ("annual report", r"\b10-?K\b|\bannual report\b|\b20-?F\b"),
        ("quarterly report", r"\b10-?Q\b|\bquarterly report\b"),
        ("current report", r"\b8-?K\b|\bcurrent report\b"),
        ("earnings release", r"\bearnings\b|\bpress release\b|\bresults for the (?:quarter|year)\b"),
        ("proxy statement", r"\bproxy statement\b|\bDEF ?14A\b"),
        ("policy", r"\bpolicy\b"),
        ("handbook", r"\bhandbook\b"),
        ("manual", r"\bmanual\b|\buser guide\b"),
        ("specification", r"\bspecification\b|\bdatasheet\b"),
        ("minutes", r"\bminutes\b"),
        ("letter", r"\bletter\b|\bmemo(?:randum)?\b"),
        ("agreement", r"\bagreement\b|\bcontract\b"),
        ("transcript", r"\btranscript\b"),
        ("presentation", r"\bpresentation\b|\bslides\b"),
        ("paper", r"\babstract\b"),
        ("report", r"\breport\b"),
    )
)
DOC_TYPE_NAMES: tuple[str, ...] = tuple(name for name, _pattern in DOC_TYPES)
YEAR = re.compile(r"(?<![0-9])((?:19|20)\d\d)(?![0-9])")
NAME_SPLIT = re.compile(r"[_\-\s.]+")
TOKEN = re.compile(r"[a-z0-9]+")


@dataclass(frozen=True)
class DocumentIdentity:
    issuer: str | None = None  # the organisation or author the document is by or about
    doc_type: str | None = None  # one of DOC_TYPES' names
    # The period as its readers name it: the fiscal label ("Q1 FY2023", "FY2023") where the fiscal
    # year end is known, else what the file name or the front matter say ("Q3 2024", "2023-12-31").
    period: str | None = None
    year: int | None = None  # the fiscal year it covers (where known), else the year it names
    aliases: tuple[str, ...] = ()  # short names the document gives its issuer: "J&J", a ticker "JNJ"
    # The period's dates when the document states its end ("for the fiscal year ended June 30, 2023"):
    # ISO dates, the start worked out from the period's length (a 52/53-week year: within days).
    period_start: str | None = None
    period_end: str | None = None
    fiscal_quarter: int | None = None  # 1-4: the fiscal quarter it covers, from the fiscal year end
    fiscal_differs: bool | None = None  # its fiscal year does not end in December
    fiscal_year: int | None = None  # the fiscal year it falls in, named by the calendar year it ends in
    fiscal_year_end: int | None = None  # the month (1-12) the company's fiscal year ends in
    fiscal_basis: str | None = None  # how that month is known (`compile.fiscal`)
    calendar_year: int | None = None  # the calendar quarter's year, or a calendar year's
    calendar_quarter: int | None = None  # 1-4 where the period is a calendar quarter
    calendar_period: str | None = None  # "Q3 2022", "2023": the calendar label beside `period`
    # The fiscal year as the document names it where that is not the year it ends in: Ulta's "fiscal
    # 2022" ended January 28, 2023 (FY2023 above); None where they agree.
    fiscal_year_named: int | None = None


def letters(text: str) -> str:
    """A name as letters only, "&" read as "n": `J&J`, `JnJ` and `JNJ` are one short name."""
    return "".join(TOKEN.findall(text.casefold().replace("&", "n")))


def issuer_in_name(name: str) -> str | None:
    """The first word of a `NAME_YEAR…` file name, when it is a name (`3M_2018_10K` → `3M`)."""
    parts = [part for part in NAME_SPLIT.split(name) if part]
    if not any(YEAR.search(part) for part in parts[1:]):  # only `NAME_2022_…` names say who
        return None
    first = parts[0]
    # A name is written as one: `3M`, `AMCOR`, `Pfizer`; `operations-review-2026-02-11` names no one.
    is_name = (
        len(first) >= 2
        and (first[0].isupper() or first[0].isdigit())
        and any(ch.isalpha() for ch in first)
        and not YEAR.fullmatch(first)
    )
    if is_name and not any(p.fullmatch(first) for _t, p in DOC_TYPES):
        return first
    return None


def issuer_terms(path: str, identity: DocumentIdentity) -> set[str]:
    """The words that say who a document is from, as a question would write them: the issuer's first
    word (unless it is an ordinary word such as "General" or "International"), its first two words
    joined ("Best Buy" → `bestbuy`), and the first word of a `NAME_YEAR…` file name
    (`AMCOR_2023Q4_EARNINGS`), often the only place a press release says so."""
    words = [w for w in TOKEN.findall((identity.issuer or "").casefold()) if w not in _GENERIC]
    terms: set[str] = set()
    if words:
        if words[0] not in _ORDINARY and len(words[0]) >= 2:
            terms.add(words[0])
        if len(words) >= 2:
            terms.add(words[0] + words[1])
    named = issuer_in_name(path.rsplit("/", 1)[-1].rsplit(".", 1)[0])
    if named:
        terms.update(TOKEN.findall(named.casefold()))
    return terms


def period_terms(identity: DocumentIdentity) -> set[str]:
    """The words that say what and when a document is: its type and period. Not its title or file
    name: those share words with what the document is about ("remote work"), and a question about a
    topic is not a question naming a document."""
    terms: set[str] = set()
    for text in (identity.doc_type or "", identity.period or ""):
        terms.update(TOKEN.findall(text.casefold()))
    if terms & _QUARTER_WORDS:  # "Q1 FY2023" is a quarter, not the fiscal year's report
        terms = {t[2:] if t.startswith("fy") and t[2:].isdigit() else t for t in terms}
    if identity.year is not None:
        terms.add(str(identity.year))
    return {t for t in terms if len(t) >= 2 and t not in _GENERIC}


_QUARTER_WORDS = frozenset({"q1", "q2", "q3", "q4"})
_GENERIC = frozenset({"the", "of", "and", "for", "inc", "corp", "co", "ltd", "company", "corporation", "pdf"})
# Words that open many organisations' names and much prose: alone, they name nobody.
_ORDINARY = frozenset(
    [
        "general",
        "american",
        "international",
        "united",
        "national",
        "first",
        "new",
        "global",
        "best",
        "health",
        "bank",
        "group",
        "royal",
        "capital",
        "financial",
        "energy",
        "world",
        "public",
        "state",
        "city",
        "county",
        "north",
        "south",
        "east",
        "west",
        "central",
    ]
)


def period_dates(identity: Mapping[str, Any]) -> str:
    """ "2022-07-01 to 2022-09-30 (the fiscal year ends in June, from the fiscal year end it states)":
    the dates a document covers, as its card and the orientation say them."""
    text = f"{identity['period_start']} to {identity['period_end']}"
    month = identity.get("fiscal_year_end")
    if isinstance(month, int) and 1 <= month <= 12:
        basis = f", from {identity['fiscal_basis']}" if identity.get("fiscal_basis") else ""
        said = (
            "fiscal year = calendar year"
            if month == 12
            else f"the fiscal year ends in {MONTH_LABELS[month - 1]}"
        )
        return f"{text} ({said}{basis})"
    if identity.get("fiscal_differs") is True:  # a version compiled before the year end was recorded
        return f"{text} (the fiscal year is not the calendar's)"
    return text


def period_label(identity: Mapping[str, Any]) -> str | None:
    """ "Q1 FY2023 (calendar Q3 2022)": the period as readers name it, the fiscal label and the
    calendar one beside it, each where it is known."""
    period, calendar = identity.get("period"), identity.get("calendar_period")
    if calendar and (not period or (period == calendar and identity.get("fiscal_year") is None)):
        return f"calendar {calendar}"  # no fiscal label: the file name's "Q3 2022" may be either
    if not period:
        return None
    beside = [f"calendar {calendar}"] if calendar and calendar != period else []
    named, quarter = identity.get("fiscal_year_named"), identity.get("fiscal_quarter")
    if isinstance(named, int):  # "Q4 FY2023 (it says Q4 fiscal 2022)"
        beside.append(f"it says {f'Q{quarter} ' if quarter else ''}fiscal {named}")
    return f"{period} ({'; '.join(beside)})" if beside else str(period)
