"""The retrieval primitives over the compiled sample corpus (spec/runtime.md §5)."""

from __future__ import annotations

import asyncio
import shutil
from pathlib import Path

import pytest

from sleuth.sdk.errors import AmbiguousError, LimitError, NotFoundError, QueryError
from sleuth.sdk.knowledge import FinalAnswer, Knowledge, ScopedContext
from sleuth.sdk.types import Hit


@pytest.fixture(scope="session")
def version_dir(sample_version: Path) -> Path:
    return sample_version


@pytest.fixture
def kb(version_dir: Path) -> Knowledge:
    return Knowledge([ScopedContext("acme", version_dir)])


def run(coro: object) -> list[Hit]:
    return asyncio.run(coro)  # type: ignore[arg-type]


def test_reads_are_plain_calls_and_also_awaitable(kb: Knowledge) -> None:
    refs = kb.outline_knowledge(type="Document")
    assert len(refs) == 21 + 1  # 21 cards and the "All Document" roster
    assert {r.kind for r in refs} == {"doc", "roster"}

    async def awaited() -> int:
        again = await kb.outline_knowledge(type="Document")  # type: ignore[misc]  # reads may be awaited
        count = await kb.get_fact("source_count")
        return len(again) + int(count)

    assert asyncio.run(awaited()) == 22 + 21
    assert kb.outline_knowledge(scope="index")[0].scope == "index"


def test_read_artifact_by_name_case_and_slug(kb: Knowledge) -> None:
    exact = kb.read_artifact("Remote Work Policy")
    assert exact.kind == "doc" and exact.sources == ["uploads/acme-corpus/policies/remote-work-policy.md"]
    assert kb.read_artifact("remote work policy").id == exact.id
    assert kb.read_artifact("remote-work-policy").id == exact.id
    assert exact.provenance and exact.provenance[0].ref.startswith("E")
    assert any(e.direction == "in" for e in exact.edges) and any(e.direction == "out" for e in exact.edges)
    incoming = next(e for e in exact.edges if e.direction == "in")
    assert incoming.evidence is not None and incoming.evidence.text.casefold() == "remote work policy"
    assert "Artifact(Document 'Remote Work Policy'" in repr(exact)


def test_not_found_lists_the_closest_names(kb: Knowledge) -> None:
    with pytest.raises(NotFoundError, match="closest: 'Remote Work Policy'"):
        kb.read_artifact("Remote Work Polcy")


def test_rosters_list_every_artifact(kb: Knowledge) -> None:
    rosters = kb.read_rosters()
    assert {r.name for r in rosters} >= {"All Sources", "All Document", "All Product"}
    docs = kb.read_rosters("Document")[0]
    assert docs.count == 21 and len(docs.entries) == 21
    assert "Remote Work Policy" in {e.name for e in docs.entries}
    with pytest.raises(NotFoundError, match="no roster for type 'Nope'"):
        kb.read_rosters("Nope")


def test_describe_type_and_tables(kb: Knowledge) -> None:
    spec = kb.describe_type("meeting attendance")
    assert spec.format == "sqlite" and spec.table == "meeting_attendance" and spec.count == 26
    assert [c.name for c in spec.columns] == ["Meeting", "Date", "Attendee", "Role", "Present"]
    assert kb.describe_type("Document").edge_types[0]["name"] == "references"
    tables = {t.name: t for t in kb.list_tables()}
    assert tables["product"].row_count == 10 and tables["product"].natural_key == ["sku"]
    assert tables["meeting_attendance"].type == "Meeting Attendance"


def test_searches_return_labelled_citable_hits(kb: Knowledge) -> None:
    hits = run(kb.search_source("How many days a week can employees work remotely?", top_k=5))
    assert hits and all(h.kind == "chunk" and h.ref and h.ref.startswith("E") for h in hits)
    assert any("three days" in (h.chunk_text or "") for h in hits)
    first = hits[0]
    assert first.span is not None and first.span.text == first.chunk_text
    again = run(kb.search_source("How many days a week can employees work remotely?", top_k=5))
    assert [h.ref for h in again] == [h.ref for h in hits]  # same span, same label
    assert repr(first).startswith(f"Hit({first.ref} chunk uploads/acme-corpus/")


