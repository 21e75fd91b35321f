"""Periods that mean what a reader means (issue 43, item 5): a filing's period from its own text, its
fiscal year and quarter from the company's fiscal year end, the calendar quarter beside them; both
labels in `_sources`, the document card and the orientation; and a question resolves either.

The texts below are written the way 10-Qs, 10-Ks and earnings releases word their covers and notes
(nothing here is copied from a filing)."""

from __future__ import annotations

import json
import sqlite3
from dataclasses import asdict
from pathlib import Path
from typing import Any

import pytest

from sleuth.agent.orientation import ContextBrief, block_b, overview
from sleuth.compile.identity import identify
from sleuth.compile.pages import Page
from sleuth.compile.pipeline import compile_context
from sleuth.compile.table_cells import column_period
from sleuth.format.identity import period_label
from sleuth.settings import current
from sleuth.store.contexts.home import Home
from sleuth.store.version.documents import DocumentResolver, latest_of
from sleuth.store.version.search import VersionReader
from tests.support import make_pdf

COVER_10Q = (
    "UNITED STATES SECURITIES AND EXCHANGE COMMISSION\nWashington, D.C. 20549\nFORM 10-Q\n"
    "QUARTERLY REPORT PURSUANT TO SECTION 13 OR 15(d) OF THE SECURITIES EXCHANGE ACT OF 1934\n"
    "For the quarterly period ended {end}\nCEDAR SOFTWARE CORPORATION\n"
    "(Exact name of registrant as specified in its charter)"
)
NOTE_10Q = (
    "Note 1. Basis of Presentation\nThese statements should be read in conjunction with the Annual "
    "Report on Form 10-K for the fiscal year ended June 30, 2022."
)
COVER_10K = (
    "FORM 10-K\nANNUAL REPORT PURSUANT TO SECTION 13 OR 15(d) OF THE SECURITIES EXCHANGE ACT OF 1934\n"
    "For the fiscal year ended June 30, 2023\nCEDAR SOFTWARE CORPORATION\n"
    "(Exact name of registrant as specified in its charter)"
)

# a release whose company names fiscal years by the calendar year they begin in
ULTA = (
    "Announces Fourth Quarter Fiscal 2022 Results\nToday the company announced results for the "
    "thirteen-week period (\u201cfourth quarter\u201d) and fifty-two-week period (\u201cfiscal year\u201d) "
    "ended January 28, 2023.\nFor the Fourth Quarter of Fiscal 2022, net sales rose."
)


def _who(path: str, *pages: str) -> dict[str, Any]:
    identity = identify(path, "", [Page(n, text) for n, text in enumerate(pages, 1)])
    return {
        "period": identity.period,
        "fiscal": (identity.fiscal_year, identity.fiscal_quarter, identity.fiscal_year_end),
        "calendar": identity.calendar_period,
        "dates": (identity.period_start, identity.period_end),
        "basis": identity.fiscal_basis,
    }


def test_a_quarter_of_a_june_fiscal_year_is_its_first() -> None:
    """The trial's file: July-September 2022 of a company whose fiscal year ends in June, named like a
    calendar quarter. It was "Q3 2022" with fiscal quarter 3; its 10-Q says which year it is in."""
    who = _who("CEDAR_2022Q3_10Q.pdf", COVER_10Q.format(end="September 30, 2022"), NOTE_10Q)
    assert who == {
        "period": "Q1 FY2023",
        "fiscal": (2023, 1, 6),
        "calendar": "Q3 2022",
        "dates": ("2022-07-01", "2022-09-30"),
        "basis": "the fiscal year end it states",
    }


@pytest.mark.parametrize(
    ("path", "pages", "period", "fiscal", "calendar", "basis"),
    [
        # the year to date beside the quarter began in July: the year ends in June
        ("AMC_10Q.pdf",
         [COVER_10Q.format(end="December 31, 2022"),
          "Condensed Consolidated Statement of Income\n"
          "Three and Six Months Ended December 31, 2022 and 2021\n"
          "For the six months ended December 31, 2022, net sales were $7.4 billion."],
         "Q2 FY2023", (2023, 2, 6), "Q4 2022", "the year to date it states"),
        # a 52/53-week year that ends near the end of January, named by the year it ends in
        ("BBY_10Q.pdf",
         [COVER_10Q.format(end="July 29, 2023"),
          "Read this with our Annual Report on Form 10-K for the fiscal year ended January 28, 2023.\n"
          "Between the end of the second quarter of fiscal 2024 on July 29, 2023, and today, we bought "
          "back shares."],
         "Q2 FY2024", (2024, 2, 1), None, "the fiscal year end it states"),
        # a release whose title names its quarter: the year ends in January
        ("ULTA_2023Q4_EARNINGS.pdf", [ULTA],
         "Q4 FY2023", (2023, 4, 1), None, "the fiscal quarter it names"),
        # a file name's quarter that is not the calendar's can only be the fiscal one
        ("AMCOR_2023Q4_EARNINGS.pdf", ["Amcor reports results\nJune 2023 quarter: net sales fell 7%."],
         "Q4 FY2023", (2023, 4, 6), "Q2 2023", "its file name's fiscal quarter"),
        # a calendar-year bank: the 10-K it refers to ended in December
        ("BANK_2021Q1_10Q.pdf",
         [COVER_10Q.format(end="March 31, 2021"),
          "Refer to the Annual Report on Form 10-K for the year ended December 31, 2020."],
         "Q1 FY2021", (2021, 1, 12), "Q1 2021", "the fiscal year end it states"),
        # nothing says where the fiscal year ends: the calendar label only, the file name's label kept
        ("CEDAR_2022Q3_10Q.pdf", [COVER_10Q.format(end="September 30, 2022")],
         "Q3 2022", (None, None, None), "Q3 2022", None),
    ],
)  # fmt: skip
def test_the_fiscal_year_end_from_the_documents_own_words(
    path: str,
    pages: list[str],
    period: str,
    fiscal: tuple[int | None, int | None, int | None],
    calendar: str | None,
    basis: str | None,
) -> None:
    who = _who(path, *pages)
    assert (who["period"], who["fiscal"], who["calendar"], who["basis"]) == (period, fiscal, calendar, basis)


