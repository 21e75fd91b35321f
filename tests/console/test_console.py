"""The web console in a real headless Chromium (Debian's, driven by Playwright) against a real server on
127.0.0.1 over the sample corpus: ask → watch the steps arrive → hover a citation → open it on its page
→ the highlighted text equals the citation's grounding, for a Markdown page (the marked text) and a
PDF page (the boxes drawn from the text layer). With `SLEUTH_SCREENSHOTS=<folder>` set, screenshots of
each view at 1280×800 and 390×844 are kept there for a person to look at (none otherwise: they assert
nothing, and each full-page shot costs the suite time)."""

from __future__ import annotations

import json
import os
import re
import shutil
import time
import zipfile
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Literal

import pytest
from axe_playwright_python.sync_playwright import Axe  # type: ignore[import-untyped]
from playwright.sync_api import Browser, FloatRect, Page, sync_playwright
from playwright.sync_api import TimeoutError as PlaywrightTimeoutError

from sleuth.compile.pipeline import CompileReport
from sleuth.models.base import ModelConfig
from sleuth.sandbox import SandboxHost
from sleuth.store.contexts.home import Home
from sleuth.store.records.keys import KeyStore
from tests.api.query_support import REMOTE_REPLIES, SCRIPTED, SLOW_STEP
from tests.api.support import LiveServer, launch, make_zip, upload, wait_task

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
SHOTS = Path(os.environ["SLEUTH_SCREENSHOTS"]) if os.environ.get("SLEUTH_SCREENSHOTS") else None
SIZES = {"laptop": (1280, 800), "phone": (390, 844)}
HOTEL = "What is the hotel limit per night when travelling?"
REPORT = "uploads/acme-corpus/reports/annual-report-2025.pdf"


@pytest.fixture(scope="module")
def server(
    sample_home: tuple[Home, CompileReport], tmp_path_factory: pytest.TempPathFactory
) -> Iterator[LiveServer]:
    home, _ = sample_home
    with SandboxHost() as host:
        live, stop = launch(home, host, tmp_path_factory.mktemp("console"))
        try:
            yield live
        finally:
            stop()


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    if not Path(CHROMIUM).exists():
        pytest.fail("Debian's chromium is needed for the console tests: `make test` installs it (apt)")
    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=CHROMIUM, headless=True, args=["--no-sandbox"])
        yield launched
        launched.close()


def _page(browser: Browser, size: str) -> tuple[Page, list[str]]:
    width, height = SIZES[size]
    page = browser.new_page(viewport={"width": width, "height": height})
    errors: list[str] = []
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    page.on("pageerror", lambda e: errors.append(str(e)))
    return page, errors


def _until(page: Page, expression: str, timeout: float = 30_000) -> None:
    """Poll a JavaScript expression until it is true. Playwright's `wait_for_function` polls with
    `new Function`, which the console's CSP (no `unsafe-eval`) refuses; `evaluate` runs over CDP."""
    deadline = time.monotonic() + timeout / 1000
    while not page.evaluate(expression):
        if time.monotonic() > deadline:
            pytest.fail(f"timed out waiting for: {expression}")
        page.wait_for_timeout(100)


def _open_options(page: Page) -> None:
    """Unfold the Ask form's options once the view has settled. The context list and the model list
    arrive after the form is drawn and push it down; a click aimed while they land can miss the
    summary on a loaded machine (the options then stayed folded for 30 s), so both are awaited first
    and the click is made again while they are still folded."""
    page.locator("#ctx-acme").wait_for(state="attached")
    page.locator("#model option").first.wait_for(state="attached")
    summary = page.get_by_text("options", exact=True)
    for _ in range(3):
        if not page.locator("details.options").evaluate("details => details.open"):
            summary.click()
        try:
            page.locator("details.options[open] #model").wait_for(state="visible", timeout=5_000)
            return
        except PlaywrightTimeoutError:
            continue
    page.locator("details.options[open] #model").wait_for(state="visible")


def _shot(page: Page, name: str, size: str, part: str | None = None) -> None:
    """Keep a screenshot of the page (or of its element `part`) when `SLEUTH_SCREENSHOTS` names a folder."""
    if SHOTS is None:
        return
    SHOTS.mkdir(parents=True, exist_ok=True)
    path = str(SHOTS / f"{name}-{size}.png")
    if part is None:
        page.screenshot(path=path, full_page=True)
    else:
        page.locator(part).screenshot(path=path)


@pytest.mark.parametrize("size", list(SIZES))
def test_ask_watch_the_steps_and_open_a_citation_on_its_page(
    server: LiveServer, browser: Browser, size: str
) -> None:
    page, errors = _page(browser, size)
    page.goto(server.url + "/")
    page.get_by_role("link", name="acme").wait_for()
    _shot(page, "contexts", size)
    page.goto(server.url + "/#/ask?ctx=acme")
    page.fill("#ask", HOTEL)
    page.get_by_role("button", name="Ask").click()
    page.locator(".step").first.wait_for(state="attached")  # a step arrives (folded once answered)
    cite = page.locator("a.cite").first
    cite.wait_for(timeout=60_000)
    assert page.locator(".step.completed").count() >= 1
    assert "$220 per night" in page.locator(".answer").inner_text()
    # an answer without a model says how sure it is (issue 45)
    assert page.locator("p.assurance").inner_text().startswith("How sure: ")
    cite.hover()
    popover = page.locator("#popover")
    popover.wait_for()
    grounding = page.locator("ol.citations q").first.inner_text()
    assert grounding and grounding in popover.inner_text()
    _shot(page, "answer", size)
    cite.click()
    page.locator("#span").wait_for()
    assert page.locator("mark#span").inner_text() == grounding  # the marked text is the quote
    _shot(page, "page-text", size)
    assert errors == []
    page.close()


def test_a_pdf_citation_is_boxed_on_the_page_image(server: LiveServer, browser: Browser) -> None:
    text = server.client.get(f"/api/contexts/acme/pages/{REPORT}", params={"page": 2}).json()["text"]
    start = text.index("laboratories,")
    end = text.index("pilot plants.") + len("pilot plants.")
    for size in SIZES:
        page, errors = _page(browser, size)
        page.goto(f"{server.url}/#/page?ctx=acme&path={REPORT}&page=2&start={start}&end={end}")
        page.locator(".page-image .box").first.wait_for()
        boxes = page.locator(".page-image .box")
        assert boxes.count() == 2  # two lines
        assert boxes.first.get_attribute("data-text") == text[start:end]
        assert page.locator("q#span").inner_text() == text[start:end]
        image = page.locator(".page-image img").bounding_box()
        box = boxes.first.bounding_box()
        assert image is not None and box is not None
        assert image["x"] <= box["x"] and box["x"] + box["width"] <= image["x"] + image["width"] + 1
        _shot(page, "page-pdf", size)
        page.get_by_role("link", name="next →").click()
        _until(page, "location.hash.includes('page=3')")
        assert errors == []
        page.close()


def test_a_failed_request_shows_its_error_and_the_ui_stays_usable(
    server: LiveServer, browser: Browser
) -> None:
    page, errors = _page(browser, "laptop")
    page.goto(server.url + "/#/ask?ctx=no-such-context")
    page.fill("#ask", HOTEL)
    page.get_by_role("button", name="Ask").click()
    alert = page.get_by_role("alert")
    alert.wait_for()
    assert alert.get_attribute("data-code") == "context_not_found"  # the code for machines,
    assert (
        "no-such-context" in alert.inner_text() and "context_not_found" not in alert.inner_text()
    )  # a sentence
    _until(page, "!document.querySelector('form.ask button[type=submit]').disabled")
    page.get_by_role("link", name="Contexts").click()
    page.get_by_role("link", name="acme").wait_for()
    assert [e for e in errors if "404" not in e] == []  # the failed fetch itself is logged by Chromium
    page.close()


def test_with_auth_the_console_signs_in_and_keeps_only_the_token(
    sample_home: tuple[Home, CompileReport], tmp_path: Path, browser: Browser
) -> None:
    home, _ = sample_home
    with SandboxHost() as host:
        secured, stop = launch(home, host, tmp_path, auth=True)
        try:
            _, secret = KeyStore.for_db(secured.state.db).create("browser", "admin")
            page, errors = _page(browser, "laptop")
            page.goto(secured.url + "/")
            page.locator("#key").wait_for()  # refused without a key: the sign-in form
            page.fill("#key", "slk_wrong")
            page.get_by_role("button", name="Sign in").click()
            assert page.get_by_role("alert").get_attribute("data-code") == "unauthenticated"
            page.fill("#key", secret)
            page.get_by_role("button", name="Sign in").click()
            page.get_by_role("link", name="acme").wait_for()
            token = page.evaluate("sessionStorage.getItem('sleuth.token')")
            stored = page.evaluate("JSON.stringify({...sessionStorage, ...localStorage})")
            assert (
                token and token.startswith("slt_") and secret not in stored and secret not in page.content()
            )
            report = "uploads/acme-corpus/reports/annual-report-2025.pdf"
            page.goto(f"{secured.url}/#/page?ctx=acme&path={report}&page=2")
            page.locator(".page-image img").wait_for()  # the image is fetched with the token
            width = page.evaluate("document.querySelector('.page-image img').naturalWidth")
            assert abs(width - 1400) <= 2  # the width asked for (pdfium rounds the scale)
            _shot(page, "signed-in-page", "laptop")
            # Who is signed in, and Sign out: the token ends on the server, the sign-in form returns.
            assert " ".join(page.locator("#who").inner_text().split()) == "signed in as browser Sign out"
            page.get_by_role("button", name="Sign out").click()
            page.locator("#key").wait_for()
            assert page.evaluate("sessionStorage.getItem('sleuth.token')") is None
            dead = secured.client.get("/api/auth", headers={"Authorization": f"Bearer {token}"})
            assert dead.status_code == 401
            assert page.locator("#who").is_hidden()
            assert [e for e in errors if "401" not in e] == []
            page.close()
        finally:
            stop()


