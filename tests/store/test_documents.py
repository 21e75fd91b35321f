"""Which documents a question names (issue 11, 1): periods read as people mean them, and the short
names a document gives its issuer."""

from __future__ import annotations

from typing import Any

import pytest

from sleuth.compile.identity import abbreviates, identify
from sleuth.compile.pages import Page
from sleuth.store.version.documents import DocumentResolver


def _doc(issuer: str, doc_type: str, period: str, year: int, aliases: str = "") -> dict[str, Any]:
    return {"issuer": issuer, "doc_type": doc_type, "period": period, "year": year, "aliases": aliases}


DOCUMENTS = {
    "alder-2021.pdf": _doc("Alder Pumps, Inc.", "annual report", "FY2021", 2021, "ALDP"),
    "alder-2022.pdf": _doc("Alder Pumps, Inc.", "annual report", "FY2022", 2022, "ALDP"),
    "alder-2023q2.pdf": _doc("Alder Pumps, Inc.", "quarterly report", "Q2 2023", 2023),
    "alder-2023.pdf": _doc("Alder Pumps, Inc.", "annual report", "FY2023", 2023),
    "birch-2022.pdf": _doc("Birch & Birch Holdings", "annual report", "FY2022", 2022, "B&B"),
    "birch-2022-release.pdf": _doc("Birch & Birch Holdings", "earnings release", "Q4 2022", 2022),
    "handbook-2020.md": _doc("Cedar Health Trust", "handbook", "2020", 2020),
    "handbook-2024.md": _doc("Cedar Health Trust", "handbook", "2024", 2024),
}


@pytest.mark.parametrize(
    ("question", "named"),
    [
        # several years: the latest one a document covers carries the others as comparatives
        ("How did Alder's revenue change between FY2021 and FY2022?", ["alder-2022.pdf"]),
        ("Alder's 3 year average margin, FY2021 - FY2023?", ["alder-2023.pdf"]),
        ("As of FY22, what did Alder expect to pay in 2031?", ["alder-2022.pdf"]),
        # a quarter is not that fiscal year's annual report
        ("What was Alder's backlog in Q2 of FY2023?", ["alder-2023q2.pdf"]),
        # no period at all: the present
        ("What does the Cedar handbook say about leave?", ["handbook-2024.md"]),
        ("What does the Cedar 2020 handbook say about leave?", ["handbook-2020.md"]),
        # a short name from one document's cover names the issuer's other documents too
        ("What were B&B's FY2022 earnings?", ["birch-2022-release.pdf"]),
        ("BnB revenue in the 2022 annual report?", ["birch-2022.pdf"]),
        ("ALDP revenue FY2021", ["alder-2021.pdf"]),
        # a short name counts only when written as one: "aldp" in lower case is just a word
        ("what is aldp", []),
        ("What drove revenue?", []),  # names no issuer among several
    ],
)
def test_the_named_document(question: str, named: list[str]) -> None:
    assert DocumentResolver(DOCUMENTS).resolve(question) == named


def test_an_earlier_version_without_aliases_still_resolves() -> None:
    documents = {path: {k: v for k, v in doc.items() if k != "aliases"} for path, doc in DOCUMENTS.items()}
    assert DocumentResolver(documents).resolve("Alder's revenue in FY2021?") == ["alder-2021.pdf"]


def test_aliases_are_the_short_names_a_document_defines_for_its_issuer() -> None:
    cover = (
        "JOHNSON & JOHNSON\n(Exact name of registrant as specified in its charter)\n"
        "Title of each class Trading Symbol Name of each exchange on which registered\n"
        "Common Stock, Par Value $1.00 JNJ New York Stock Exchange\n"
        "Johnson & Johnson (“J&J” or the “Company”) and its subsidiaries (the “Agreement”)"
    )
    assert identify("x.pdf", "x", [Page(1, cover)]).aliases == ("JNJ", "J&J")
    release = "Acme Instruments Ltd (NASDAQ: AIL) today reported results. Acme Instruments Ltd (“Acme”)"
    assert identify("r.pdf", "r", [Page(1, release)]).aliases == ("AIL",)  # "Acme" is its name already
    assert abbreviates("AXP", "American Express Company") and abbreviates("JnJ", "Johnson & Johnson")
    assert not abbreviates("Company", "American Express Company") and not abbreviates("XA", "Acme")