def test_a_company_that_names_its_years_otherwise_keeps_its_name_beside() -> None:
    """Readers mostly name a fiscal year by the calendar year it ends in (FY2023 for the year ended
    January 28, 2023); Ulta calls it fiscal 2022. The label is the former, the company's own is kept
    beside it, and a question may use either."""
    who = identify("ULTA_2023Q4_EARNINGS.pdf", "", [Page(1, ULTA)])
    assert (who.period, who.fiscal_year, who.fiscal_year_named) == ("Q4 FY2023", 2023, 2022)
    entry = asdict(who) | {"issuer": "Ulta Beauty, Inc."}
    assert period_label(entry) == "Q4 FY2023 (it says Q4 fiscal 2022)"
    other = {
        "issuer": "Birch Valves Corporation",
        "doc_type": "annual report",
        "period": "FY2023",
        "year": 2023,
    }
    resolver = DocumentResolver({"ulta.pdf": entry, "birch.pdf": other})
    assert resolver.resolve("Ulta's SG&A in Q4 of FY2023?") == ["ulta.pdf"]
    assert resolver.resolve("Ulta's SG&A in the fourth quarter of fiscal 2022?") == ["ulta.pdf"]


def test_resolution_reads_a_fiscal_and_a_calendar_quarter() -> None:
    """ "fiscal Q1 2023" and "the September 2022 quarter" name one filing; a bare "Q3 2022" may be the
    fiscal or the calendar one, so it names both."""
    quarterly = "quarterly report"
    documents = {
        "cedar-10k-2023.pdf": _entry("annual report", "FY2023", 2023, None, None, "2022-07-01", "2023-06-30"),
        "cedar-10q-sep22.pdf": _entry(quarterly, "Q1 FY2023", 2023, 1, (2022, 3), "2022-07-01", "2022-09-30"),
        "cedar-10q-mar22.pdf": _entry(quarterly, "Q3 FY2022", 2022, 3, (2022, 1), "2022-01-01", "2022-03-31"),
        "birch-10q.pdf": _entry(quarterly, "Q3 FY2022", 2022, 3, (2022, 3), "2022-07-01", "2022-09-30")
        | {"issuer": "Birch Valves Corporation", "fiscal_year_end": 12},
    }  # fmt: skip
    resolver = DocumentResolver(documents)
    assert resolver.resolve("Cedar's revenue in fiscal Q1 2023?") == ["cedar-10q-sep22.pdf"]
    assert resolver.resolve("Cedar's Q1 FY23 revenue") == ["cedar-10q-sep22.pdf"]
    assert resolver.resolve("Cedar's revenue in the September 2022 quarter") == ["cedar-10q-sep22.pdf"]
    assert resolver.resolve("Cedar's revenue for the quarter ended September 30, 2022") == [
        "cedar-10q-sep22.pdf"
    ]
    assert resolver.resolve("Cedar's calendar Q3 2022 revenue") == ["cedar-10q-sep22.pdf"]
    assert resolver.resolve("Cedar's revenue in fiscal Q3 2022") == ["cedar-10q-mar22.pdf"]
    assert resolver.resolve("Cedar's Q3 2022 quarterly report") == [
        "cedar-10q-mar22.pdf",
        "cedar-10q-sep22.pdf",
    ]
    assert resolver.resolve("Cedar's Q1 2022 quarterly report") == ["cedar-10q-mar22.pdf"]  # calendar Q1
    # the newest of each issuer by the dates, whatever the labels: September 2022 after March 2022
    assert latest_of(["cedar-10q-sep22.pdf", "cedar-10q-mar22.pdf"], documents) == ["cedar-10q-sep22.pdf"]