def test_follow_up_feedback_trace_and_replay(server: LiveServer, browser: Browser) -> None:
    page, errors = _page(browser, "laptop")
    page.goto(server.url + "/#/ask?ctx=acme")
    page.fill("#ask", HOTEL)
    page.get_by_role("button", name="Ask").click()
    page.locator("footer.turn").wait_for(timeout=60_000)
    assert page.locator("#follow").is_checked() and "ses_" in page.locator("#follow-label").inner_text()
    session = page.locator("#follow-label").inner_text().rsplit(" ", 1)[-1]
    page.fill("#ask", "How many days a week can employees work remotely?")
    page.get_by_role("button", name="Ask").click()
    _until(page, "document.querySelector('.answer')?.innerText.includes('three days')", timeout=60_000)
    turns = server.client.get(f"/api/sessions/{session}").json()["queries"]
    assert len(turns) == 2  # the follow-up ran in the same session
    page.locator("section.history tbody tr").nth(1).wait_for()  # both turns listed with their status
    page.fill("footer.turn input.comment", "Clear and cited.")
    page.get_by_role("button", name="good answer").click()
    page.get_by_text("thanks, noted").wait_for()
    assert page.get_by_role("button", name="good answer").get_attribute("aria-pressed") == "true"
    query_id = turns[-1]["id"]
    feedback = server.client.get(f"/api/queries/{query_id}").json()["feedback"]
    assert feedback["rating"] == "up" and feedback["comment"] == "Clear and cited."
    page.locator("footer.turn").get_by_role("link", name="trace").click()
    page.locator("table.evidence tr.cited").first.wait_for()  # the evidence the answer cites is marked
    assert "null" not in page.locator("main").inner_text()
    why = page.locator("details.ranked").first  # a search's first hits and what ranked them (issue 44)
    why.locator("summary").click()
    assert re.search(r"p\.\d+ · \d\.\d{3} \(\w+ [+-]\d", why.inner_text()), why.inner_text()
    assert "ranked:" not in page.locator("main").inner_text()
    _shot(page, "trace", "laptop")
    page.get_by_role("button", name="Replay").click()
    _until(
        page,
        "!['', 'Replaying…'].includes(document.getElementById('replay-result').innerText)",
        timeout=60_000,
    )
    outcome = page.locator("#replay-result").inner_text()
    assert outcome.startswith("identical"), outcome
    page.goto(f"{server.url}/#/sessions?s={session}")  # later: continue the session from its page
    page.get_by_role("link", name="Continue this session").click()
    page.locator("section.history tbody tr").nth(1).wait_for()
    assert page.locator("#model").is_disabled() and page.locator("#ctx-acme").is_disabled()  # pinned
    page.fill("#ask", "Where do visitors park?")
    page.get_by_role("button", name="Ask").click()
    page.locator("section.history tbody tr").nth(2).wait_for(timeout=60_000)
    assert len(server.client.get(f"/api/sessions/{session}").json()["queries"]) == 3
    assert errors == []
    page.close()


def test_create_upload_curate_then_ask(server: LiveServer, browser: Browser, tmp_path: Path) -> None:
    note = tmp_path / "parking.md"
    note.write_text("# Parking\n\nVisitors park in bay 7 behind the Boston office, for at most four hours.\n")
    broken = tmp_path / "broken.pdf"
    broken.write_bytes(b"%PDF-1.4 not really a pdf")
    page, errors = _page(browser, "laptop")
    page.goto(server.url + "/")
    page.fill("#new-slug", "parking-test")
    page.fill("#new-name", "Parking")
    page.get_by_role("button", name="Create").click()
    page.locator("#files").wait_for(state="attached")
    page.set_input_files("#files", [str(note), str(broken)])
    page.get_by_role("cell", name="uploads/broken.pdf", exact=True).wait_for()  # both uploaded, then listed
    assert page.locator("ul.uploads li", has_text="uploaded").count() == 2
    assert page.get_by_role("cell", name="uploads/parking.md", exact=True).is_visible()
    page.get_by_role("button", name="Curate").click()
    page.locator(".curate .summary").wait_for(timeout=120_000)
    summary = page.locator(".curate").inner_text()
    phases = page.locator(".curate ol.phases li")
    assert phases.count() > 1 and page.locator(".curate ol.phases li.done").count() == phases.count()
    assert "version v000001" in summary and "failed: uploads/broken.pdf (corrupt" in summary
    _shot(page, "context", "laptop")
    page.once("dialog", lambda dialog: dialog.accept())  # a delete asks first
    page.get_by_role("button", name="delete uploads/broken.pdf").click()
    page.get_by_role("cell", name="uploads/broken.pdf", exact=True).wait_for(state="detached")
    page.goto(server.url + "/#/ask?ctx=parking-test")
    page.fill("#ask", "Where do visitors park?")
    page.get_by_role("button", name="Ask").click()
    _until(page, "document.querySelector('.answer')?.innerText.includes('bay 7')", timeout=60_000)
    assert errors == []
    page.close()
    server.client.delete("/api/contexts/parking-test")


def test_browse_knowledge_and_open_an_artifacts_evidence(server: LiveServer, browser: Browser) -> None:
    page, errors = _page(browser, "laptop")
    page.goto(server.url + "/#/knowledge?ctx=acme")
    page.get_by_role("link", name="artifacts/").click()
    page.get_by_role("link", name="defined-terms/").click()
    page.locator("ul.listing a").first.click()
    page.locator("ul.evidence-links a").first.wait_for()
    # The glossary's term list rendered, not shown as Markdown source: list items with bold terms.
    assert page.locator("article.markdown li strong").count() > 3
    assert "- **" not in page.locator("article.markdown").inner_text()
    page.locator("ul.evidence-links a").first.click()
    page.locator("#span").wait_for()
    assert page.locator("mark#span").inner_text()  # the glossary entry's own span, marked on its page
    _shot(page, "knowledge", "laptop")
    page.goto(server.url + "/#/knowledge?ctx=acme&path=outline.json&file=1")  # every artifact, as a table
    page.get_by_role("link", name="Employee Handbook", exact=True).click()
    page.locator("dl.facts").wait_for()
    assert "Document" in page.locator("dl.facts").inner_text()
    quote = page.locator("ul.evidence-links q").first.inner_text()
    page.locator("ul.evidence-links a").first.click()
    page.locator("mark#span").wait_for()
    marked = " ".join(page.locator("mark#span").inner_text().split())
    assert marked.startswith(" ".join(quote.rstrip("…").split()))  # the quote, marked on its page
    # A roster is a Markdown table: shown as one; a chunk file (JSON Lines) as a table of records.
    page.goto(server.url + "/#/knowledge?ctx=acme&path=rosters/_sources.md&file=1")
    page.locator("article.markdown table tbody tr").first.wait_for()
    assert page.locator("article.markdown table tbody tr").count() == 21
    page.goto(server.url + "/#/knowledge?ctx=acme&path=chunks")
    page.locator("ul.listing li").first.wait_for()
    assert "the chunks search reads" not in page.locator("main").inner_text()  # said at the root only
    page.goto(server.url + "/#/knowledge?ctx=acme")
    page.locator("ul.listing li").first.wait_for()
    assert "the chunks search reads" in page.locator("main").inner_text()
    assert "bytes" not in page.locator("main").inner_text()  # sizes as people read them
    assert errors == []
    page.close()


def test_markdown_from_a_document_never_becomes_html(server: LiveServer, browser: Browser) -> None:
    """A document is hostile: its Markdown becomes elements built from marked's tokens, text as text.
    Raw HTML shows as text, an image as its alt text (nothing fetched), a javascript: link is no link."""
    page, errors = _page(browser, "laptop")
    page.goto(server.url + "/#/")
    page.get_by_role("link", name="acme").wait_for()
    hostile = (
        "# Title\n\n<img src=x onerror=alert(1)> and <script>alert(2)</script>\n\n"
        "[click](javascript:alert(3)) [ok](https://example.org) ![pic](http://evil.example/x.png)\n\n"
        "| a | b |\n|---|---|\n| **1** | `2` |\n"
    )
    html = page.evaluate(
        "async (text) => (await import('/console/lib/markdown.js')).markdown(text).outerHTML", hostile
    )
    assert "<img" not in html and "<script" not in html and "javascript:" not in html.split("&lt;")[0]
    assert "&lt;img src=x onerror=alert(1)&gt;" in html and "[image: pic]" in html
    assert '<a href="https://example.org"' in html and 'href="javascript' not in html
    assert "<h2>Title</h2>" in html and "<td><strong>1</strong></td>" in html and "<code>2</code>" in html
    assert errors == []
    page.close()


