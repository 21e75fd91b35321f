"""Deterministic artifacts on the bundled sample corpus: cards, glossary, typed tables, edges,
rosters and the outline, each checked against the stored page text."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from sleuth.compile.manifest import parse_manifest
from sleuth.compile.pages import Page, Table, TableRow
from sleuth.compile.pipeline import CompileReport
from sleuth.compile.typed_tables import build_table, coerce
from sleuth.format.front_matter import read_front_matter
from sleuth.store.contexts.home import Home

MINUTES = "uploads/acme-corpus/minutes/"


@pytest.fixture(scope="session")
def version(sample_version: Path) -> Path:
    return sample_version


def query(version: Path, sql: str, *params: Any) -> list[tuple[Any, ...]]:
    db = sqlite3.connect(f"file:{version / 'tables.sqlite'}?mode=ro", uri=True)
    try:
        return db.execute(sql, params).fetchall()
    finally:
        db.close()


def page_text(version: Path, source: str, page: int) -> str:
    lines = (version / "knowledge" / "pages" / f"{source}.jsonl").read_text("utf-8").splitlines()
    return str(next(json.loads(x)["text"] for x in lines if json.loads(x)["page"] == page))


def artifact(version: Path, type_slug: str, slug: str) -> tuple[dict[str, Any], str]:
    text = (version / "knowledge" / "artifacts" / type_slug / f"{slug}.md").read_text("utf-8")
    return read_front_matter(text), text.split("\n---\n", 1)[1]


def test_report_counts_and_skips(sample_home: tuple[Home, CompileReport]) -> None:
    _home, report = sample_home
    assert report.flipped and not report.failures
    assert report.counts["sources_compiled"] == 21
    assert report.counts["artifacts_by_type"]["Document"] == 21
    assert report.counts["artifacts_by_type"]["Page"] == report.counts["pages"]
    assert "Person" in report.artifacts_skipped_no_model


def test_doc_card(version: Path) -> None:
    front, body = artifact(version, "document", "acme-instruments-annual-report-2025")
    assert front["kind"] == "doc" and front["scope"] == "document" and front["model"] == "deterministic"
    assert front["fields"]["title"] == "Acme Instruments Annual Report 2025"
    assert front["fields"]["pages"] == 4 and front["fields"]["format"] == "pdf"
    assert any(h.startswith("2. Financial Highlights (p. ") for h in front["fields"]["headings"])
    assert front["id"].startswith("art_") and len(front["id"]) == 20
    assert "## Outline" in body and "## Summary" in body
    lead = front["provenance"][0]
    assert len(lead["quote"]) <= 1200 and lead["quote"].rstrip()[-1] in ".!?\"')]"
    text = page_text(version, lead["source"], lead["page"])
    assert text[lead["start"] : lead["end"]] == lead["quote"]


def test_page_cards_name_pages(version: Path) -> None:
    rows = query(version, "SELECT name FROM _artifacts WHERE type = 'Page' AND name LIKE 'Acme Instruments%'")
    assert sorted(r[0] for r in rows) == [
        f"Acme Instruments Annual Report 2025 — p. {n}" for n in range(1, 5)
    ]
    front, _ = artifact(version, "page", "acme-instruments-annual-report-2025-p-2")
    assert front["fields"] == {"page": 2, "title": "Acme Instruments Annual Report 2025"}
    span = front["provenance"][0]
    assert page_text(version, span["source"], 2)[span["start"] : span["end"]] == span["quote"]


def test_glossary_reads_every_entry_form(version: Path) -> None:
    terms = {
        r[0]: r for r in query(version, 'SELECT term, definition, source, page, start, "end" FROM _glossary')
    }
    assert {"Drift", "Mean Time Between Failures (MTBF)", "Calibration Certificate"} <= set(terms)
    assert "Probation Period" in terms  # a `Term: definition` line in the DOCX "Definitions" section
    means = [t for t, r in terms.items() if " means " in r[1]]
    assert means, "the '\"Term\" means …' form is read"
    for term, definition, source, page, start, end in terms.values():
        assert definition.strip()
        assert term.casefold() in page_text(version, source, page)[start:end].casefold()
    front, body = artifact(version, "defined-terms", "defined-terms")
    assert front["kind"] == "glossary" and front["scope"] == "corpus"
    assert front["fields"]["terms"] == len(terms)
    lines = [ln for ln in body.splitlines() if ln.startswith("- **")]
    assert lines == sorted(lines, key=str.casefold)


def test_typed_table_rows_come_from_corpus_tables(version: Path) -> None:
    rows = query(
        version,
        "SELECT meeting, date, attendee, role, present, _sources, _provenance FROM meeting_attendance",
    )
    assert len(rows) == 26
    assert len({r[2] for r in rows}) == 10
    absent = query(
        version,
        "SELECT attendee FROM meeting_attendance WHERE meeting = 'Product Council' "
        "AND date = '2026-03-04' AND present = 'no'",
    )
    assert absent == [("Hannah Brandt",)]
    for *_values, sources, provenance in rows:
        assert json.loads(sources)[0].startswith(MINUTES)
        for span in json.loads(provenance):
            assert (
                page_text(version, span["source"], span["page"])[span["start"] : span["end"]] == span["quote"]
            )
    products = dict(query(version, "SELECT sku, price_usd FROM product"))
    assert products["TX-9"] == pytest.approx(689.0)
    assert query(version, "SELECT typeof(price_usd), typeof(launch_year) FROM product LIMIT 1") == [
        ("real", "integer")
    ]
    declared = query(version, "SELECT name, natural_key FROM _tables ORDER BY name")
    assert declared == [("meeting_attendance", '["Meeting", "Date", "Attendee"]'), ("product", '["sku"]')]


def test_mention_edges_have_verbatim_evidence(version: Path) -> None:
    edges = query(version, 'SELECT from_name, type, to_name, source, page, start, "end" FROM _edges')
    pairs = {(e[0], e[2]) for e in edges}
    assert ("Product Council — 2026-03-04", "AX-220 Pressure Sensor Specification") in pairs
    assert all(e[1] == "references" and e[0] != e[2] for e in edges)
    for _f, _t, to_name, source, page, start, end in edges:
        assert page_text(version, source, page)[start:end].casefold() == to_name.casefold()
    front, _ = artifact(version, "document", "product-council-2026-03-04")
    assert any(e["to"] == "AX-220 Pressure Sensor Specification" for e in front["edges"])


def test_rosters_and_outline(version: Path) -> None:
    rosters = version / "knowledge" / "rosters"
    assert sorted(p.name for p in rosters.iterdir()) == [
        "_sources.md",
        "defined-terms.md",
        "document.md",
        "meeting-attendance.md",
        "page.md",
        "person.md",
        "product.md",
    ]
    doc_roster = (rosters / "document.md").read_text("utf-8")
    front = read_front_matter(doc_roster)
    assert front == {
        "sleuth_roster": 1,
        "name": "All Document",
        "type": "Document",
        "scope": "index",
        "count": 21,
    }
    assert "| Remote Work Policy |" in doc_roster
    table_roster = (rosters / "product.md").read_text("utf-8")
    assert "Table `product`: 10 rows" in table_roster and "- AX-220" in table_roster
    assert "Not built: kind 'entity' needs a model" in (rosters / "person.md").read_text("utf-8")
    outline = json.loads((version / "knowledge" / "outline.json").read_text("utf-8"))["artifacts"]
    assert len(outline) == len(query(version, "SELECT id FROM _artifacts"))
    assert all((version / "knowledge" / a["file"]).is_file() for a in outline)


def test_artifact_ids_are_stable_across_versions(
    sample_home: tuple[Home, CompileReport], tmp_path: Path
) -> None:
    home, _ = sample_home
    first = query(home.find("acme").version_dir("v000001"), "SELECT id, name FROM _artifacts ORDER BY id")
    assert len({i for i, _ in first}) == len(first)


def test_coercion_rules() -> None:
    assert coerce("1,234.5", "REAL") == (1234.5, True)
    assert coerce("12%", "INTEGER") == (12, True)
    assert coerce("$1,577.00", "NUMERIC") == (1577, True)
    assert coerce("(370)", "INTEGER") == (-370, True)
    assert coerce("", "REAL") == (None, True)
    assert coerce("n/a", "INTEGER") == (None, True)
    assert coerce("twelve", "INTEGER") == (None, False)
    assert coerce("1.5", "INTEGER") == (None, False)
    assert coerce("  text ", "TEXT") == ("text", True)


def test_natural_key_merge_prefers_the_newest_source_and_records_conflicts() -> None:
    manifest = parse_manifest(
        {
            "curate": {
                "artifacts": {
                    "artifact_types": [
                        {
                            "name": "Price",
                            "kind": "entity",
                            "format": "sqlite",
                            "natural_key": ["sku"],
                            "columns": [
                                {"name": "SKU"},
                                {"name": "Price", "type": "REAL"},
                                {"name": "Color"},
                            ],
                        }
                    ]
                }
            }
        }
    )

    def page(text: str) -> Page:
        lines = text.split("\n")
        rows, offset = [], 0
        for line in lines:
            rows.append(TableRow(offset, offset + len(line), [c.strip() for c in line.split(",")]))
            offset += len(line) + 1
        return Page(1, text, tables=[Table(rows)])

    pages = {
        "old.csv": [page("sku,price,color\nA-1,10,red\nB-2,5,")],
        "new.csv": [page("SKU,Price,Color\na-1,12,\nC-3,oops,blue")],
    }
    table = build_table(manifest.curate.artifacts.artifact_types[0], pages, {"old.csv": 1.0, "new.csv": 2.0})
    by_key = {str(r.values["sku"]).upper(): r for r in table.rows}
    merged = by_key["A-1"]
    assert merged.values["price"] == 12 and merged.values["color"] == "red"
    assert merged.sources == ["new.csv", "old.csv"]
    assert merged.conflicts == [
        {"column": "price", "value": 10.0, "source": "old.csv", "page": 1, "start": 16, "end": 26}
    ]
    assert by_key["C-3"].values["price"] is None and table.screened == 1


def test_titles_skip_placeholders_and_headers_add_the_file_name() -> None:
    from sleuth.compile.artifacts import document_title
    from sleuth.compile.documents import context_header
    from sleuth.compile.pages import Heading
    from sleuth.compile.version_files import SourceState

    pages = [
        Page(1, "PART I\nItem 1. Business", [Heading(1, "PART I", 0), Heading(2, "Item 1. Business", 7)])
    ]
    # Issue 26, item 7: "PART I", "Item 1." and the like say where one is, not what the document is.
    assert (
        document_title("uploads/a/AMCOR_2023Q2_10Q.pdf", "0001410636-21-000101", pages) == "AMCOR_2023Q2_10Q"
    )
    for structural in (
        "Part I — Financial Information 3",
        "83 Tower Road North",
        "Table of Contents",
        "Index",
    ):
        cover = [
            Page(1, structural, [Heading(1, structural, 0)]),
            Page(2, "Acme Handbook", [Heading(1, "Acme Handbook", 0)]),
        ]
        assert document_title("uploads/a/x.pdf", None, cover) == "Acme Handbook", structural
    later = [Page(1, "a"), Page(2, "b"), Page(3, "Risk Factors", [Heading(1, "Risk Factors", 0)])]
    assert document_title("uploads/a/x.pdf", None, later) == "x"  # a section's heading, pages in
    assert document_title("uploads/a/x.pdf", "Microsoft Word - draft.docx", []) == "x"
    assert document_title("uploads/a/x.pdf", "Annual Report", pages) == "Annual Report"

    def state(path: str, title: str) -> SourceState:
        return SourceState(path, title, "pdf", 1, 1, "", 1, 0.0, "")

    assert context_header(state("uploads/f/AMCOR_2023Q2_10Q.pdf", "PART I")) == "PART I (AMCOR 2023Q2 10Q)"
    assert context_header(state("uploads/f/AMCOR_2023Q2_10Q.pdf", "AMCOR_2023Q2_10Q")) == "AMCOR 2023Q2 10Q"
    assert (
        context_header(state("uploads/p/remote-work-policy.md", "Remote Work Policy")) == "Remote Work Policy"
    )
