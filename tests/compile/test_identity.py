"""What each document is (issue 11, 1): issuer, type and period from generated PDFs and the sample
corpus, recorded on the sources, and used to rank the document a question names first."""

from __future__ import annotations

import asyncio
import json
import sqlite3
from pathlib import Path

import pytest

from sleuth.compile.identity import identify
from sleuth.compile.pages import Page
from sleuth.compile.pipeline import compile_context
from sleuth.format.identity import DocumentIdentity
from sleuth.sdk.errors import QueryError
from sleuth.sdk.knowledge import Knowledge, ScopedContext
from sleuth.settings import current
from sleuth.store.contexts.home import Home
from sleuth.store.version.search import VersionReader
from tests.support import compiled_version

ANNUAL = (
    "UNITED STATES SECURITIES AND EXCHANGE COMMISSION\nFORM 10-K\nANNUAL REPORT PURSUANT TO SECTION 13\n"
    "For the fiscal year ended December 31, 2023\nALDER PUMPS, INC.\n"
    "(Exact name of registrant as specified in its charter)\nSmaller reporting company"
)
QUARTERLY = (
    "FORM 10-Q\nQUARTERLY REPORT\nFor the quarterly period ended September 30, 2024\n"
    "Birch Valves Corporation\nBirch Valves Corporation designs valves."
)
BIRCH = DocumentIdentity(
    "Birch Valves Corporation", "quarterly report", "2024-09-30", 2024,
    period_start="2024-07-01", period_end="2024-09-30",
    calendar_year=2024, calendar_quarter=3, calendar_period="Q3 2024",  # its fiscal year end: unsaid
)  # fmt: skip
ALDER = DocumentIdentity(
    "ALDER PUMPS, INC.", "annual report", "FY2023", 2023,
    period_start="2023-01-01", period_end="2023-12-31", fiscal_differs=False,
    fiscal_year=2023, fiscal_year_end=12, fiscal_basis="the annual period it reports",
    calendar_year=2023, calendar_period="2023",
)  # fmt: skip


@pytest.mark.parametrize(
    ("path", "title", "text", "expected"),
    [
        ("alder.pdf", "a", ANNUAL, ALDER),
        ("alder.pdf", "a", ANNUAL.replace("ALDER PUMPS, INC.", "________ ALDER PUMPS, INC. ___"), ALDER),
        ("q.pdf", "q", QUARTERLY, BIRCH),
        # a file name's quarter may be the calendar's or the fiscal one: no fiscal quarter (issue 43)
        ("CEDAR_2022Q3_EARNINGS.pdf", "", "",
         DocumentIdentity("CEDAR", "earnings release", "Q3 2022", 2022)),
        ("policies/travel-policy.md", "Travel Policy", "# Travel Policy\nAcme Instruments Ltd staff travel.",
         DocumentIdentity("Acme Instruments Ltd", "policy", None, None)),
        ("notes.txt", "notes", "Nothing here says what this is.", DocumentIdentity(None, None, None, None)),
    ],
)  # fmt: skip
def test_identify(path: str, title: str, text: str, expected: DocumentIdentity) -> None:
    assert identify(path, title, [Page(1, text)]) == expected


def test_identity_is_recorded_on_every_source(filings: Path, home: Home) -> None:
    version = compiled_version("filings", [filings], home)
    sources = json.loads((version / "knowledge" / "sources.json").read_text())
    alder = sources["uploads/filings/alder-2023.pdf"]
    assert (alder["issuer"], alder["doc_type"], alder["period"], alder["year"]) == (
        "Alder Pumps, Inc.", "annual report", "FY2023", 2023,
    )  # fmt: skip
    with sqlite3.connect(version / "tables.sqlite") as db:
        rows = db.execute("SELECT path, issuer, year FROM _sources ORDER BY path").fetchall()
    assert rows[0] == ("uploads/filings/alder-2022.pdf", "Alder Pumps, Inc.", 2022)