def test_a_bad_manifest_shows_its_field_errors(server: LiveServer, browser: Browser) -> None:
    server.client.post("/api/contexts", json={"slug": "design-test", "name": "Design"})
    try:
        page, errors = _page(browser, "laptop")
        page.goto(server.url + "/#/design?ctx=design-test")
        page.locator("#template option").nth(1).wait_for(state="attached")
        bad = json.dumps(
            {
                "curate": {
                    "chunks": {"chunking": {"target_size": 10}},
                    "artifacts": {"artifact_types": [{"kind": "doc"}]},
                }
            }
        )
        page.get_by_role("tab", name="Form").focus()
        page.keyboard.press("ArrowRight")  # the tab pattern: arrows move between the tabs
        assert page.locator("#panel-json").is_visible() and page.locator("#panel-form").is_hidden()
        page.fill("#manifest", bad)
        page.get_by_role("button", name="Save").click()
        page.locator("ul.problems li").first.wait_for()
        paths = [
            p for p in page.locator("ul.problems li").evaluate_all("els => els.map(e => e.dataset.path)")
        ]
        size_path = "curate.chunks.chunking.target_size"
        assert size_path in paths and "curate.artifacts.artifact_types[0].name" in paths
        # each problem at its field in the form: the input marked, its message right after it
        size = page.locator(f'#panel-form input[data-path="{size_path}"]')
        assert size.is_visible() and size.get_attribute("aria-invalid") == "true"
        described = size.get_attribute("aria-describedby")
        assert (
            "target_size" in page.locator(f"#{described}").inner_text()
            or page.locator(f"#{described}").inner_text()
        )
        item = page.locator('#panel-form fieldset[data-path="curate.artifacts.artifact_types[0]"]')
        assert (
            item.locator(".field-error").inner_text().startswith("name: ")
        )  # a missing field: on its parent
        # every field has its help from the manifest's JSON Schema (issue 26, item 8)
        help_text = page.locator(f'#panel-form input[data-path="{size_path}"] ~ small.help').inner_text()
        assert help_text.startswith("The chunk size to aim for")
        assert (
            page.locator("#panel-form .field").count()
            == page.locator("#panel-form .field small.help").count()
        )
        size.fill("256")  # mend it in the form: the JSON follows
        size.dispatch_event("change")
        assert size.get_attribute("aria-invalid") is None  # the mended field's error is gone at once
        assert page.locator(f'#panel-form input[data-path="{size_path}"] + .field-error').count() == 0
        chunking = "curate.chunks.chunking"
        page.get_by_role("combobox", name=f"field to add to {chunking}").select_option(
            "overlap"
        )  # the schema's
        page.get_by_role("button", name=f"add the field to {chunking}").click()
        page.locator(f'#panel-form input[data-path="{chunking}.overlap"]').fill("40")
        page.locator(f'#panel-form input[data-path="{chunking}.overlap"]').dispatch_event("change")
        kind = page.locator('#panel-form select[data-path="curate.artifacts.artifact_types[0].kind"]')
        assert kind.input_value() == "doc" and "glossary" in kind.locator("option").all_inner_texts()
        page.get_by_role("tab", name="JSON").click()
        edited = json.loads(page.input_value("#manifest"))
        assert edited["curate"]["chunks"]["chunking"] == {"target_size": 256, "overlap": 40}
        page.get_by_role("tab", name="Form").click()
        page.select_option("#template", "knowledge-base")
        # Before choosing, a template says what it is for and, with no model here, what it skips.
        about = page.locator("#template-help").inner_text()
        assert about.startswith("Notes, the concepts they discuss") and " For wikis" in about
        usable = [m["id"] for m in server.client.get("/api/models").json()["models"] if m["available"]]
        if usable == ["sleuth/offline"]:
            assert "Without a model a curate skips Note, Concept, Entity and builds Document" in about
            labels = page.locator("#template option").all_inner_texts()
            assert "Financial filings (needs a model for 2 of its types)" in labels
            assert "General documents" in labels
        page.once("dialog", lambda dialog: dialog.accept())  # the edits are not saved: it asks first
        page.get_by_role("button", name="Start from this template").click()
        page.get_by_role("tab", name="JSON").click()
        assert '"Concept"' in page.input_value("#manifest")
        page.get_by_role("tab", name="Form").click()
        assert page.locator("#panel-form .field-error").count() == 0  # a fresh document, no old problems
        page.get_by_role("button", name="Save").click()
        page.get_by_text("saved: the next curate uses it").wait_for()
        page.get_by_role("button", name="Preview a curate").click()
        page.get_by_text("no model would be called").wait_for()  # the test server maps no tier
        built = dict(
            zip(
                page.locator("table.preview td:nth-child(1)").all_inner_texts(),
                page.locator("table.preview td:nth-child(5)").all_inner_texts(),
                strict=True,
            )
        )
        assert built["Concept"] == "skipped" and "sleuth" in built.values()
        _shot(page, "design", "laptop")
        assert [e for e in errors if "400" not in e] == []  # the refused save is logged by Chromium
        page.close()
    finally:
        server.client.delete("/api/contexts/design-test")


def test_ask_options_reach_the_api(server: LiveServer, browser: Browser) -> None:
    page, errors = _page(browser, "laptop")
    page.goto(server.url + "/#/ask?ctx=acme")
    page.locator("details.options summary").click()
    page.locator("#model option").first.wait_for(state="attached")
    assert page.locator("#model").input_value() == "sleuth/offline"
    page.fill("#max-steps", "1")
    page.fill("#instructions", "Answer in one sentence.")
    page.fill("#ask", HOTEL)
    page.get_by_role("button", name="Ask").click()
    page.locator("footer.turn").wait_for(timeout=60_000)
    turn = page.locator("footer.turn a").get_attribute("href") or ""
    query = server.client.get(f"/api/queries/{turn.split('q=')[1]}").json()
    assert query["rollup"]["n_steps"] == 1  # max steps reached the API
    session = server.client.get(f"/api/sessions/{query['session_id']}").json()
    assert "one sentence" in (session.get("system_prompt") or "")
    assert page.get_by_role("button", name="Cancel").is_hidden()  # shown only while a turn runs
    assert errors == []
    page.close()


def test_pack_then_restore_into_an_empty_context(
    server: LiveServer, browser: Browser, tmp_path: Path
) -> None:
    for slug in ("pack-from", "pack-into"):
        server.client.post("/api/contexts", json={"slug": slug, "name": slug})
    try:
        server.client.post(
            "/api/contexts/pack-from/import/upload",
            files={"file": ("note.md", b"# Note\n\nBay 7 is for visitors.\n")},
        )
        page, errors = _page(browser, "laptop")
        page.goto(server.url + "/#/context?ctx=pack-from")
        with page.expect_download() as download:
            page.get_by_role("button", name="Pack", exact=True).click()
            page.locator("#pack-link").click()
        archive = tmp_path / "pack-from.context.zip"
        download.value.save_as(archive)
        page.goto(server.url + "/#/context?ctx=pack-into")
        page.set_input_files("#restore-file", str(archive))
        page.locator("#restored").wait_for(timeout=120_000)
        assert "version v000001" in page.locator("#restored").inner_text()
        page.get_by_role("cell", name="uploads/note.md", exact=True).wait_for()
        assert errors == []
        page.close()
    finally:
        for slug in ("pack-from", "pack-into"):
            server.client.delete(f"/api/contexts/{slug}")


def test_a_shaped_answer_and_the_session_list(server: LiveServer, browser: Browser) -> None:
    page, errors = _page(browser, "laptop")
    page.goto(server.url + "/#/ask?ctx=acme")
    page.locator("details.options summary").click()
    shape = {"type": "object", "properties": {"limit": {"type": "string"}}, "required": ["limit"]}
    page.fill("#shape", json.dumps(shape))
    page.fill("#ask", HOTEL)
    page.get_by_role("button", name="Ask").click()
    page.locator("pre.json").wait_for(timeout=60_000)
    assert "limit" in json.loads(page.locator("pre.json").inner_text())
    page.fill("#shape", "{not json")
    page.fill("#ask", HOTEL)
    page.get_by_role("button", name="Ask").click()
    assert "shape: not JSON" in page.get_by_role("alert").inner_text()
    # The shaped turn's session, picked by what it holds: under load, another test's late turn may
    # have made its own session the most recent one.
    sessions = server.client.get("/api/sessions", params={"limit": 50}).json()["sessions"]
    shaped = next(
        x["id"]
        for x in sessions
        if any(q.get("output_json") for q in server.client.get(f"/api/sessions/{x['id']}").json()["queries"])
    )
    page.get_by_role("link", name="Sessions").click()
    page.get_by_role("link", name=shaped).click()
    page.get_by_role("link", name="trace").first.wait_for()
    assert errors == []
    page.close()


def test_typed_tables_page_and_sort(server: LiveServer, browser: Browser) -> None:
    api = server.client.get("/api/contexts/acme/tables").json()["tables"]
    product = next(t for t in api if t["name"] == "product")
    assert product["rows"] > 0 and any(c["name"] == "price_usd" for c in product["columns"])
    bad = server.client.get("/api/contexts/acme/tables/product", params={"order": "price_usd; DROP TABLE x"})
    assert bad.status_code == 400 and bad.json()["code"] == "invalid_request"
    assert server.client.get("/api/contexts/acme/tables/sqlite_master").json()["code"] == "table_not_found"
    page, errors = _page(browser, "laptop")
    page.goto(server.url + "/#/tables?ctx=acme")
    page.get_by_role("link", name="product", exact=True).click()
    page.get_by_role("link", name="price_usd").click()
    page.locator("th[aria-sort=ascending]").wait_for()
    column = page.locator("thead th").evaluate_all("ths => ths.map(t => t.innerText.replace(/ [▲▼]$/, ''))")
    index = column.index("price_usd")
    prices = page.locator(f"tbody tr td:nth-child({index + 1})").all_inner_texts()
    values = [float(v) for v in prices if v]
    assert values == sorted(values)
    page.get_by_role("link", name="price_usd ▲").click()
    page.locator("th[aria-sort=descending]").wait_for()
    _shot(page, "table", "laptop")
    assert errors == []
    page.close()


