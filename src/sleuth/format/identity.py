"""What a document is, as a version records it (`sources.json`, `_sources`): the identity record,
the document types, and the words by which a question names a document. `compile.identity` derives
identities from the pages; `store.documents` resolves questions against them."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

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
    period: str | None = None  # "FY2022", "Q3 2024", or "2023-12-31" for a period end
    year: int | None = None  # the (fiscal) year it covers
    aliases: tuple[str, ...] = ()  # short names the document gives its issuer: "J&J", a ticker "JNJ"
    # The period's dates when the document states its end ("for the fiscal year ended June 30, 2023"):
    # ISO dates, the start worked out from the period's length (a 52/53-week year: within days).
    period_start: str | None = None
    period_end: str | None = None
    fiscal_quarter: int | None = None  # 1-4 for a quarter's document, as it names it
    fiscal_differs: bool | None = None  # its fiscal year does not end on December 31


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
    if identity.year is not None:
        terms.add(str(identity.year))
    return {t for t in terms if len(t) >= 2 and t not in _GENERIC}


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
    """ "2022-07-01 to 2023-06-30 (fiscal quarter 4; the fiscal year is not the calendar's)": the dates a
    document covers, as its card and the orientation say them."""
    text = f"{identity['period_start']} to {identity['period_end']}"
    notes = []
    if identity.get("fiscal_quarter"):
        notes.append(f"fiscal quarter {identity['fiscal_quarter']}")
    if identity.get("fiscal_differs") is True:
        notes.append("the fiscal year is not the calendar's")
    elif identity.get("fiscal_differs") is False:
        notes.append("fiscal year = calendar year")
    return text + (f" ({'; '.join(notes)})" if notes else "")