def test_keyword_search_for_identifiers(kb: Knowledge) -> None:
    hits = run(kb.search_source_by_keyword("ERR-4012", top_k=3))
    assert hits and "ERR-4012" in (hits[0].chunk_text or "")
    assert run(kb.search_source_by_keyword("ZZQ-0000-NOPE")) == []


def test_search_knowledge_filters_by_kind(kb: Knowledge) -> None:
    hits = run(kb.search_knowledge("mean time between failures", top_k=3, kind="glossary"))
    assert hits and hits[0].kind == "artifact" and hits[0].artifact_kind == "glossary"
    docs = run(kb.search_knowledge("incident outage", kind="doc", top_k=3))
    assert all(h.artifact_kind == "doc" for h in docs)
    assert "Incident" in docs[0].name


def test_search_in_sources_and_cite_from_artifact(kb: Knowledge) -> None:
    art = kb.read_artifact("Acme Instruments Annual Report 2025")
    hits = run(kb.search_in_sources(art.sources, ["revenue 2025", "headcount"], max_total=6))
    assert hits and {h.source_path for h in hits} == set(art.sources)
    ignored = run(kb.search_in_sources(["uploads/nope.pdf"], "revenue"))
    assert ignored == []
    cites = run(kb.cite_from_artifact("Defined Terms", queries="drift", max_total=4))
    assert cites[0].kind == "provenance" and "Drift" in (cites[0].chunk_text or "")
    assert cites[0].span is not None and cites[0].span.via == "artifact"


def test_query_db_rows_truncation_and_provenance_labels(kb: Knowledge) -> None:
    rows = kb.query_db(
        "SELECT attendee, _provenance FROM meeting_attendance WHERE present = ? ORDER BY attendee", ["no"]
    )
    assert rows.columns == ["attendee", "_provenance"] and not rows.truncated
    assert rows[0]["_provenance"][0].startswith("E")
    span = kb.evidence.get(rows[0]["_provenance"][0])
    assert span is not None and span.via == "table" and "| no |" in span.text
    many = kb.query_db(
        "WITH RECURSIVE n(x) AS (SELECT 1 UNION ALL SELECT x+1 FROM n WHERE x < 2000) SELECT x FROM n"
    )
    assert len(many) == 1000 and many.truncated
    with pytest.raises(QueryError, match=r"Tables: .*product\(.*Tip: query_db holds table data only"):
        kb.query_db("SELECT nope FROM product")
    with pytest.raises(QueryError):
        kb.query_db("DELETE FROM product")


def test_query_db_reads_the_cells_of_pdf_tables_as_citable_rows(kb: Knowledge) -> None:
    """Issue 25, item 2: the annual report's key-figure table (a PDF) is in `_cells`, a row per
    cell with its label, column header, period and unit, and each row cites the cell's own text."""
    rows = kb.query_db(
        'SELECT label, header, year, unit, text, value, source, page, start, "end" FROM _cells '
        "WHERE label = 'Operating income' ORDER BY column_no"
    )
    assert [(r["header"], r["year"], r["unit"], r["text"], r["value"]) for r in rows] == [
        ("2025", 2025, "millions", "6.9", 6.9),
        ("2024", 2024, "millions", "5.4", 5.4),
        ("Change", 2025, "millions", "+28%", 28.0),  # the change in the year it follows
    ]
    span = kb.evidence.get(rows[0]["_evidence"])
    assert span is not None and span.via == "table" and span.text == "6.9" and span.page == 3
    assert rows[0]["source"].endswith("annual-report-2025.pdf")
    # `_cells` is listed as one table (its storage tables are not), counted like the view it is
    tables = {t.name: t for t in kb.list_tables()}
    assert "_cells" in tables and not any(name.startswith("_cells_") for name in tables)
    assert tables["_cells"].row_count == kb.query_db("SELECT count(*) AS n FROM _cells")[0]["n"] > 0
    # A row that claims a place it does not hold gets no label.
    fake = kb.query_db("SELECT 'nope.pdf' AS source, 1 AS page, 0 AS start, 3 AS \"end\"")
    assert "_evidence" not in fake[0]