def test_tables_filter_facet_export_and_sql(server: LiveServer, browser: Browser) -> None:
    """Issue 26, item 8: datasette-grade tables. A filter from the form and a facet's value narrow the
    rows (the URL holds them), the export downloads every filtered row as CSV, `_provenance` opens its
    quote on the page, and the SQL box runs a read-only query and shows why a write is refused."""
    page, errors = _page(browser, "laptop")
    page.goto(server.url + "/#/tables?ctx=acme&t=product")
    page.locator("table.data tbody tr").first.wait_for()
    total = server.client.get("/api/contexts/acme/tables/product").json()["total"]
    assert f"of {total}" in page.locator("nav.pager").inner_text()
    page.get_by_label("filter 1: column").select_option("price_usd")
    page.get_by_label("filter 1: comparison").select_option("gt")
    page.get_by_label("filter 1: value").fill("1000")
    page.get_by_role("button", name="Apply").click()
    _until(page, "location.hash.includes('price_usd__gt=1000')")
    expensive = server.client.get("/api/contexts/acme/tables/product", params={"price_usd__gt": 1000}).json()
    _until(page, f"/of {expensive['total']}(\\s|$)/.test(document.querySelector('nav.pager').innerText)")
    page.get_by_label("Facet by").select_option("category")
    page.locator("section.facet").wait_for()
    facet = page.locator("section.facet li a").first
    value = facet.inner_text()
    facet.click()
    _until(page, f"location.hash.includes('category={value}')")
    narrowed = server.client.get(
        "/api/contexts/acme/tables/product", params={"price_usd__gt": 1000, "category": value}
    ).json()
    _until(page, f"document.querySelectorAll('table.data tbody tr').length === {len(narrowed['rows'])}")
    _shot(page, "table-filtered", "laptop")
    with page.expect_download() as download:
        page.get_by_role("button", name="CSV").click()
    lines = Path(download.value.path()).read_text().splitlines()
    assert len(lines) == 1 + narrowed["total"] and lines[0].startswith("_row_id,sku")
    evidence = page.locator("table.data ul.spans a").first
    quote = evidence.get_attribute("title")
    evidence.click()
    page.locator("mark#span").wait_for()
    assert page.locator("mark#span").inner_text() == quote

    page.goto(server.url + "/#/tables?ctx=acme")
    page.get_by_role("heading", name="Typed tables").wait_for()
    page.fill("#sql", "SELECT category, count(*) AS n FROM product GROUP BY category ORDER BY n DESC")
    page.get_by_role("button", name="Run SQL").click()
    page.locator(".sql-result table").wait_for()
    assert page.locator(".sql-result thead th").all_inner_texts() == ["category", "n"]
    assert "sql=SELECT" in page.url  # the query is part of the link
    page.fill("#sql", "DELETE FROM product")
    page.keyboard.press("Control+Enter")
    page.locator(".sql-result [role=alert]").wait_for()
    refusal = page.locator(".sql-result [role=alert]")
    assert refusal.get_attribute("data-code") == "query_error" and "only reads" in refusal.inner_text()
    _shot(page, "tables-sql", "laptop")
    assert [e for e in errors if "status of 400" not in e] == [], errors  # the refused DELETE's 400 only
    assert len(errors) <= 1
    page.close()


def test_read_a_source_page_by_page_with_its_chunks_and_artifacts(
    server: LiveServer, browser: Browser
) -> None:
    handbook = "uploads/acme-corpus/handbook/employee-handbook.docx"
    stored = server.client.get(f"/api/contexts/acme/pages/{handbook}", params={"page": 1}).json()
    page, errors = _page(browser, "laptop")
    page.goto(server.url + "/#/context?ctx=acme")
    sample = page.locator("ul.samples a").first  # the sample questions of the last curate
    sample.wait_for()
    assert "live version v" in page.locator("section.about").inner_text()
    question = sample.inner_text()
    sample.click()
    page.locator("#ask:focus").wait_for()
    assert page.input_value("#ask") == question and page.locator("#ctx-acme").is_checked()
    page.go_back()
    page.get_by_role("link", name=handbook, exact=True).click()  # a source opens on its first page
    panel = page.get_by_role("complementary", name="On this page")
    panel.locator("ol.chunks li").first.wait_for()
    assert panel.locator("ol.chunks li").count() == len(stored["chunks"])
    assert page.locator(".chunk-start").count() == len({c["start"] for c in stored["chunks"]})
    second = stored["chunks"][1]
    panel.locator("ol.chunks a").nth(1).click()  # a chunk: its span marked on the page
    _until(page, f"location.hash.includes('start={second['start']}')")
    marked = stored["text"][second["start"] : second["end"]]
    _until(page, f"document.querySelector('mark#span')?.innerText === {json.dumps(marked)}")
    assert page.locator("mark#span").inner_text() == marked
    terms = next(a for a in stored["artifacts"] if a["type"] == "Defined Terms")
    panel.get_by_role("link", name=f"mark the quote of {terms['name']}").first.click()
    _until(page, f"location.hash.includes('start={terms['start']}')")
    # the hash moves first, then the page is marked again: wait for the new mark, not the old one
    _until(page, f"document.querySelector('mark#span')?.innerText === {json.dumps(terms['quote'])}")
    assert page.locator("mark#span").inner_text() == terms["quote"]
    assert page.get_by_role("link", name="next →").count() == 0  # a one-page document: no next page
    _shot(page, "source", "laptop")
    panel.get_by_role("link", name=f"{terms['type']} · {terms['name']}").first.click()
    page.locator("ul.evidence-links a").first.wait_for()  # the artifact itself, with its evidence
    assert errors == []
    page.close()


def test_compare_two_workflows_side_by_side_with_an_output_limit(
    server: LiveServer, browser: Browser
) -> None:
    page, errors = _page(browser, "laptop")
    page.goto(server.url + "/#/ask?ctx=acme")
    page.fill("#ask", HOTEL)
    _open_options(page)
    page.fill("#output-limit", "4000")  # sent under the `unstable` API version, which alone accepts it
    page.locator(".cmp-model").first.locator("option").first.wait_for(state="attached")
    assert "search_rag: no loop" in page.locator("#workflow-help").inner_text()  # the workflows explained
    page.get_by_label("comparison run 2: workflow").select_option("search_cc")  # one loop, one model: twins
    page.get_by_role("button", name="Compare side by side").click()
    assert "the same" in page.get_by_role("alert").inner_text()
    page.get_by_label("comparison run 2: workflow").select_option("search_rag")
    page.get_by_role("button", name="Compare side by side").click()
    _until(page, "location.hash.startsWith('#/compare')")
    done = page.locator(".turn-column[data-status=completed]")
    _until(page, "document.querySelectorAll('.turn-column[data-status=completed]').length === 2")
    headings = sorted(page.locator(".turn-column > h2").all_inner_texts())
    assert headings[0].startswith("search ·") and headings[1].startswith("search_rag ·")
    for i in range(2):
        assert "$220" in done.nth(i).locator(".answer").inner_text()
        query = server.client.get(f"/api/queries/{done.nth(i).get_attribute('data-query')}").json()
        assert query["max_tool_output_chars"] == 4000 and len(query["comparison"]) == 1
    assert "null" not in page.locator("main").inner_text()
    _shot(page, "compare", "laptop")
    done.first.get_by_role("link", name="trace").click()
    page.get_by_role("link", name="compare with the 1 other turn(s) of its comparison group").wait_for()
    assert page.locator("#turn-cost").inner_text() == "not known (no prices configured)"
    assert errors == []
    page.close()


def test_a_priced_turn_shows_its_cost_and_a_running_turn_can_be_cancelled(
    sample_home: tuple[Home, CompileReport], tmp_path: Path, browser: Browser
) -> None:
    home, _ = sample_home
    replies = [*REMOTE_REPLIES, SLOW_STEP, "never used"]
    with SandboxHost() as host:
        live, stop = launch(home, host, tmp_path, replies)
        live.state.runtime.catalog.models[SCRIPTED] = ModelConfig(
            id=SCRIPTED,
            provider="openai",
            model="scripted",
            api_key="sk-test-not-a-real-key",
            price_input_per_token=2e-6,
            price_output_per_token=8e-6,
        )
        # A provider's reply names the catalog id that answered (as the OpenAI and Anthropic adapters do).
        live.scripted.config = replace(live.scripted.config, id=SCRIPTED)
        try:
            page, errors = _page(browser, "laptop")
            page.goto(live.url + "/#/ask?ctx=acme")
            _open_options(page)
            page.locator(f"#model option[value='{SCRIPTED}']").wait_for(state="attached")
            page.select_option("#model", SCRIPTED)
            page.fill("#ask", "How many days a week can employees work remotely?")
            page.get_by_role("button", name="Ask").click()
            page.locator("footer.turn").wait_for(timeout=60_000)
            assert "three days" in page.locator(".answer").inner_text()
            page.locator("details.steps-done > summary").click()  # the answered turn's steps, folded
            assert "search_source(" in page.locator(".step .call").first.inner_text()  # call, result, ms
            assert " ms" in page.locator(".step .call").first.inner_text()
            first = page.locator("footer.turn a", has_text="trace").get_attribute("href") or ""
            query = live.client.get(f"/api/queries/{first.split('q=')[1]}").json()
            assert query["usage"]["cost_usd"] > 0
            page.uncheck("#follow")  # a new session, for the turn to cancel
            page.fill("#ask", "Wait a while, please.")
            page.get_by_role("button", name="Ask").click()
            page.locator(".step.running").wait_for(timeout=30_000)  # the slow step is under way
            page.get_by_role("button", name="Cancel").click()
            alert = page.get_by_role("alert")
            alert.wait_for(timeout=30_000)
            assert alert.inner_text().startswith("cancelled")
            _until(page, "!document.querySelector('form.ask button[type=submit]').disabled")  # usable
            page.goto(live.url + "/" + first)
            cost = page.locator("#turn-cost")
            cost.wait_for()
            assert float(cost.inner_text().lstrip("$")) == pytest.approx(query["usage"]["cost_usd"], rel=5e-3)
            assert page.locator(".steps-table td", has_text="$").count() >= 1  # steps priced too
            _shot(page, "trace-cost", "laptop")
            assert errors == []
            page.close()
        finally:
            stop()


def test_a_sentence_its_citation_does_not_support_is_marked(
    sample_home: tuple[Home, CompileReport], tmp_path: Path, browser: Browser
) -> None:
    """Issue 46: a model's "5 days a week [1]" over a span that says three loses its marker, and the
    console marks the sentence where it stands and says which fact its citation lacks."""
    home, _ = sample_home
    replies = [*REMOTE_REPLIES[:2], "Employees can work remotely 5 days a week [1]."]
    with SandboxHost() as host:
        live, stop = launch(home, host, tmp_path, replies)
        live.state.runtime.catalog.models[SCRIPTED] = ModelConfig(
            id=SCRIPTED, provider="openai", model="scripted", api_key="sk-test-not-a-real-key"
        )
        try:
            asked = live.client.post(
                "/api/query",
                json={
                    "ask": "How many days a week can employees work remotely?",
                    "scope": ["acme"],
                    "model": SCRIPTED,
                },
            ).json()
            assert asked["status"] == "completed", asked
            assert asked["citations"] == [] and asked["unsupported"][0]["missing"] == ["5"]
            page, errors = _page(browser, "laptop")
            page.goto(f"{live.url}/#/ask?ctx=acme&a={asked['id']}")
            mark = page.locator(".answer mark.unsupported")
            mark.wait_for()
            assert mark.inner_text() == "Employees can work remotely 5 days a week."
            note = page.locator(".unsupported-list").inner_text()
            assert "states 5, which what it cites does not" in note
            _shot(page, "unsupported", "laptop")
            assert errors == [], errors
            page.close()
        finally:
            stop()


