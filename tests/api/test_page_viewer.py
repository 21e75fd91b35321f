"""The page viewer's reads over the sample corpus: a page's text, a PDF page as an image, and the boxes
of a span computed from the text layer (issue 14, item 5), with the errors a bad request gets."""

from __future__ import annotations

import io
from pathlib import Path

import httpx
from PIL import Image

from sleuth.store.version.page_images import MAX_IMAGE_PIXELS, MAX_IMAGE_WIDTH
from tests.api.support import error, upload, wait_task
from tests.support import contents_page, tall_page

REPORT = "uploads/acme-corpus/reports/annual-report-2025.pdf"


def test_text_image_and_boxes_of_a_cited_span(client: httpx.Client) -> None:
    page = client.get(f"/api/contexts/acme/pages/{REPORT}", params={"page": 2}).json()
    text = page["text"]
    assert page["pdf"] is True and "pharmaceutical production" in text
    start = text.index("laboratories,")
    end = text.index("pilot plants.") + len("pilot plants.")
    assert "\n" in text[start:end]  # the span crosses a line break
    boxes = client.get(
        f"/api/contexts/acme/pages/{REPORT}/boxes", params={"page": 2, "start": start, "end": end}
    )
    assert boxes.status_code == 200, boxes.text
    found = boxes.json()
    assert found["current"] is True and found["text"] == text[start:end]
    assert len(found["boxes"]) == 2  # one per line
    first, second = found["boxes"]
    assert second["y"] > first["y"]  # the second line is lower on the page
    for box in found["boxes"]:
        assert 0 < box["x"] < found["width"] and 0 < box["y"] < found["height"]
        assert box["width"] > 20 and 5 < box["height"] < 30
    image = client.get(f"/api/contexts/acme/pages/{REPORT}/image", params={"page": 2, "width": 600})
    assert image.status_code == 200 and image.headers["content-type"] == "image/png"
    assert image.content.startswith(b"\x89PNG\r\n\x1a\n")
    assert int.from_bytes(image.content[16:20], "big") == 600  # the IHDR width


def test_bad_page_requests_get_the_envelope(client: httpx.Client) -> None:
    markdown = "uploads/acme-corpus/policies/travel-policy.md"
    text = client.get(f"/api/contexts/acme/pages/{markdown}", params={"page": 1}).json()
    assert text["pdf"] is False and text["text"]
    error(client.get(f"/api/contexts/acme/pages/{markdown}/image", params={"page": 1}), 415, "not_a_pdf")
    error(client.get(f"/api/contexts/acme/pages/{REPORT}", params={"page": 99}), 404, "page_not_found")
    for outside in ("etc/passwd", "uploads/..%2f..%2f..%2fetc%2fpasswd"):  # a key lookup, never a join
        error(client.get(f"/api/contexts/acme/pages/{outside}", params={"page": 1}), 404, "path_not_found")
    size = len(client.get(f"/api/contexts/acme/pages/{REPORT}", params={"page": 2}).json()["text"])
    # Each bad span names the offset at fault: a start past the page is start's, not end's.
    for start, end, field in ((5, 5, "end"), (9, 4, "end"), (0, size + 1, "end"), (size, size, "start")):
        spans = {"page": 2, "start": start, "end": end}
        body = error(
            client.get(f"/api/contexts/acme/pages/{REPORT}/boxes", params=spans), 400, "invalid_request"
        )
        assert body["field"] == field and field in body["message"], (start, end, body)
    bad_page = client.get(
        f"/api/contexts/acme/pages/{REPORT}/boxes", params={"page": 0, "start": 0, "end": 1}
    )
    assert error(bad_page, 400, "invalid_request")["field"] == "page"
    assert client.get(f"/api/contexts/acme/pages/{REPORT}").status_code == 400  # page is required


def test_a_page_lists_its_chunks_and_the_artifacts_that_cite_it(client: httpx.Client) -> None:
    handbook = "uploads/acme-corpus/handbook/employee-handbook.docx"
    page = client.get(f"/api/contexts/acme/pages/{handbook}", params={"page": 1}).json()
    text = page["text"]
    assert page["pages"] == 1 and page["chunks"] and page["artifacts"]
    starts = [c["start"] for c in page["chunks"]]
    assert starts == sorted(starts) and starts[0] == 0  # in page order, from the page's first character
    for chunk in page["chunks"]:
        assert 0 <= chunk["start"] < chunk["end"] <= len(text) and chunk["tokens"] > 0
    for artifact in page["artifacts"]:  # every quote is the page's own text at its offsets
        assert text[artifact["start"] : artifact["end"]] == artifact["quote"]
        read = client.get(f"/api/contexts/acme/knowledge/read/{artifact['file']}")
        assert read.status_code == 200 and artifact["id"] in read.text
    assert {"Document", "Defined Terms"} <= {a["type"] for a in page["artifacts"]}
    report = client.get(f"/api/contexts/acme/pages/{REPORT}", params={"page": 2}).json()
    assert report["pages"] >= 2 and report["chunks"]
    assert report["label"] == "2" and page["label"] is None  # "Page 2 of 4" printed; Markdown prints none
    assert all(a["type"] != "Defined Terms" for a in report["artifacts"])  # only what cites this page


def test_a_tall_page_and_a_contents_page_cost_little(
    client: httpx.Client, context: str, tmp_path: Path
) -> None:
    """Issue 22, items 6 and 7 over HTTP: a 100 × 14,400 pt page asked 3,000 px wide comes back within
    `MAX_IMAGE_PIXELS` (it was 3000 × 432,000 px and 9 GB of server memory), and the boxes of a line on
    a 10,000-character contents page of leader dots are that line's (difflib took 165 CPU s on it)."""
    for name, pdf in (("tall.pdf", tall_page), ("contents.pdf", contents_page)):
        assert upload(client, context, name, pdf(tmp_path / name).read_bytes()).status_code == 200
    started = client.post(f"/api/contexts/{context}/curate", json={"scope": "all"})
    assert started.status_code == 200, started.text
    assert wait_task(client, started.json()["task_id"])["state"] == "completed"
    base = f"/api/contexts/{context}/pages/uploads"
    image = client.get(f"{base}/tall.pdf/image", params={"page": 1, "width": MAX_IMAGE_WIDTH})
    assert image.status_code == 200 and image.headers["content-type"] == "image/png"
    with Image.open(io.BytesIO(image.content)) as png:
        width, height = png.size
    assert width * height <= MAX_IMAGE_PIXELS and height > 100 * width
    text = client.get(f"{base}/contents.pdf", params={"page": 1}).json()["text"]
    line = text.splitlines()[-5]
    start = text.index(line)
    boxes = client.get(
        f"{base}/contents.pdf/boxes", params={"page": 1, "start": start, "end": start + len(line)}
    ).json()
    assert boxes["current"] is True and boxes["text"] == line and len(boxes["boxes"]) == 1
    assert boxes["boxes"][0]["y"] > 0.9 * boxes["height"] - 100  # near the bottom, where the line is
