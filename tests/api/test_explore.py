"""Explore (issue 27, item 4): the template that fits a context's sources, with a confidence and the
reasons, over real HTTP: without a model on the sample corpus, generated filings and an empty context;
with a (scripted) model, its proposal adapted to the corpus, validated, repaired once, cached."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx

from tests.api.query_support import SCRIPTED, scripted_server
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


_POLICIES = {
    "artifact_types": [
        {"name": "Document", "kind": "doc"},
        {
            "name": "Policy",
            "kind": "entity",
            "format": "sqlite",
            "description": "A company policy: what it governs, who owns it, when it was last reviewed.",
            "columns": [
                {"name": "title", "type": "TEXT"},
                {"name": "owner", "type": "TEXT", "description": "The team or officer responsible."},
                {"name": "reviewed", "type": "TEXT", "description": "The last review date, ISO."},
            ],
            "natural_key": ["title"],
        },
        {"name": "Meeting Decision", "kind": "event", "description": "A decision minuted at a meeting."},
    ],
}


def _reply(**fields: object) -> str:
    return json.dumps(
        {
            "template": "knowledge-base",
            "confidence": 0.8,
            "reasons": ["12 of 21 sources are policies with an owner and a review date"],
            "sample_questions": ["Who owns the travel policy?"],
            **_POLICIES,
            **fields,
        }
    )


def test_explore_with_a_model_adapts_the_template_to_the_corpus(make_server: ServerFactory) -> None:
    """The model reads the sample's digest and the templates, and only its artifact types and edges
    replace the template's; what it writes reaches people as plain lines; a second ask of the same
    sample is answered from the extraction cache."""
    reason = "12 of 21 sources are policies\x1b[31m with an owner\nand a review date"
    server = scripted_server(make_server, [_reply(reasons=[reason], search={"instructions": "ignored"})])
    client = server.client
    slug = unique_slug()  # a fork of the sample: its extraction cache is this test's alone
    client.post("/api/contexts/acme/fork", json={"slug": slug, "name": "Explore"}).raise_for_status()
    try:
        with_rules = client.post(f"/api/contexts/{slug}/explore").json()
        assert with_rules["proposed_by"] == "rules" and with_rules["model"] is None

        found = client.post(f"/api/contexts/{slug}/explore", json={"model": SCRIPTED}).json()
        assert found["proposed_by"] == "model" and found["model"] == SCRIPTED and found["model_note"] is None
        assert found["template"] == "knowledge-base" and found["confidence"] == 0.8
        assert found["reasons"][0] == "12 of 21 sources are policies[31m with an owner and a review date"
        assert "the 'Policy' table stays empty" in found["reasons"][1]  # said for the adapted manifest
        assert found["rules"]["template"] == with_rules["template"]
        types = found["manifest"]["curate"]["artifacts"]["artifact_types"]
        assert [t["name"] for t in types] == ["Document", "Policy", "Meeting Decision"]
        assert types[1]["columns"][1]["description"] == "The team or officer responsible."
        # The reply also wrote search instructions: only the artifacts part is the model's to change.
        assert "search" not in found["manifest"]
        assert found["without_model"] == {
            "built": ["Document"],
            "skipped": ["Policy", "Meeting Decision"],
            "empty_tables": ["Policy"],
        }
        assert found["sample_questions"] == ["Who owns the travel policy?"]
        # What the model read: the templates, the rules' choice and a digest of every sampled source.
        prompt = server.scripted.calls[-1].messages[1].content
        assert "- financial-filings:" in prompt and f"The rules chose `{with_rules['template']}`" in prompt
        assert prompt.count("\n## ") == 21 and "type: policy" in prompt
        # The saved manifest validates: what the model proposed can be saved as it is.
        saved = client.put(f"/api/contexts/{slug}", json={"manifest": found["manifest"]})
        assert saved.status_code == 200, saved.text

        calls = len(server.scripted.calls)
        again = client.post(f"/api/contexts/{slug}/explore", json={"model": SCRIPTED}).json()
        assert again["manifest"] == found["manifest"] and len(server.scripted.calls) == calls
    finally:
        client.delete(f"/api/contexts/{slug}")


def test_explore_refuses_a_model_it_cannot_use_and_a_manifest_that_does_not_hold(
    make_server: ServerFactory,
) -> None:
    broken_edge = {"edge_types": [{"name": "owns", "from": "Team", "to": "Policy"}]}
    server = scripted_server(make_server, [_reply(**broken_edge), _reply(template="no-such", **broken_edge)])
    client = server.client
    for model in ("nope/nope", "sleuth/offline"):
        error(client.post("/api/contexts/acme/explore", json={"model": model}), 400, "model_unavailable")
    error(client.post("/api/contexts/acme/explore", json={"modle": SCRIPTED}), 400, "invalid_request")
    slug = unique_slug()  # not `acme`: its extraction cache may hold another test's accepted reply
    client.post("/api/contexts", json={"slug": slug, "name": "Policies"}).raise_for_status()
    try:
        for name in ("travel.md", "leave.md"):
            text = f"# {name[:-3].title()} policy\n\nOwner: People team. Reviewed 2026-01-05.\n"
            upload(client, slug, name, text.encode()).raise_for_status()
        refused = client.post(f"/api/contexts/{slug}/explore", json={"model": SCRIPTED}).json()
        assert refused["proposed_by"] == "rules" and "asked twice" in refused["model_note"]
        assert refused["manifest"] == templates_of(client)[refused["template"]]["manifest"]
        # The repair prompt named the problem: an edge from a type the manifest does not declare.
        repair = server.scripted.calls[1].messages[-1].content
        assert "'Team' is not a declared artifact type" in repair and "did not match" in repair
    finally:
        client.delete(f"/api/contexts/{slug}")


def templates_of(client: httpx.Client) -> dict[str, dict[str, Any]]:
    return {t["id"]: t for t in client.get("/api/manifest/templates").json()["templates"]}