def test_an_archive_upload_shows_its_import_task_and_each_member(
    server: LiveServer, browser: Browser, tmp_path: Path
) -> None:
    archive = tmp_path / "notes.zip"
    with zipfile.ZipFile(archive, "w") as zf:
        zf.writestr("notes/one.md", "# One\n\nThe first note.\n")
        zf.writestr("notes/two.md", "# Two\n\nThe second note.\n")
        zf.writestr("../escape.md", "never written")
    server.client.post("/api/contexts", json={"slug": "archive-test", "name": "Archive"})
    try:
        page, errors = _page(browser, "laptop")
        page.goto(server.url + "/#/context?ctx=archive-test")
        page.locator("#files").wait_for(state="attached")
        page.set_input_files("#files", str(archive))
        summary = page.locator("ul.uploads .import .summary")
        summary.wait_for(timeout=60_000)
        assert summary.inner_text() == "expanded: 2 extracted · 1 skipped · 0 failed"
        skipped = page.locator("ul.members li").inner_text()
        assert skipped.startswith("skipped: ../escape.md (")
        page.get_by_role("cell", name="uploads/notes/notes/two.md", exact=True).wait_for()  # under its name
        folder = tmp_path / "minutes" / "2026"
        folder.mkdir(parents=True)
        (folder / "march.md").write_text("# March\n\nThe board met.\n")
        page.set_input_files("#folder", str(tmp_path / "minutes"))  # a folder keeps its layout
        page.get_by_role("cell", name="uploads/minutes/2026/march.md", exact=True).wait_for()
        page.evaluate(  # a file dropped on the drop zone
            """() => {
              const data = new DataTransfer();
              data.items.add(new File(["# Dropped\\n\\nHere.\\n"], "dropped.md", { type: "text/markdown" }));
              const drop = new DragEvent("drop", { dataTransfer: data, bubbles: true });
              document.querySelector(".drop").dispatchEvent(drop);
            }"""
        )
        page.get_by_role("cell", name="uploads/dropped.md", exact=True).wait_for()
        _shot(page, "archive", "laptop")
        assert errors == []
        page.close()
    finally:
        server.client.delete("/api/contexts/archive-test")


def test_keyboard_only_ask_then_open_a_citation(server: LiveServer, browser: Browser) -> None:
    page, errors = _page(browser, "laptop")
    page.goto(server.url + "/#/ask?ctx=acme")
    page.locator("#ask:focus").wait_for()  # the question box has the focus
    page.keyboard.type(HOTEL)
    page.keyboard.press("Control+Enter")
    page.locator("a.cite").first.wait_for(timeout=60_000)
    for _ in range(80):  # Tab through the page until the first citation marker has the focus
        page.keyboard.press("Tab")
        if page.evaluate("document.activeElement.classList.contains('cite')"):
            break
    else:
        pytest.fail("no citation marker is reachable with Tab")
    popover = page.locator("#popover")
    assert popover.is_visible() and "travel-policy.md" in popover.inner_text()  # shown on focus
    page.keyboard.press("Escape")
    assert popover.is_hidden()
    page.keyboard.press("Enter")
    page.locator("mark#span").wait_for()
    assert page.locator("mark#span").inner_text() in page.locator("pre.page-text").inner_text()
    assert errors == []
    page.close()


def test_every_view_at_both_sizes_without_errors_or_sideways_scrolling(
    server: LiveServer, browser: Browser
) -> None:
    answer = server.client.post("/api/query", json={"ask": HOTEL, "scope": ["acme"]}).json()
    routes = {
        "contexts": "#/",
        "context": "#/context?ctx=acme",
        "design": "#/design?ctx=acme",
        "knowledge": "#/knowledge?ctx=acme&path=artifacts",
        "tables": "#/tables?ctx=acme",
        "table": "#/tables?ctx=acme&t=_chunks",
        "ask": "#/ask?ctx=acme",
        "sessions": "#/sessions",
        "session": f"#/sessions?s={answer['session_id']}",
        "trace": f"#/trace?q={answer['id']}",
        "source": f"#/page?ctx=acme&path={REPORT}&page=2",
    }
    sideways: list[str] = []
    for size in SIZES:
        page, errors = _page(browser, size)
        for name, route in routes.items():
            page.goto(f"{server.url}/{route}")
            _until(
                page,
                "document.querySelector('main h1') && !document.querySelector('main')"
                ".innerText.includes('Loading…')",
            )
            page.wait_for_load_state("networkidle")
            assert page.locator("main [role=alert]:not(:empty)").count() == 0, (
                name,
                page.locator("main").inner_text(),
            )
            assert "null" not in page.locator("main").inner_text().split(), name
            wide = page.evaluate("document.scrollingElement.scrollWidth - innerWidth")
            if wide > 1:
                sideways.append(f"{name} by {wide}px at {size}")
            _shot(page, f"view-{name}", size)
        assert errors == [], (size, errors)
        page.close()
    assert not sideways, "; ".join(sideways)  # wide tables scroll inside their own box, not the page


def test_every_view_passes_axe_in_light_and_dark(server: LiveServer, browser: Browser) -> None:
    """Issue 26, item 8 (keyboard and screen readers): every view, the answer with its source open
    included, passes axe-core's rules (names, roles, labels, contrast, landmarks) in the light and
    the dark scheme, at a laptop's and a phone's width."""
    asked = {"ask": "What was revenue in 2025?", "scope": ["acme"]}
    answer = server.client.post("/api/query", json=asked).json()
    routes = {
        "contexts": "#/",
        "context": "#/context?ctx=acme",
        "design": "#/design?ctx=acme",
        "knowledge": "#/knowledge?ctx=acme&path=rosters/_sources.md&file=1",
        "tables": "#/tables?ctx=acme",
        "table": "#/tables?ctx=acme&t=product&facet=category",
        "ask": "#/ask?ctx=acme",
        "answer-with-source": f"#/ask?ctx=acme&a={answer['id']}&cite=1",
        "sessions": "#/sessions",
        "trace": f"#/trace?q={answer['id']}",
        "page": f"#/page?ctx=acme&path={REPORT}&page=2",
    }
    axe = Axe()
    found: list[str] = []
    schemes: list[tuple[Literal["light", "dark"], str]] = [
        ("light", "laptop"),
        ("dark", "laptop"),
        ("light", "phone"),
    ]
    for scheme, size in schemes:
        width, height = SIZES[size]
        page = browser.new_page(viewport={"width": width, "height": height}, color_scheme=scheme)
        for name, route in routes.items():
            page.goto(f"{server.url}/{route}")
            _until(page, "document.querySelector('main h1') && !document.body.innerText.includes('Loading…')")
            page.wait_for_load_state("networkidle")
            for violation in axe.run(page).response["violations"]:
                targets = [n["target"] for n in violation["nodes"][:3]]
                rule = f"{violation['id']} ({violation['impact']})"
                found.append(f"{scheme}/{size} {name}: {rule} at {targets}")
        page.close()
    assert not found, "\n".join(found)


def test_a_strict_page_policy_and_no_dot_segments_from_a_link(server: LiveServer, browser: Browser) -> None:
    headers = server.client.get("/").headers
    policy = headers["content-security-policy"]
    assert "script-src 'self'" in policy and "frame-ancestors 'none'" in policy and "unsafe" not in policy
    assert headers["x-content-type-options"] == "nosniff" and headers["referrer-policy"] == "no-referrer"
    page, errors = _page(browser, "laptop")
    sent: list[str] = []
    page.on("request", lambda r: sent.append(r.url))
    # a shared link whose path climbs out of the knowledge tree, to aim the reader's token elsewhere
    page.goto(server.url + "/#/knowledge?ctx=acme&path=../../../sessions&file=1")
    alert = page.locator("main [role=alert]")
    alert.wait_for()
    assert "refused" in alert.inner_text()
    assert not [u for u in sent if "/api/sessions" in u]  # nothing was sent
    page.goto(
        server.url
        + "/#/page?ctx=acme&path=uploads/acme-corpus/policies/travel-policy.md&page=1&start=9&end=3"
    )
    page.locator("pre.page-text").wait_for()
    assert page.locator("mark#span").count() == 0  # a span that is not one marks nothing
    assert errors == []
    page.close()


def test_an_uploaded_page_opened_from_its_source_url_runs_nothing(
    server: LiveServer, browser: Browser
) -> None:
    """Issue 22, item 8: an uploaded HTML or SVG file read raw ran its script on the console's origin,
    which read `/api/contexts`. Now it is shown as text, in an opaque origin that can fetch nothing."""
    script = b"fetch('/api/contexts').then(r => r.text()).then(t => { document.title = 'RAN ' + t.length })"
    files = {
        "x.html": b"<html><head><title>page</title></head><body><script>"
        + script
        + b"</script></body></html>",
        "x.svg": b'<svg xmlns="http://www.w3.org/2000/svg"><script>' + script + b"</script></svg>",
    }
    server.client.post("/api/contexts", json={"slug": "raw-read-test", "name": "Raw reads"})
    sent: list[str] = []
    try:
        # In an archive, as a git or web connector would bring them: a plain upload of a kind Sleuth
        # cannot read (.svg) is refused (415), an archive's members are stored as they are.
        uploaded = upload(server.client, "raw-read-test", "raw.zip", make_zip(files))
        assert uploaded.status_code == 200, uploaded.text
        assert wait_task(server.client, uploaded.json()["task_id"])["state"] == "completed"
        for name in files:
            page, _errors = _page(browser, "laptop")
            sent.clear()
            page.on("request", lambda r: sent.append(r.url))
            page.goto(f"{server.url}/api/contexts/raw-read-test/source/read/uploads/raw/{name}")
            page.wait_for_load_state("networkidle")
            assert not [u for u in sent if u.endswith("/api/contexts")], name  # the script never ran
            assert not page.title().startswith("RAN") and "<script>" in page.inner_text("body"), name
            assert page.evaluate("self.origin") == "null"  # sandboxed: none of the console's origin
            refused = "fetch('/api/contexts').then(r => 'read ' + r.status, () => 'refused')"
            assert page.evaluate(refused) == "refused", name
            page.close()
    finally:
        server.client.delete("/api/contexts/raw-read-test")


