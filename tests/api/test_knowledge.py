"""An artifact file read with its front matter parsed (`GET …/knowledge/artifact/{path}`), over the sample
corpus: what the console shows for an artifact without a YAML parser of its own."""

from __future__ import annotations

import httpx

from tests.api.support import error


def test_an_artifact_file_with_its_front_matter_as_json(client: httpx.Client) -> None:
    outline = client.get("/api/contexts/acme/knowledge/read/outline.json").json()["artifacts"]
    glossary = next(a for a in outline if a["kind"] == "glossary")
    read = client.get(f"/api/contexts/acme/knowledge/artifact/{glossary['file']}")
    assert read.status_code == 200, read.text
    art = read.json()
    front = art["front_matter"]
    assert front["id"] == glossary["id"] and front["kind"] == "glossary" and not art["body"].startswith("---")
    raw = client.get(f"/api/contexts/acme/knowledge/read/{glossary['file']}").text
    assert raw.endswith(art["body"])  # the body is the file after its front matter
    for at in front["provenance"]:  # each quote is its page's own text
        page = client.get(f"/api/contexts/acme/pages/{at['source']}", params={"page": at["page"]}).json()
        assert page["text"][at["start"] : at["end"]] == at["quote"]
    error(client.get("/api/contexts/acme/knowledge/artifact/outline.json"), 400, "invalid_request")
    climb = client.get("/api/contexts/acme/knowledge/artifact/%2E%2E/%2E%2E/%2E%2E/%2E%2E/etc/passwd.md")
    assert climb.status_code in (400, 404) and "root:" not in climb.text  # encoded, so the route sees it
    error(client.get("/api/contexts/acme/knowledge/artifact/artifacts/none.md"), 404, "path_not_found")