def test_search_ranks_the_named_document_first(filings: Path, home: Home) -> None:
    reader = VersionReader(compiled_version("filings", [filings], home))
    assert reader.resolve_documents("What was Alder's revenue in FY2022?") == [
        "uploads/filings/alder-2022.pdf"
    ]
    assert reader.resolve_documents("What was Birch's revenue in 2023?") == ["uploads/filings/birch-2023.pdf"]
    assert reader.resolve_documents("What was revenue driven by?") == []  # names no document
    hits = reader.search("What was Alder's revenue in FY2022?", top_k=3)
    assert hits[0].source_path == "uploads/filings/alder-2022.pdf" and "$11.0 million" in hits[0].text
    # a boost, not a filter: the other filings are still there below it
    assert len({h.source_path for h in reader.search("Alder revenue 2022 pumps valves", top_k=10)}) > 1


def test_sample_corpus_documents(sample_version: Path) -> None:
    sources = json.loads((sample_version / "knowledge" / "sources.json").read_text())
    kinds = {Path(p).stem: s.get("doc_type") for p, s in sources.items()}
    assert kinds["travel-policy"] == "policy" and kinds["annual-report-2025"] == "annual report"
    assert sources["uploads/acme-corpus/reports/annual-report-2025.pdf"]["year"] == 2025


def test_search_primitives_filter_by_what_a_document_is(filings: Path, home: Home) -> None:
    knowledge = Knowledge([ScopedContext("filings", compiled_version("filings", [filings], home))])
    try:
        birch = asyncio.run(knowledge.search_source("revenue for the year", issuer="birch"))
        assert birch and {h.source_path for h in birch} == {"uploads/filings/birch-2023.pdf"}
        older = asyncio.run(
            knowledge.search_source_by_keyword("revenue", year=2022, doc_type="annual report")
        )
        assert older and {h.source_path for h in older} == {"uploads/filings/alder-2022.pdf"}
        assert asyncio.run(knowledge.search_source("revenue", issuer="nobody")) == []
        with pytest.raises(QueryError, match="year must be an integer"):
            asyncio.run(knowledge.search_source("revenue", year="2022"))  # type: ignore[arg-type]
    finally:
        knowledge.close()


def test_short_names_are_recorded_and_older_versions_are_identified_again(tmp_path: Path, home: Home) -> None:
    """A ticker on the cover is kept as an alias on `sources.json` and `_sources`; a compile after
    an older `identify` (ledger `identity` leg) identifies carried-over sources again without
    re-parsing them, and the next compile does no work."""
    from sleuth.compile.identity import IDENTITY_VERSION
    from sleuth.store.contexts.ledger import Ledger

    corpus = tmp_path / "notes"
    corpus.mkdir()
    (corpus / "alder-2023.md").write_text(
        "# Alder Pumps, Inc. annual report 2023\n\nAlder Pumps, Inc. (NYSE: ALDP) makes pumps.\n"
    )
    (corpus / "birch.md").write_text("# Birch Valves Corporation\n\nBirch Valves Corporation makes valves.\n")
    compile_context("notes", [corpus], home=home, settings=current())
    ctx = home.find("notes")

    def aliases() -> tuple[str, str | None]:
        version = ctx.version_dir(ctx.live_version() or "")
        entry = json.loads((version / "knowledge" / "sources.json").read_text())[
            "uploads/notes/alder-2023.md"
        ]
        with sqlite3.connect(version / "tables.sqlite") as db:
            (row,) = db.execute("SELECT aliases FROM _sources WHERE path LIKE '%alder%'").fetchall()
        return entry["aliases"], row[0]

    assert aliases() == ("ALDP", "ALDP")
    reader = VersionReader(ctx.version_dir(ctx.live_version() or ""))
    assert reader.resolve_documents("What does ALDP make, says its 2023 annual report?") == [
        "uploads/notes/alder-2023.md"
    ]

    ledger = Ledger.load(ctx.ledger_file)
    assert ledger.leg_hashes["identity"] == IDENTITY_VERSION
    ledger.leg_hashes["identity"] = IDENTITY_VERSION - 1  # as an older Sleuth left it
    ledger.save(ctx.ledger_file)
    report = compile_context("notes", [corpus], home=home, settings=current())
    assert report.flipped and sorted(report.unchanged) == sorted(ledger.manifest)  # nothing re-parsed
    assert aliases() == ("ALDP", "ALDP")
    assert compile_context("notes", [corpus], home=home, settings=current()).delta == "empty"


