"""Which documents a question names: "3M's FY2018 10-K", "Acme's Q3 2024 quarterly report", "the
2023 handbook". Searches rank a named document's pages first (`VersionReader.search`), and the offline
planner searches inside it, as an agent reading the orientation's document list would. `latest_of`
keeps the newest document of each issuer and type, by the same identity fields."""

from __future__ import annotations

import itertools
import math
import re
from collections.abc import Mapping, Sequence
from typing import Any

from sleuth.format.identity import DOC_TYPES, DocumentIdentity, issuer_terms, letters, period_terms
from sleuth.format.periods import named_quarters, quarter_keys
from sleuth.store.version.stop_words import STOP_WORDS

#: The idf-weighted words a question must share with a document's identity to name it.
MIN_DOCUMENT_SCORE = 2.0
MAX_NAMED_DOCUMENTS = 3
_QUERY_WORD = re.compile(r"[a-z0-9]+")


class DocumentResolver:
    """The documents of one version by who they are from and what period they cover."""

    def __init__(self, documents: Mapping[str, Mapping[str, Any]]) -> None:
        """`documents`: source path → its identity (`knowledge/sources.json`, or `_sources` rows)."""
        self.issuers: dict[str, set[str]] = {}
        self.periods: dict[str, set[str]] = {}
        self.years: dict[str, int | None] = {}
        self.aliases: dict[str, set[str]] = {}
        for path, entry in documents.items():
            who = DocumentIdentity(
                entry.get("issuer"), entry.get("doc_type"), entry.get("period"), entry.get("year")
            )
            self.issuers[path], self.periods[path] = issuer_terms(path, who), period_terms(who)
            # its quarter as a question may name it: fiscal, calendar, or by the month it ends
            self.periods[path] |= quarter_keys(entry)
            named = entry.get("fiscal_year_named")
            if isinstance(named, int) and not entry.get("fiscal_quarter"):  # Ulta's "fiscal 2022"
                self.periods[path] |= {str(named), f"fy{named}"}
            year = entry.get("year")
            self.years[path] = year if isinstance(year, int) else None
            self.aliases[path] = set()
        # A short name one document gives its issuer ("JNJ" on a filing's cover) names the issuer's
        # other documents too: an earnings release has no cover table.
        holding: dict[str, set[str]] = {}  # issuer term → the documents with it
        for path, names in self.issuers.items():
            for name in names:
                holding.setdefault(name, set()).add(path)
        for path, entry in documents.items():
            found = {letters(a) for a in str(entry.get("aliases") or "").split()} - STOP_WORDS - {""}
            if found:
                for other in {path}.union(*(holding[name] for name in self.issuers[path])):
                    self.aliases[other] |= found
        counts: dict[str, int] = {}
        for path in self.issuers:
            for word in self.issuers[path] | self.periods[path] | self.aliases[path]:
                counts[word] = counts.get(word, 0) + 1
        n = len(self.issuers)
        # a quarter's key (`f1:2023`) stands for two of the question's words: the quarter and the year
        self.idf = {word: math.log(1 + n / df) * (2 if ":" in word else 1) for word, df in counts.items()}
        # Word → documents, so that a question costs what it names, not the number of documents.
        self._named_by: dict[str, list[str]] = {}
        self._aliased_by: dict[str, list[str]] = {}
        for path in self.issuers:
            for word in self.issuers[path]:
                self._named_by.setdefault(word, []).append(path)
            for word in self.aliases[path]:
                self._aliased_by.setdefault(word, []).append(path)
        self._one_issuer = len({frozenset(names) for names in self.issuers.values()}) <= 1
        self._period_of: dict[str, list[str]] = {}
        for path in self.issuers:
            for word in self.periods[path]:
                self._period_of.setdefault(word, []).append(path)
        self._newest = max((y for y in self.years.values() if y is not None), default=None)

    def resolve(self, query: str) -> list[str]:
        """The documents `query` names, best first by path; empty when it names none.

        A document is named by who it is from: the question must use its issuer's words (a name
        written with or without spaces, "Best Buy" or "BestBuy"), or a short name the documents give
        it, written with a capital ("JnJ", "J&J"), unless every document is from the same issuer.
        Among those, its type and period words (`annual`, `q3`, `2024`) decide, each weighted by how
        rare it is among the documents, read as people mean them:

        - several years ("between FY2021 and FY2022") name the latest: its report carries the
          earlier year as comparatives;
        - a quarter ("Q2 of FY2023") is not the fiscal year's annual report;
        - no period at all asks about the present: the latest year's documents.

        Empty when the question names none, or more than `MAX_NAMED_DOCUMENTS` that it does not
        tell apart."""
        issuers, idf = self.issuers, self.idf
        if len(issuers) < 2:
            return []
        # "fiscal Q1 2023", "the September 2022 quarter": keys, not loose words ("q1" of one reading
        # and "2022" of the other would name a third quarter)
        quarters = named_quarters(query)
        for named_quarter in reversed(quarters):
            query = query[: named_quarter.start] + " " + query[named_quarter.end :]
        raw = _QUERY_WORD.findall(query.casefold())
        words = set(raw) | {a + b for a, b in itertools.pairwise(raw)}  # "best buy" → "bestbuy"
        short = {letters(w) for w in _SHORT_NAME.findall(query) if any(c.isupper() for c in w)}
        words, years = _period_words(words)
        for name, pattern in DOC_TYPES:  # "the 10-K" names an annual report
            if pattern.search(query):
                words |= set(name.split())
        words |= {key for named_quarter in quarters for key in named_quarter.keys}
        by_issuer: dict[str, float] = {}
        for index, asked in ((self._named_by, words), (self._aliased_by, short)):
            for word in asked:
                for path in index.get(word, ()):
                    by_issuer[path] = by_issuer.get(path, 0.0) + idf[word]
        named_any = {path for path, score in by_issuer.items() if score > 0}
        if not named_any and not self._one_issuer:
            return []  # several issuers, and the question names none of them

        # Without an issuer named, every document of the one issuer is a candidate: they are then
        # scored by their period words alone, found through the index, not one by one.
        def candidate(path: str) -> bool:
            return not named_any or path in named_any

        covered = {y for y in years if any(candidate(p) for p in self._period_of.get(y, ()))}
        quarter = bool(words & _QUARTERS) or bool(quarters)
        present: int | None = None  # no period asked: only documents of this year (or of none)
        if covered:  # of several years, the latest that a document covers
            latest = max(covered)
            words |= {latest} if quarter else {latest, "fy" + latest}
        elif not years and not quarter:  # no period: the present
            if named_any:
                present = max((y for p in named_any if (y := self.years[p]) is not None), default=None)
            else:
                present = self._newest

        def kept(path: str) -> bool:
            return candidate(path) and (present is None or self.years[path] in (present, None))

        by_period: dict[str, float] = {}
        for word in words:
            for path in self._period_of.get(word, ()):
                by_period[path] = by_period.get(path, 0.0) + idf[word]
        scores = {
            path: by_issuer.get(path, 0.0) + by_period.get(path, 0.0)
            for path in named_any | set(by_period)
            if kept(path)
        }
        if not scores:
            return []
        best = max(scores.values())
        if best < MIN_DOCUMENT_SCORE:
            return []
        named = sorted(p for p, score in scores.items() if score >= best - 1e-9)
        return named if len(named) <= MAX_NAMED_DOCUMENTS else []


