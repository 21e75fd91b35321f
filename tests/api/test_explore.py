"""Explore (issue 27, item 4): without a model, the template that fits a context's sources, with a
confidence and the reasons, over real HTTP: the sample corpus, generated filings, and an empty
context."""

from __future__ import annotations

from pathlib import Path

from tests.api.support import ServerFactory, error, unique_slug, upload


def test_explore_proposes_a_template_with_its_reasons(make_server: ServerFactory, filings: Path) -> None:
    client = make_server().client
    templates = {t["id"]: t for t in client.get("/api/manifest/templates").json()["templates"]}

    sample = client.post("/api/contexts/acme/explore").json()
    assert sample["template"] in templates and sample["manifest"] == templates[sample["template"]]["manifest"]
    assert sample["total"] == sample["sampled"] == 21 and 0 <= sample["confidence"] <= 1
    assert sample["reasons"][0] == "read 21 of 21 sources" and any(
        "document types" in r for r in sample["reasons"]
    )
    assert sample["template"] != "financial-filings"  # one annual report among policies, minutes and specs

    slug = unique_slug()
    client.post("/api/contexts", json={"slug": slug, "name": "Filings"}).raise_for_status()
    try:
        error(client.post(f"/api/contexts/{slug}/explore"), 409, "no_sources")
        for pdf in sorted(filings.glob("*.pdf")):
            upload(client, slug, pdf.name, pdf.read_bytes()).raise_for_status()
        proposal = client.post(f"/api/contexts/{slug}/explore").json()
        assert proposal["template"] == "financial-filings" and proposal["label"] == "Financial filings"
        assert "document types: annual report ×3" in proposal["reasons"]
        assert proposal["confidence"] >= 0.5 and proposal["found"]["annual report"] == 3
        assert proposal["without_model"]["skipped"] == ["Reported Figure", "Segment"]
    finally:
        client.delete(f"/api/contexts/{slug}")