def _entry(
    doc_type: str,
    period: str,
    fiscal_year: int,
    quarter: int | None,
    calendar: tuple[int, int] | None,
    start: str,
    end: str,
) -> dict[str, Any]:
    return {
        "issuer": "Cedar Software Corporation",
        "doc_type": doc_type,
        "period": period,
        "year": fiscal_year,
        "fiscal_year": fiscal_year,
        "fiscal_quarter": quarter,
        "fiscal_year_end": 6,
        "calendar_year": calendar[0] if calendar else None,
        "calendar_quarter": calendar[1] if calendar else None,
        "period_start": start,
        "period_end": end,
    }


def test_a_quarter_takes_its_issuers_year_end_and_every_reader_shows_both_labels(
    tmp_path: Path, home: Home
) -> None:
    """A 10-Q that states no fiscal year end takes the one its issuer's 10-K in the same context
    states; `_sources`, the All Sources roster, the document card and the orientation show the fiscal
    label with the calendar one beside it. Without the 10-K, the label is the calendar's only."""
    root = tmp_path / "cedar"
    make_pdf(root / "CEDAR_2023_10K.pdf", [COVER_10K, "Revenue for fiscal 2023 was $41.0 million."])
    make_pdf(
        root / "CEDAR_2022Q3_10Q.pdf",
        [COVER_10Q.format(end="September 30, 2022"), "Revenue for the quarter was $9.8 million."],
    )
    manifest = tmp_path / "manifest.json"
    types = [{"name": "Filing", "kind": "doc"}]
    manifest.write_text(json.dumps({"curate": {"artifacts": {"artifact_types": types}}}))
    compile_context("cedar", [root], manifest, home=home, settings=current())
    version = VersionReader.live(home.find("cedar")).root
    quarter = "uploads/cedar/CEDAR_2022Q3_10Q.pdf"
    entry = json.loads((version / "knowledge" / "sources.json").read_text())[quarter]
    assert (entry["period"], entry["fiscal_year"], entry["fiscal_quarter"], entry["calendar_period"]) == (
        "Q1 FY2023",
        2023,
        1,
        "Q3 2022",
    )
    assert entry["fiscal_basis"] == "the fiscal year end its issuer's uploads/cedar/CEDAR_2023_10K.pdf states"
    with sqlite3.connect(version / "tables.sqlite") as db:
        row = db.execute(
            "SELECT period, fiscal_year, fiscal_quarter, fiscal_year_end, calendar_year, calendar_quarter "
            "FROM _sources WHERE path = ?",
            (quarter,),
        ).fetchone()
    assert row == ("Q1 FY2023", 2023, 1, 6, 2022, 3)
    both = "Q1 FY2023 (calendar Q3 2022)"
    assert period_label(entry) == both
    roster = (version / "knowledge" / "rosters" / "_sources.md").read_text()
    assert f"| {both} | 2022-07-01 to 2022-09-30 |" in roster
    cards = [p.read_text() for p in (version / "knowledge").rglob("*.md") if "rosters" not in p.parts]
    assert any(f"- Period: {both}" in card and "CEDAR_2022Q3_10Q" in card for card in cards)
    brief = ContextBrief("cedar", "Cedar", "", version, version.name)
    line = next(ln for ln in block_b([overview(brief)], None, None).splitlines() if "CEDAR_2022Q3_10Q" in ln)
    assert both in line and "the fiscal year ends in June" in line
    reader = VersionReader(version)
    assert reader.resolve_documents("Cedar's revenue in fiscal Q1 2023") == [quarter]
    assert reader.resolve_documents("Cedar's revenue in the September 2022 quarter") == [quarter]

    # the 10-K gone, the quarter is identified again: no fiscal label, the calendar one stays
    (root / "CEDAR_2023_10K.pdf").unlink()
    compile_context("cedar", [root], manifest, home=home, settings=current())
    version = VersionReader.live(home.find("cedar")).root
    entry = json.loads((version / "knowledge" / "sources.json").read_text())[quarter]
    assert (entry["fiscal_quarter"], entry["fiscal_basis"], entry["calendar_period"]) == (
        None,
        None,
        "Q3 2022",
    )
    assert period_label(entry) == "calendar Q3 2022"


def test_a_quarter_under_the_years_end_date_is_a_quarter_of_unknown_end() -> None:
    """Walmart prints each quarter as `Fiscal Year Ended January 31, 2020 Q1`: three months, and the
    date ends the year, so it is the quarter's end only for the fourth (issue 45, item 1)."""
    first = column_period("Fiscal Year Ended January 31, 2020 Q1")
    assert (first.year, first.months, first.end, first.start) == (2020, 3, None, None)
    fourth = column_period("Fiscal Year Ended January 31, 2020 Q4")
    assert (fourth.months, fourth.end, fourth.start) == (3, "2020-01-31", "2019-11-01")
    assert column_period("2023 Q1").months == 3
    assert column_period("Fiscal Year Ended January 31, 2020").months == 12