@pytest.mark.parametrize("size", list(SIZES))
def test_the_contexts_list_names_sizes_and_deletes(server: LiveServer, browser: Browser, size: str) -> None:
    """Issue 26, item 8: the list shows each context's name with its slug beneath, how big its live
    version is (sources, pages, chunks; no `Tokens 0`), a state badge, Ask, and Delete (with a
    confirmation); light and dark at both sizes."""
    listed = server.client.get("/api/contexts").json()
    acme = next(c for c in listed if c["slug"] == "acme")
    stats = acme["stats"]
    assert {stats["sources"], stats["pages"], stats["chunks"]} and stats["sources"] > 0
    spare = f"spare-{size}"
    server.client.post("/api/contexts", json={"slug": spare, "name": f"Spare {size}"}).raise_for_status()
    for scheme in ("light", "dark"):
        page, errors = _page(browser, size)
        page.emulate_media(color_scheme=scheme)
        page.goto(server.url + "/")
        row = page.locator("tr[data-slug=acme]")
        row.wait_for()
        text = " ".join(row.inner_text().split())
        assert f"{stats['sources']} sources · {stats['pages']} pages · {stats['chunks']} chunks" in text
        assert "ready" in text and "Tokens" not in page.locator("main").inner_text()
        assert page.locator(f"tr[data-slug={spare}]").inner_text().startswith(f"Spare {size}")
        _shot(page, f"contexts-{scheme}", size)
        assert errors == [], errors
        page.close()
    page, errors = _page(browser, size)
    page.goto(server.url + "/")
    page.on("dialog", lambda dialog: dialog.accept())
    page.get_by_role("button", name=f"Delete {spare}").click()
    _until(
        page,
        f"!document.querySelector('tr[data-slug={spare}]') && !!document.querySelector('tr[data-slug=acme]')",
    )
    assert server.client.get(f"/api/contexts/{spare}").status_code == 404
    assert errors == [], errors
    page.close()


def test_back_from_a_citation_returns_to_the_answer(server: LiveServer, browser: Browser) -> None:
    """Issue 26, item 8: Back after opening a citation lost the answer and the session. The answered
    turn is kept in the history entry's URL, so Back from the page viewer (and a reload) shows it
    again, with the question it answers above it."""
    page, errors = _page(browser, "laptop")
    page.goto(server.url + "/#/ask?ctx=acme")
    page.fill("#ask", HOTEL)
    page.get_by_role("button", name="Ask").click()
    page.locator("a.cite").first.wait_for(timeout=60_000)
    assert page.locator(".asked").inner_text() == f"You asked: {HOTEL}"
    assert "&a=qry_" in page.url and "s=ses_" in page.url
    answer = page.locator(".answer").inner_text()
    viewer = page.locator("ol.citations a").first.get_attribute("href")  # what a new tab would open
    assert viewer is not None and viewer.startswith("#/page?")
    page.goto(f"{server.url}/{viewer}")
    page.locator(".viewer #span").wait_for()
    page.go_back()
    page.locator("a.cite").first.wait_for()
    assert page.locator(".answer").inner_text() == answer
    assert page.locator(".asked").inner_text() == f"You asked: {HOTEL}"
    assert (
        page.locator(".step").count() >= 1
        and "follow up in session ses_" in page.locator(".follow").inner_text()
    )
    page.reload()
    page.locator("a.cite").first.wait_for()
    assert page.locator(".answer").inner_text() == answer
    _shot(page, "answer-after-back", "laptop")
    assert errors == [], errors
    page.close()


@pytest.mark.parametrize("size", list(SIZES))
def test_a_citation_opens_its_source_beside_the_answer(
    server: LiveServer, browser: Browser, size: str
) -> None:
    """Issue 26, item 8: the source opens beside the answer (over it on a phone), its span marked,
    the panel part of the URL: Back closes it, Forward reopens it, a shared link opens it, Escape or
    × closes it and gives the keyboard back to the marker. A PDF citation is boxed on the page image,
    which a phone can zoom."""
    text_turn = server.client.post("/api/query", json={"ask": HOTEL, "scope": ["acme"]}).json()
    page, errors = _page(browser, size)
    page.goto(f"{server.url}/#/ask?ctx=acme&a={text_turn['id']}")
    cite = page.locator("a.cite").first
    cite.wait_for()
    grounding = page.locator("ol.citations q").first.inner_text()
    cite.click()
    panel = page.locator(".source-panel")
    panel.locator("mark#span").wait_for()
    assert panel.locator("mark#span").inner_text() == grounding
    assert "cite=1" in page.url and "#/ask" in page.url
    assert "travel-policy.md" in panel.locator(".source-head").inner_text()
    if size == "laptop":  # side by side: the answer is still in view, left of the source
        answer_box = page.locator(".answer").bounding_box()
        panel_box = panel.bounding_box()
        assert answer_box is not None and panel_box is not None
        assert answer_box["x"] + answer_box["width"] <= panel_box["x"]
        assert page.locator(".answer").is_visible()
    _shot(page, "answer-with-source", size)
    page.go_back()
    _until(page, "document.querySelector('.source-panel').hidden")
    assert "cite=" not in page.url and page.locator(".answer").is_visible()
    page.go_forward()
    panel.locator("mark#span").wait_for()
    page.keyboard.press("Escape")
    _until(page, "document.querySelector('.source-panel').hidden")
    _until(page, "document.activeElement.classList.contains('cite')")

    pdf_turn = server.client.post(
        "/api/query", json={"ask": "What was revenue in 2025?", "scope": ["acme"]}
    ).json()
    [n] = [i + 1 for i, c in enumerate(pdf_turn["citations"]) if c["source"] == REPORT][:1]
    page.goto(f"{server.url}/#/ask?ctx=acme&a={pdf_turn['id']}&cite={n}")  # a shared link
    panel.locator(".page-image .box").first.wait_for()
    assert panel.locator("q#span").inner_text() == pdf_turn["citations"][n - 1]["grounding"]
    if size == "phone":
        image = panel.locator(".page-image img")
        narrow = image.bounding_box()
        panel.get_by_role("button", name="Zoom").click()
        wide = image.bounding_box()
        assert narrow is not None and wide is not None and wide["width"] >= 1.9 * narrow["width"]
        box = panel.locator(".page-image .box").first.bounding_box()
        assert box is not None and box["width"] > 0
    _shot(page, "answer-with-pdf-source", size)
    panel.get_by_role("button", name="Close the source").click()
    _until(page, "document.querySelector('.source-panel').hidden")
    assert "cite=" not in page.url
    assert errors == [], errors
    page.close()


def test_citations_over_two_contexts_name_their_context(server: LiveServer, browser: Browser) -> None:
    """Issue 26, item 8: over several contexts a citation says which context it is from (two contexts
    may hold files of one name); over one, it does not repeat it."""
    server.client.post("/api/contexts", json={"slug": "branch", "name": "Branch office"}).raise_for_status()
    try:
        server.client.post(
            "/api/contexts/branch/import/upload",
            files={
                "file": ("travel.md", b"# Travel\n\nThe hotel limit per night when travelling is $180.\n")
            },
        ).raise_for_status()
        task = server.client.post("/api/contexts/branch/curate", json={}).json()["task_id"]
        assert wait_task(server.client, task, timeout=120)["state"] == "completed"
        query = server.client.post("/api/query", json={"ask": HOTEL, "scope": ["acme", "branch"]}).json()
        contexts = {c["context"] for c in query["citations"]}
        assert contexts == {"acme", "branch"}, query["citations"]  # the precondition: both are cited
        page, errors = _page(browser, "laptop")
        page.goto(f"{server.url}/#/ask?ctx=acme,branch&a={query['id']}")
        page.locator("ol.citations li").first.wait_for()
        badges = page.locator("ol.citations li .badge").all_inner_texts()
        assert len(badges) == len(query["citations"]) and set(badges) == {"acme", "branch"}
        page.locator("a.cite").first.hover()
        assert page.locator("#popover .where").inner_text().split(" · ")[0] in {"acme", "branch"}
        _shot(page, "answer-two-contexts", "laptop")
        single = server.client.post("/api/query", json={"ask": HOTEL, "scope": ["acme"]}).json()
        page.goto(f"{server.url}/#/ask?ctx=acme&a={single['id']}")
        page.locator("ol.citations li").first.wait_for()
        assert page.locator("ol.citations li .badge").count() == 0
        assert errors == [], errors
        page.close()
    finally:
        server.client.delete("/api/contexts/branch")


def test_the_design_view_proposes_a_template_before_the_first_curate(
    server: LiveServer, browser: Browser, filings: Path
) -> None:
    """Issue 27, item 4: a context with sources and no curate yet opens its design view with explore's
    proposal (the template, its confidence, the reasons); one click loads that template."""
    slug = "explore-test"
    server.client.post("/api/contexts", json={"slug": slug, "name": "Explore"}).raise_for_status()
    try:
        for pdf in sorted(filings.glob("*.pdf")):
            server.client.post(
                f"/api/contexts/{slug}/import/upload", files={"file": (pdf.name, pdf.read_bytes())}
            ).raise_for_status()
        page, errors = _page(browser, "laptop")
        page.goto(f"{server.url}/#/design?ctx={slug}")
        heading = page.locator(".proposal h2")
        heading.wait_for()
        assert heading.inner_text().startswith("Suggested: Financial filings")
        assert "document types: annual report ×3" in page.locator(".proposal").inner_text()
        page.get_by_role("button", name="Use Financial filings").click()
        page.get_by_role("tab", name="JSON").click()
        assert '"Reported Figure"' in page.input_value("#manifest")
        _shot(page, "design-proposal", "laptop")
        assert errors == [], errors
        page.close()
    finally:
        server.client.delete(f"/api/contexts/{slug}")


