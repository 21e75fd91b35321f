"""Boilerplate detection at compile time and its demotion in search (issue 11, 2), on generated PDFs:
running headers and footers, a table of contents, and a certification every document repeats."""

from __future__ import annotations

from pathlib import Path

import pytest

from sleuth.compile import boilerplate
from sleuth.compile.chunking import chunk_pages
from sleuth.compile.manifest import Chunking
from sleuth.compile.pages import Page
from sleuth.compile.pipeline import compile_context
from sleuth.format.furniture import line_key
from sleuth.settings import current
from sleuth.store.contexts.home import Home
from sleuth.store.version.search import VersionReader, asks_for_boilerplate
from tests.support import make_pdf

CERTIFICATION = (
    "I certify that this report fully complies with the requirements of the applicable rules and that "
    "the information it contains fairly presents, in all material respects, the financial condition."
)


def _report(name: str, city: str, revenue: str) -> list[str]:
    header = f"{name} Annual Report"
    toc = "\n".join(f"{title} {n}" for n, title in enumerate(
        ["Overview", "Strategy", "Operations", "Revenue", "Risks", "Outlook", "Governance"], 2
    ))  # fmt: skip
    return [
        f"{header}\nContents\n{toc}\nPage 1 of 5",
        f"{header}\nOverview\n{name} builds water pumps in {city}.\nPage 2 of 5",
        f"{header}\nRevenue\nRevenue for the year was {revenue}, driven by pump sales.\nPage 3 of 5",
        f"{header}\nRisks\nSupply of steel is the main risk to pump sales.\nPage 4 of 5",
        f"{header}\nCertification\n{CERTIFICATION}\nPage 5 of 5",
    ]


@pytest.fixture
def reports(tmp_path: Path) -> Path:
    root = tmp_path / "reports"
    for name, city, revenue in (
        ("Alder", "Oslo", "$12.5 million"),
        ("Birch", "Lima", "$48.0 million"),
        ("Cedar", "Pune", "$7.1 million"),
    ):
        make_pdf(root / f"{name.lower()}.pdf", _report(name, city, revenue))
    return root


def test_running_lines_shared_text_and_contents_pages_are_scored(reports: Path, home: Home) -> None:
    compile_context("reports", [reports], home=home, settings=current())
    ctx = home.find("reports")
    reader = VersionReader(ctx.version_dir(ctx.live_version() or ""))
    scores = reader.boilerplate
    by_page: dict[tuple[str, int], float] = {}
    for cid, chunk in reader.chunks.items():
        by_page[(Path(chunk.source_path).stem, chunk.page)] = max(
            by_page.get((Path(chunk.source_path).stem, chunk.page), 0.0), scores.get(cid, 0.0)
        )
    for doc in ("alder", "birch", "cedar"):
        assert by_page[(doc, 1)] == 1.0  # the contents page
        assert by_page[(doc, 5)] > 0.6  # the certification every report repeats, with header and footer
        assert by_page[(doc, 3)] < 0.5  # the page that answers keeps most of its weight
    # Page text is untouched: the header is still there, at its offsets.
    text = reader.page_text(next(iter(reader.page_files)), 2)
    assert text is not None and text.startswith(("Alder", "Birch", "Cedar"))


def test_search_demotes_boilerplate_unless_asked_for_it(reports: Path, home: Home) -> None:
    compile_context("reports", [reports], home=home, settings=current())
    ctx = home.find("reports")
    reader = VersionReader(ctx.version_dir(ctx.live_version() or ""))
    hits = reader.search("Birch annual report financial condition of the company", top_k=3)
    assert hits[0].page != 5, [(h.source_path, h.page) for h in hits]  # not the certification
    asked = reader.search("Which certification does the Birch annual report contain?", top_k=3)
    assert asked[0].page == 5 and "birch" in asked[0].source_path


def test_scores_without_repeats_are_empty() -> None:
    pages = {"a.md": [Page(1, "One page about pumps in Oslo.\nAnother line about steel supply.")]}
    assert boilerplate.find_boilerplate(pages) == boilerplate.Boilerplate({"a.md": set()}, set(), set())
    assert line_key("Page 7 of 90") == line_key("page 8 of 91.")  # `format.furniture`, shared


@pytest.mark.parametrize(
    ("query", "asks"),
    [("What does the CEO certification say?", True), ("What was revenue in 2024?", False)],
)
def test_asks_for_boilerplate(query: str, asks: bool) -> None:
    assert asks_for_boilerplate(query) is asks


def test_a_table_of_figures_is_not_a_contents_page() -> None:
    """Statement rows end in numbers as contents entries do; they carry several numbers each and do
    not count up like page numbers."""
    contents = "Contents\n" + "\n".join(f"Section {t} {3 + 4 * i}" for i, t in enumerate("ABCDEFGHIJ"))
    labels = ["Net income", "Depreciation", "Deferred taxes", "Receivables", "Inventory", "Payables",
              "Other, net", "Capital spending", "Dividends paid", "Debt repaid"]  # fmt: skip
    statement = "Consolidated Statements of Cash Flows\n" + "\n".join(
        f"{label} $ {700 - 37 * i} $ {610 + 11 * i} $ {560 - 3 * i}" for i, label in enumerate(labels)
    )
    chunks = chunk_pages("a.pdf", [Page(1, contents), Page(2, statement)], Chunking())
    scores = boilerplate.chunk_scores(chunks, {"a.pdf": [Page(1, contents), Page(2, statement)]})
    assert {c.page: scores.get(c.id, 0.0) for c in chunks} == {1: 1.0, 2: 0.0}


def test_only_a_chunk_mostly_boilerplate_is_demoted(reports: Path, home: Home) -> None:
    """A page's first chunk that carries its running header is content: fused scores are flat, so
    scaling it by its small share would drop it tens of places."""
    compile_context("reports", [reports], home=home, settings=current())
    ctx = home.find("reports")
    reader = VersionReader(ctx.version_dir(ctx.live_version() or ""))
    first, second = sorted(reader.chunks)[:2]
    reader.__dict__["boilerplate"] = {first: 0.3, second: 0.9}
    ranked = dict(reader.rank_candidates("pump revenue", [(first, 0.02), (second, 0.02)]))
    assert ranked[first] == 0.02 and ranked[second] == pytest.approx(0.02 * (1 - 0.7 * 0.9))
