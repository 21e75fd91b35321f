"""One page span: every record that says where something is extends `PageSpan`, and provenance keeps
its on-disk form (`source`, not `source_path`)."""

from __future__ import annotations

import dataclasses

import pytest

from sleuth.agent.spans import EvidenceSpan
from sleuth.format.chunks import Chunk
from sleuth.format.spans import PageSpan, Provenance
from sleuth.sdk.types import Span
from sleuth.store.version.search import SearchHit

PAGE = "Refund policy. Customers may return items within 30 days."


@pytest.mark.parametrize("record", [Chunk, SearchHit, Span, EvidenceSpan, Provenance])
def test_every_location_record_is_a_page_span(record: type[PageSpan]) -> None:
    assert issubclass(record, PageSpan)
    names = [f.name for f in dataclasses.fields(record)]
    assert names[:4] == ["source_path", "page", "start", "end"]


def test_provenance_quotes_the_page_and_keeps_its_disk_form() -> None:
    start = PAGE.index("Customers")
    at = Provenance.of("uploads/refunds.md", 1, PAGE, start, len(PAGE))
    assert at.quote == PAGE[start:] and at.where == f"uploads/refunds.md p.1 [{start}:{len(PAGE)}]"
    stored = at.to_json()
    assert stored == {
        "source": "uploads/refunds.md",
        "page": 1,
        "start": start,
        "end": len(PAGE),
        "quote": at.quote,
    }
    assert Provenance.from_json(stored) == at


def test_a_windowed_copy_of_evidence_shares_its_sighting() -> None:
    span = EvidenceSpan(ref="E1", context="kb", source_path="a.md", page=1, start=0, end=len(PAGE), text=PAGE)
    cut = dataclasses.replace(span, start=15, text=PAGE[15:])
    span.sighting.seen, span.sighting.order = True, 3
    assert cut.seen and cut.seen_order == 3 and cut.key != span.key
    assert span.to_json()["seen"] is True and "sighting" not in span.to_json()