def test_walk_graph_and_facts(kb: Knowledge) -> None:
    graph = kb.walk_graph("Product Council — 2026-03-04", max_hops=2)
    names = {n.name for n in graph.nodes}
    assert "AX-220 Pressure Sensor Specification" in names and graph.start.kind == "doc"
    assert all(e.type == "references" for e in graph.edges) and not graph.truncated
    assert kb.walk_graph("Product Council — 2026-03-04", max_hops=1, edge_types=["nope"]).edges == []
    assert kb.get_fact("chunk_count") > 0
    assert kb.get_fact("live_version") == "v000001"
    with pytest.raises(NotFoundError, match="facts: artifact_count"):
        kb.get_fact("nope")


def test_limits_are_checked(kb: Knowledge) -> None:
    with pytest.raises(LimitError, match="1-2,000"):
        run(kb.search_source(""))
    with pytest.raises(LimitError, match="top_k must be an integer from 1 to 100"):
        run(kb.search_source("x", top_k=0))
    with pytest.raises(LimitError, match="max_hops"):
        kb.walk_graph("Remote Work Policy", max_hops=5)
    with pytest.raises(NotFoundError, match="not in this turn's scope"):
        kb.outline_knowledge(context="other")


def test_final_is_a_base_exception_with_checked_evidence(kb: Knowledge) -> None:
    hits = run(kb.search_source("revenue 2025", top_k=2))
    with pytest.raises(FinalAnswer) as info:
        try:
            kb.final("Revenue was $48.2 million.", evidence=[hits[0], hits[1].ref or ""])
        except Exception:  # model code that swallows everything must not stop final()
            pytest.fail("final() was swallowed")
    assert info.value.evidence == [hits[0].ref, hits[1].ref]
    with pytest.raises(LimitError):
        kb.final("x", evidence=["E999"])


def test_two_contexts_merge_and_name_their_context(version_dir: Path, tmp_path: Path) -> None:
    copy = tmp_path / "v000001"
    shutil.copytree(version_dir, copy)
    kb = Knowledge([ScopedContext("acme", version_dir), ScopedContext("acme-copy", copy)])
    hits = run(kb.search_source("ERR-4012 configuration", top_k=6))
    assert {h.context for h in hits} == {"acme", "acme-copy"}
    with pytest.raises(AmbiguousError, match="pass context="):
        kb.read_artifact("Remote Work Policy")
    assert kb.read_artifact("Remote Work Policy", context="acme-copy").context == "acme-copy"
    joined = kb.query_db("SELECT count(*) AS n FROM product a JOIN acme_copy.product b USING (sku)")
    assert joined[0]["n"] == 10
    assert kb.get_fact("source_count") == {"acme": 21, "acme-copy": 21}


@pytest.mark.parametrize("slow", [0, 1])
def test_labels_follow_issue_order_not_completion_order(version_dir: Path, slow: int) -> None:
    """Searches awaited together get their labels in the order the code issued them, whichever
    finishes first, so a replay hands out the same labels (issue 22, item 3)."""
    kb = Knowledge([ScopedContext("acme", version_dir)])
    reader = kb._contexts["acme"].reader
    search = reader.search
    queries = ["remote work days per week", "expense report deadline"]

    def delayed(query: str, *args: object, **kwargs: object) -> object:
        if query == queries[slow]:  # this one's index work finishes last
            import time

            time.sleep(0.3)
        return search(query, *args, **kwargs)  # type: ignore[arg-type]

    reader.search = delayed  # type: ignore[method-assign,assignment]

    async def both() -> list[list[Hit]]:
        return list(await asyncio.gather(*(kb.search_source(q, top_k=3) for q in queries)))

    first, second = asyncio.run(both())
    assert [h.ref for h in first] == ["E1", "E2", "E3"]
    assert all(int(str(h.ref)[1:]) >= 4 for h in second if h.ref not in {f.ref for f in first})
