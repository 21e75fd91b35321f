"""Which documents a question names: "3M's FY2018 10-K", "Acme's Q3 2024 quarterly report", "the
2023 handbook". Searches rank a named document's pages first (`VersionReader.search`), and the offline
planner searches inside it, as an agent reading the orientation's document list would."""

from __future__ import annotations

import itertools
import math
import re
from collections.abc import Mapping
from typing import Any

from sleuth.compile.identity import DocumentIdentity, issuer_terms, period_terms

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
        for path, entry in documents.items():
            who = DocumentIdentity(
                entry.get("issuer"), entry.get("doc_type"), entry.get("period"), entry.get("year")
            )
            self.issuers[path], self.periods[path] = issuer_terms(path, who), period_terms(who)
        counts: dict[str, int] = {}
        for path in self.issuers:
            for word in self.issuers[path] | self.periods[path]:
                counts[word] = counts.get(word, 0) + 1
        n = len(self.issuers)
        self.idf = {word: math.log(1 + n / df) for word, df in counts.items()}

    def resolve(self, query: str) -> list[str]:
        """The documents `query` names, best first by path; empty when it names none.

        A document is named by who it is from: the question must use its issuer's words (a name
        written with or without spaces, "Best Buy" or "BestBuy"), unless every document is from the
        same issuer. Among those, its type and period words (`annual`, `q3`, `2024`) decide, each
        weighted by how rare it is among the documents. Empty when the question names none, or more
        than `MAX_NAMED_DOCUMENTS` that it does not tell apart."""
        issuers, periods, idf = self.issuers, self.periods, self.idf
        if len(issuers) < 2:
            return []
        raw = _QUERY_WORD.findall(query.casefold())
        words = set(raw) | {a + b for a, b in itertools.pairwise(raw)}  # "best buy" → "bestbuy"
        words |= {w[2:] for w in words if w.startswith("fy") and w[2:].isdigit()}  # FY2022 → 2022
        by_issuer = {path: sum(idf[w] for w in words & names) for path, names in issuers.items()}
        candidates = [path for path, score in by_issuer.items() if score > 0]
        if not candidates:
            if len({frozenset(names) for names in issuers.values()}) > 1:
                return []  # several issuers, and the question names none of them
            candidates = list(issuers)
        scores = {p: by_issuer[p] + sum(idf[w] for w in words & periods[p]) for p in candidates}
        best = max(scores.values())
        if best < MIN_DOCUMENT_SCORE:
            return []
        named = sorted(p for p, score in scores.items() if score >= best - 1e-9)
        return named if len(named) <= MAX_NAMED_DOCUMENTS else []