def test_the_design_view_asks_a_model_to_fit_the_proposal(
    sample_home: tuple[Home, CompileReport], tmp_path: Path, browser: Browser, filings: Path
) -> None:
    """Issue 27, item 4 with a model: the rules' proposal offers to ask the catalog's model, whose
    proposal (types in the corpus's terms) replaces it, says who made it, and loads in one click."""
    home, _ = sample_home
    reply = {
        "template": "financial-filings",
        "confidence": 0.9,
        "reasons": ["three annual reports of two pump and valve makers"],
        "artifact_types": [
            {"name": "Document", "kind": "doc"},
            {
                "name": "Annual Revenue",
                "kind": "event",
                "format": "sqlite",
                "columns": [{"name": "company"}, {"name": "year", "type": "INTEGER"}, {"name": "revenue"}],
                "natural_key": ["company", "year"],
            },
        ],
    }
    with SandboxHost() as host:
        live, stop = launch(home, host, tmp_path, [json.dumps(reply)])
        live.state.runtime.catalog.models[SCRIPTED] = ModelConfig(
            id=SCRIPTED, provider="openai", model="scripted", api_key="sk-test-not-a-real-key"
        )
        slug = "explore-model"
        live.client.post("/api/contexts", json={"slug": slug, "name": "Explore"}).raise_for_status()
        try:
            for pdf in sorted(filings.glob("*.pdf")):
                upload(live.client, slug, pdf.name, pdf.read_bytes()).raise_for_status()
            page, errors = _page(browser, "laptop")
            page.goto(f"{live.url}/#/design?ctx={slug}")
            page.get_by_role("button", name=f"Ask {SCRIPTED} to fit it to these sources").click()
            badge = page.locator(".proposal .badge", has_text="by ")
            badge.wait_for()
            assert badge.inner_text() == f"by {SCRIPTED}"
            assert "three annual reports" in page.locator(".proposal").inner_text()
            assert "Annual Revenue (event, table)" in page.locator(".proposal").inner_text()
            page.get_by_role("button", name=f"Use {SCRIPTED}'s Financial filings").click()
            about = page.locator(".template").inner_text()
            assert f"{SCRIPTED} fitted the Financial filings template" in about and "Annual Revenue" in about
            page.get_by_role("tab", name="JSON").click()
            assert '"Annual Revenue"' in page.input_value("#manifest")
            _shot(page, "design-proposal-model", "laptop")
            assert errors == [], errors
            page.close()
        finally:
            live.client.delete(f"/api/contexts/{slug}")
            stop()