@pytest.mark.parametrize(
    ("path", "text", "dates"),
    [
        # A fiscal year that ends in June: it began the July before, and is not the calendar's.
        ("MSFT_2023_10K.pdf", "FORM 10-K\nFor the fiscal year ended June 30, 2023",
         ("2022-07-01", "2023-06-30", None, True)),
        # A 52/53-week year that ends in the first days of January is a calendar year.
        ("RETAIL_2020_10K.pdf", "FORM 10-K\nFor the fiscal year ended January 2, 2021",
         ("2020-01-03", "2021-01-02", None, False)),
        # The fourth quarter of a fiscal year that ends in June.
        ("AMCOR_2023Q4_EARNINGS.pdf", "Results for the quarter ended June 30, 2023",
         ("2023-04-01", "2023-06-30", 4, True)),
        # a name's Q3 for July-September may count either year: nothing says which (issue 43)
        ("ACME_2024Q3_EARNINGS.pdf", "Results for the three months ended September 30, 2024",
         ("2024-07-01", "2024-09-30", None, None)),
        # six months to June 30 began in January: the fiscal year is the calendar's
        ("ACME_2024_10Q.pdf", "FORM 10-Q\nFor the six months ended June 30, 2024",
         ("2024-01-01", "2024-06-30", 2, False)),
        ("notes.pdf", "Nothing here says when.", (None, None, None, None)),
        # A fourth quarter whose 13 weeks end in the first days of January is the calendar's fourth
        # (`test_fiscal_periods`), but its name alone says nothing of the fiscal year.
        ("ACME_2021Q4_EARNINGS.pdf", "Results for the quarter ended January 1, 2022",
         ("2021-10-02", "2022-01-01", None, None)),
        # "three and nine months ended": the quarter's three months.
        ("X_2023Q3_10Q.pdf", "FORM 10-Q\nFor the three and nine months ended September 30, 2023",
         ("2023-07-01", "2023-09-30", 3, False)),
    ],
)  # fmt: skip
def test_period_dates_fiscal_quarter_and_fiscal_year(
    path: str, text: str, dates: tuple[str | None, str | None, int | None, bool | None]
) -> None:
    """Issue 25, item 4: the period a document covers as dates, its fiscal quarter, and whether its
    fiscal year is the calendar's, from the period end its front matter states."""
    who = identify(path, "", [Page(1, text)])
    assert (who.period_start, who.period_end, who.fiscal_quarter, who.fiscal_differs) == dates


def test_periods_are_recorded_and_latest_keeps_the_newest_of_each_issuer(filings: Path, home: Home) -> None:
    from sleuth.format.identity import period_dates

    version = compiled_version("filings", [filings], home)
    with sqlite3.connect(version / "tables.sqlite") as db:
        rows = db.execute(
            "SELECT path, period_start, period_end, fiscal_differs FROM _sources ORDER BY path"
        ).fetchall()
    assert rows[0] == ("uploads/filings/alder-2022.pdf", "2022-01-01", "2022-12-31", 0)
    sources = json.loads((version / "knowledge" / "sources.json").read_text())
    alder = sources["uploads/filings/alder-2023.pdf"]
    assert period_dates(alder) == (
        "2023-01-01 to 2023-12-31 (fiscal year = calendar year, from the annual period it reports)"
    )
    knowledge = Knowledge([ScopedContext("filings", version)])
    try:
        newest = asyncio.run(knowledge.search_source("revenue for the year", top_k=10, latest=True))
        assert {h.source_path for h in newest} == {
            "uploads/filings/alder-2023.pdf",
            "uploads/filings/birch-2023.pdf",
        }
        alders = ["uploads/filings/alder-2022.pdf", "uploads/filings/alder-2023.pdf"]
        inside = asyncio.run(knowledge.search_in_sources(alders, "revenue", latest=True))
        assert inside and {h.source_path for h in inside} == {"uploads/filings/alder-2023.pdf"}
        keyword = asyncio.run(knowledge.search_source_by_keyword("revenue", issuer="alder", latest=True))
        assert keyword and {h.source_path for h in keyword} == {"uploads/filings/alder-2023.pdf"}
    finally:
        knowledge.close()