_SHORT_NAME = re.compile(r"[A-Za-z0-9&]+")
_YEAR_WORD = re.compile(r"(?:fy)?((?:19|20)\d\d)|fy(\d\d)")


def _period_words(words: set[str]) -> tuple[set[str], set[str]]:
    """The question's words without its years, and the years (`fy2022` and `fy22` say `2022`):
    `resolve` adds back the one it reads (without its `fy` form when a quarter is named)."""
    years: set[str] = set()
    rest: set[str] = set()
    for word in words:
        match = _YEAR_WORD.fullmatch(word)
        if match:
            years.add(match.group(1) or "20" + match.group(2))
        else:
            rest.add(word)
    return rest, years


_QUARTERS = frozenset({"q1", "q2", "q3", "q4", "1q", "2q", "3q", "4q"})


def latest_of(paths: Sequence[str], documents: Mapping[str, Mapping[str, Any]]) -> list[str]:
    """Of `paths`, the newest document of each (issuer, type): the one whose stated period ends
    last (a fiscal or a calendar label alike), else whose year is last. A document that names no
    issuer and no type, or carries no date, is kept: nothing says what it is the latest of."""
    groups: dict[tuple[str, str], list[str]] = {}
    kept: set[str] = set()
    for path in paths:
        entry = documents.get(path, {})
        key = (str(entry.get("issuer") or "").casefold(), str(entry.get("doc_type") or "").casefold())
        if key == ("", "") or _recency(entry) is None:
            kept.add(path)
        else:
            groups.setdefault(key, []).append(path)
    for members in groups.values():
        dated = {path: _recency(documents[path]) or (0, "") for path in members}
        year = max(y for y, _end in dated.values())
        last = max((end for y, end in dated.values() if y == year), default="")
        # Of the last year's documents, the one whose stated period ends last, and any that states
        # no end (a year alone cannot be ordered against a date of the same year).
        kept.update(path for path, (y, end) in dated.items() if y == year and end in (last, ""))
    return [path for path in paths if path in kept]


def _recency(entry: Mapping[str, Any]) -> tuple[int, str] | None:
    """(the calendar year its stated period ends in, that end), else (the year it names, ""): a
    fiscal year and a calendar one are not compared (fiscal Q1 FY2023 ended in September 2022)."""
    end = str(entry.get("period_end") or "")
    if end[:4].isdigit():
        return int(end[:4]), end
    year = entry.get("year")
    return (year, "") if isinstance(year, int) and not isinstance(year, bool) else None


def covers_year(entry: Mapping[str, Any], year: int) -> bool:
    """Whether a document covers `year` as either reader counts: its (fiscal) year, or the calendar
    year its period ends in (fiscal Q1 FY2023, July-September 2022, covers 2023 and 2022)."""
    end = str(entry.get("period_end") or "")
    return entry.get("year") == year or entry.get("calendar_year") == year or end[:4] == str(year)