def test_add_and_sync_a_connector_from_the_context_view(
    server: LiveServer, browser: Browser, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 27: the context view adds a connector (its fields from GET /connectors), syncs it now, and
    shows the sync's counts; the files it brought are among the sources and the context is curated."""
    share = tmp_path / "share"
    share.mkdir()
    (share / "canteen.md").write_text("# Canteen\n\nThe canteen opens at eight and closes at three.\n")
    monkeypatch.setenv("SLEUTH_CONNECTOR_FOLDERS", str(tmp_path))  # read per request by this server
    slug = "connector-test"
    server.client.post("/api/contexts", json={"slug": slug, "name": "Connectors"}).raise_for_status()
    try:
        page, errors = _page(browser, "laptop")
        page.goto(f"{server.url}/#/context?ctx={slug}")
        page.get_by_text("add a connector").click()
        page.get_by_label("Connector kind").select_option("folder")
        page.get_by_label("Connector name").fill("share")
        page.locator('.connector-fields input[data-key="path"]').fill(str(share))
        page.get_by_role("button", name="Add connector").click()
        page.get_by_role("button", name="sync share now").click()
        summary = page.locator(".connector-state .summary")
        summary.wait_for(timeout=60_000)
        assert summary.inner_text() == "share: 1 added, 0 changed, 0 deleted, 0 unchanged"
        _until(
            page, "document.querySelector('.connector-state')?.innerText.includes('curated')", timeout=120_000
        )
        page.locator("table.connectors td", has_text="1 added").wait_for()
        assert "share/canteen.md" in page.locator("main").inner_text()  # among the sources
        _shot(page, "connectors", "laptop")
        assert errors == [], errors
        page.close()
    finally:
        server.client.delete(f"/api/contexts/{slug}")


# Issue 39: frictions a new user hit in the console.


def _boxes(page: Page, selector: str) -> list[dict[str, float]]:
    """The rendered boxes of the elements a selector finds (those shown: a size above zero)."""
    found: list[dict[str, float]] = page.locator(selector).evaluate_all(
        """els => els.map(e => e.getBoundingClientRect())
            .filter(r => r.width > 0 && r.height > 0)
            .map(r => ({x: r.x, y: r.y, width: r.width, height: r.height}))"""
    )
    return found


def _in_view(box: FloatRect | None, width: int, height: int) -> bool:
    return (
        box is not None
        and box["x"] >= 0
        and box["y"] >= 0
        and box["x"] + box["width"] <= width
        and box["y"] + box["height"] <= height
    )


@pytest.mark.parametrize("size", list(SIZES))
def test_the_answer_comes_first_and_its_steps_fold_to_one_line(
    server: LiveServer, browser: Browser, size: str
) -> None:
    """Issue 39, item 1: every answer sat under its step lines, below the fold at 1280×800, and opening a
    citation re-flowed the thread so the clicked marker left the screen. The answer now comes first,
    its finished steps fold into one line under it ("2 steps · 5 SDK calls", a <details> opened to see
    them), and the marker clicked stays where it was while the source opens beside the answer."""
    width, height = SIZES[size]
    page, errors = _page(browser, size)
    page.goto(server.url + "/#/ask?ctx=acme")
    page.fill("#ask", HOTEL)
    page.get_by_role("button", name="Ask").click()
    page.locator("footer.turn").wait_for(timeout=60_000)
    trace = page.locator("footer.turn a", has_text="trace").get_attribute("href") or ""
    rollup = server.client.get(f"/api/queries/{trace.split('q=')[1]}").json()["rollup"]
    summary = page.locator("section.steps details.steps-done > summary")
    expected = f"{rollup['n_steps']} steps · {rollup['n_tool_calls']} SDK calls"
    assert rollup["n_steps"] > 1 and summary.inner_text() == expected
    assert page.locator("section.steps details.steps-done").get_attribute("open") is None  # folded
    assert page.locator(".step").count() == rollup["n_steps"] and page.locator(".step").first.is_hidden()
    order = "(a, b) => document.querySelector(a).compareDocumentPosition(document.querySelector(b))"
    following = page.evaluate(f"({order})('.answer', 'section.steps') & Node.DOCUMENT_POSITION_FOLLOWING")
    assert following  # the answer, then its steps
    answer = page.locator(".answer").bounding_box()
    folded = summary.bounding_box()
    assert answer is not None and folded is not None and answer["y"] < folded["y"]
    if size == "laptop":
        assert answer["y"] + 48 <= height  # its first lines on the first screen, no scrolling
    summary.click()  # the steps are one click away
    assert page.locator(".step").first.is_visible() and page.locator(".step").count() == rollup["n_steps"]
    summary.click()
    _shot(page, "answer-first", size)
    if size == "laptop":  # beside the answer: the thread narrows and re-flows as the source opens
        cite = page.locator(".answer a.cite").first
        cite.evaluate("a => a.scrollIntoView({ block: 'end' })")  # near the bottom of the screen
        before = cite.bounding_box()
        assert _in_view(before, width, height)
        cite.click()
        page.locator(".source-panel mark#span").wait_for()
        after = cite.bounding_box()
        assert _in_view(after, width, height), (before, after)
        assert before is not None and after is not None and abs(after["y"] - before["y"]) <= 2
    assert errors == [], errors
    page.close()


def test_each_view_titles_its_tab_and_history_entry(server: LiveServer, browser: Browser) -> None:
    """Issue 39, item 2: every tab and history entry was titled "Sleuth"; each view now says what it
    shows, then where ("Tables · acme · Sleuth"), and Back brings the earlier title back."""
    answer = server.client.post("/api/query", json={"ask": HOTEL, "scope": ["acme"]}).json()
    titles = {
        "#/": "Contexts · Sleuth",
        "#/context?ctx=acme": "acme · Sleuth",  # the context's name (acme's is its slug)
        "#/ask?ctx=acme": "acme · Ask · Sleuth",
        "#/ask": "Ask · Sleuth",
        "#/tables?ctx=acme": "Tables · acme · Sleuth",
        "#/tables?ctx=acme&t=product": "product · Tables · acme · Sleuth",
        "#/design?ctx=acme": "Design · acme · Sleuth",
        "#/knowledge?ctx=acme": "Knowledge · acme · Sleuth",
        "#/sessions": "Sessions · Sleuth",
        f"#/sessions?s={answer['session_id']}": f"Session {answer['session_id']} · Sleuth",
        f"#/trace?q={answer['id']}": f"Trace {answer['id']} · Sleuth",
        f"#/page?ctx=acme&path={REPORT}&page=2": "annual-report-2025.pdf p. 2 · acme · Sleuth",
    }
    page, errors = _page(browser, "laptop")
    for route, title in titles.items():
        page.goto(f"{server.url}/{route}")
        page.locator("main h1").wait_for()
        page.wait_for_load_state("networkidle")
        assert page.title() == title, route
    page.goto(server.url + "/#/")
    page.get_by_role("link", name="acme").first.wait_for()
    page.locator("tr[data-slug=acme] a.name").click()
    _until(page, "document.title === 'acme · Sleuth'")
    page.go_back()
    _until(page, "document.title === 'Contexts · Sleuth'")
    assert errors == [], errors
    page.close()


@pytest.mark.parametrize("size", list(SIZES))
def test_a_new_context_takes_its_slug_from_its_name_and_shows_its_name(
    server: LiveServer, browser: Browser, size: str
) -> None:
    """Issue 39, item 3: creating a context needed a hand-typed slug, and its page was headed by the
    slug. The slug now follows the name as it is typed (lowercase, hyphens; editable, and then kept),
    the server still checks it, and the context's page is headed by its name, the slug beside it."""
    name = "Employee Handbook 2025"
    slug = f"handbook-{size}"
    page, errors = _page(browser, size)
    page.goto(server.url + "/")
    page.locator("#new-name").wait_for()
    page.locator("#new-name").press_sequentially(name)
    assert page.input_value("#new-slug") == "employee-handbook-2025"  # derived while typing
    page.fill("#new-slug", "ab-")  # edited by hand: what the browser lets through, the server refuses
    page.locator("#new-name").press_sequentially("!")
    assert page.input_value("#new-slug") == "ab-"  # the person's slug is kept
    page.get_by_role("button", name="Create").click()
    refusal = page.locator("main p.error[role=alert]")
    _until(page, "document.querySelector('main p.error[role=alert]').innerText.length > 0")
    assert "invalid context name 'ab-'" in refusal.inner_text()  # the server's sentence
    page.fill("#new-name", name)
    page.fill("#new-slug", slug)
    page.get_by_role("button", name="Create").click()
    try:
        heading = page.locator("main h1")
        _until(page, f"document.querySelector('main h1 .name')?.innerText === {json.dumps(name)}")
        assert heading.locator(".slug").is_visible() and heading.locator(".slug").inner_text() == slug
        assert page.title() == f"{name} · Sleuth"
        assert server.client.get(f"/api/contexts/{slug}").json()["name"] == name
        box = heading.bounding_box()
        assert box is not None and box["x"] + box["width"] <= SIZES[size][0]
        _shot(page, "context-named", size)
        assert [e for e in errors if "400" not in e] == [], errors  # the refused create's 400 only
        page.close()
    finally:
        server.client.delete(f"/api/contexts/{slug}")


def test_fork_a_context_from_its_view(server: LiveServer, browser: Browser) -> None:
    """Issue 39, item 4: the API could fork a context and the console could not. A context's view
    forks it under a slug the person gives (derived from the fork's name as it is typed), lands on the
    fork, and a taken (409) or refused (400) slug shows the API's sentence."""
    source = "fork-source"
    server.client.post("/api/contexts", json={"slug": source, "name": "Fork source"}).raise_for_status()
    server.client.post(
        f"/api/contexts/{source}/import/upload", files={"file": ("note.md", b"# Note\n\nBay 7.\n")}
    ).raise_for_status()
    try:
        page, errors = _page(browser, "laptop")
        page.goto(f"{server.url}/#/context?ctx={source}")
        form = page.get_by_role("form", name="Fork this context")
        form.wait_for()
        alert = page.locator(".fork-problem [role=alert]")
        page.fill("#fork-slug", source)  # taken: 409
        form.get_by_role("button", name="Fork").click()
        alert.wait_for()
        assert alert.get_attribute("data-code") == "slug_exists"
        assert alert.inner_text() == f"a context named '{source}' exists"
        page.fill("#fork-slug", "ab-")  # refused by the server's rule: 400
        form.get_by_role("button", name="Fork").click()
        _until(page, "document.querySelector('.fork-problem')?.innerText.includes(\"'ab-'\")")
        assert alert.get_attribute("data-code") == "invalid_request"
        assert alert.inner_text().startswith("invalid context name 'ab-'")
        page.fill("#fork-slug", "")  # emptied: the slug follows the name again
        page.locator("#fork-name").press_sequentially("Fork copy")
        assert page.input_value("#fork-slug") == "fork-copy"
        form.get_by_role("button", name="Fork").click()
        _until(page, "location.hash === '#/context?ctx=fork-copy'")
        _until(page, "document.querySelector('main h1 .name')?.innerText === 'Fork copy'")
        page.get_by_role("cell", name="uploads/note.md", exact=True).wait_for()  # its sources came along
        forked = server.client.get("/api/contexts/fork-copy").json()
        assert forked["name"] == "Fork copy"
        expected = [e for e in errors if "409" not in e and "400" not in e]
        assert expected == [], errors
        page.close()
    finally:
        server.client.delete("/api/contexts/fork-copy")
        server.client.delete(f"/api/contexts/{source}")


@pytest.mark.parametrize("size", list(SIZES))
def test_the_connectors_table_fits_a_phone(
    server: LiveServer, browser: Browser, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, size: str
) -> None:
    """Issue 39, item 5: at 390 px the connectors table was 579 px wide, Sync now and Remove off
    screen. On a phone each connector is now a card, its buttons within reach."""
    share = tmp_path / "share"
    share.mkdir()
    (share / "canteen.md").write_text("# Canteen\n\nThe canteen opens at eight.\n")
    monkeypatch.setenv("SLEUTH_CONNECTOR_FOLDERS", str(tmp_path))
    slug = f"connector-fit-{size}"
    server.client.post("/api/contexts", json={"slug": slug, "name": "Connectors"}).raise_for_status()
    try:
        server.client.post(
            f"/api/contexts/{slug}/connectors",
            json={"name": "team-share", "kind": "folder", "config": {"path": str(share)}, "every": "1h"},
        ).raise_for_status()
        width, _ = SIZES[size]
        page, errors = _page(browser, size)
        page.goto(f"{server.url}/#/context?ctx={slug}")
        sync = page.get_by_role("button", name="sync team-share now")
        remove = page.get_by_role("button", name="remove team-share")
        sync.wait_for()
        page.wait_for_load_state("networkidle")
        assert page.evaluate("document.scrollingElement.scrollWidth <= innerWidth")
        for button in (sync, remove):  # on the screen as laid out (not scrolled to inside the table)
            box = button.bounding_box()
            assert box is not None and box["x"] >= 0 and box["x"] + box["width"] <= width, box
        table = page.locator("table.connectors").bounding_box()
        assert table is not None and table["x"] + table["width"] <= width
        _shot(page, "connectors-fit", size, "section.connectors-section")
        assert errors == [], errors
        page.close()
    finally:
        server.client.delete(f"/api/contexts/{slug}")


@pytest.mark.parametrize("size", list(SIZES))
def test_the_ask_options_have_room(server: LiveServer, browser: Browser, size: str) -> None:
    """Issue 39, item 6: the options row ran its labels and controls together ("Model" against its
    choice, "Max steps" against both). Each option now has its label above it and room around it:
    no two labels or controls touch or overlap, and none leaves the screen."""
    width, _ = SIZES[size]
    page, errors = _page(browser, size)
    page.goto(server.url + "/#/ask?ctx=acme")
    page.locator("details.options summary").click()
    page.locator("#model option").first.wait_for(state="attached")
    page.wait_for_load_state("networkidle")
    selector = ", ".join(
        f"details.options {tag}" for tag in ("label", "select", "input", "textarea", "button", "small")
    )
    boxes = _boxes(page, selector)
    assert len(boxes) >= 12
    gap = 2.0  # each box grown by 2 px on every side: at least 4 px between any two
    touching = [
        (a, b)
        for i, a in enumerate(boxes)
        for b in boxes[i + 1 :]
        if a["x"] - gap < b["x"] + b["width"]
        and b["x"] - gap < a["x"] + a["width"]
        and a["y"] - gap < b["y"] + b["height"]
        and b["y"] - gap < a["y"] + a["height"]
    ]
    assert not touching, touching
    assert all(b["x"] >= 0 and b["x"] + b["width"] <= width for b in boxes)
    for control in ("#model", "#max-steps", "#output-limit"):  # each label above its control
        label = page.locator(f"label[for={control[1:]}]").bounding_box()
        field = page.locator(control).bounding_box()
        assert label is not None and field is not None and label["y"] + label["height"] <= field["y"]
    _shot(page, "ask-options", size, "form.ask")
    assert errors == [], errors
    page.close()


def test_asking_over_no_context_says_so_in_words(server: LiveServer, browser: Browser) -> None:
    """Issue 39, item 7: with no context ticked the console showed the API's field check. It now says
    "Choose at least one context to ask." before sending anything, for Ask and for Compare, and puts
    the keyboard on the first context."""
    page, errors = _page(browser, "laptop")
    sent: list[str] = []
    page.on("request", lambda r: sent.append(r.url) if r.method == "POST" else None)
    page.goto(server.url + "/#/ask?ctx=acme")
    page.locator("#ctx-acme").wait_for()
    page.uncheck("#ctx-acme")
    page.fill("#ask", HOTEL)
    page.get_by_role("button", name="Ask").click()
    alert = page.locator("section.result [role=alert]")
    alert.wait_for()
    assert alert.inner_text() == "Choose at least one context to ask."
    assert page.evaluate("document.activeElement.id") == "ctx-acme"
    page.locator("details.options summary").click()
    page.get_by_role("button", name="Compare side by side").click()
    _until(page, "document.querySelector('section.result [role=alert]')?.isConnected")
    assert alert.inner_text() == "Choose at least one context to ask."
    assert not [u for u in sent if "/api/query" in u]  # nothing was sent
    assert not page.get_by_role("button", name="Ask").is_disabled()  # still usable
    page.check("#ctx-acme")
    page.get_by_role("button", name="Ask").click()
    page.locator("footer.turn").wait_for(timeout=60_000)
    assert errors == [], errors
    page.close()


def test_a_cell_citation_reads_as_its_row_and_period(server: LiveServer, browser: Browser) -> None:
    """Issue 39, item 5: the hover card and the citation list of a figure read "Revenue, 2025: 48.2",
    not "48.2" alone."""
    turn = server.client.post(
        "/api/query", json={"ask": "What was revenue in 2025?", "scope": ["acme"]}
    ).json()
    [cell] = [c for c in turn["citations"] if c.get("cell")][:1]
    assert cell["cell"] == "Revenue, 2025: 48.2"
    page, errors = _page(browser, "laptop")
    page.goto(f"{server.url}/#/ask?ctx=acme&a={turn['id']}")
    page.locator("ol.citations li").first.wait_for()
    assert "Revenue, 2025: 48.2" in page.locator("ol.citations").inner_text()
    page.locator("a.cite").first.hover()
    _until(page, "!document.getElementById('popover').hidden")
    assert "Revenue, 2025: 48.2" in page.locator("#popover").inner_text()
    assert errors == [], errors
    page.close()
