from __future__ import annotations

import codecs
import io
import zipfile
from pathlib import Path

import docx
import pytest

from sleuth.compile.pages import ParsedSource, ParseError
from sleuth.compile.parse import parse_source
from sleuth.format.text import normalize_text
from sleuth.settings import DEFAULTS
from tests.support import make_pdf


def parse(path: Path) -> ParsedSource:
    """A source parsed under the declared text limit (`max_text_bytes`)."""
    return parse_source(path, max_text_bytes=DEFAULTS.max_text_bytes)


def write(tmp_path: Path, name: str, data: str | bytes) -> Path:
    path = tmp_path / name
    path.write_bytes(data.encode("utf-8") if isinstance(data, str) else data)
    return path


def test_markdown_keeps_file_text_and_heading_offsets(tmp_path: Path) -> None:
    text = "# Title\n\nIntro line.   \r\n\n## Part A\n\nBody A.\n\n### Sub\n\nDeep.\n"
    parsed = parse(write(tmp_path, "a.md", text))
    page = parsed.pages[0]
    assert parsed.format == "markdown" and len(parsed.pages) == 1 and page.page == 1
    assert "Intro line.\n" in page.text  # CRLF and trailing spaces normalized
    assert [(h.level, h.text) for h in page.headings] == [(1, "Title"), (2, "Part A"), (3, "Sub")]
    for h in page.headings:
        assert page.text[h.start :].lstrip("# ").startswith(h.text)


def test_markdown_pipe_table_rows_are_page_slices(tmp_path: Path) -> None:
    text = "# T\n\n| Code | Meaning |\n|---|---|\n| E-1 | Broken |\n| E-2 | Fine |\n"
    page = parse(write(tmp_path, "t.md", text)).pages[0]
    rows = page.tables[0].rows
    assert [r.cells for r in rows] == [["Code", "Meaning"], ["E-1", "Broken"], ["E-2", "Fine"]]
    assert page.text[rows[1].start : rows[1].end] == "| E-1 | Broken |"


def test_html_drops_chrome_and_keeps_headings_and_tables(tmp_path: Path) -> None:
    html = (
        "<html><head><title>Doc T</title><style>p{}</style></head><body>"
        "<nav>Menu Home</nav><header>Site header</header><article><h1>Main Title</h1>"
        "<p>First <b>bold</b> paragraph.</p><h2>Specs</h2><table><tr><th>Key</th><th>Value"
        "</th></tr><tr><td>Range</td><td>0-100 C</td></tr></table></article>"
        "<script>alert('x')</script><footer>Footer text</footer></body></html>"
    )
    parsed = parse(write(tmp_path, "p.html", html))
    page = parsed.pages[0]
    assert parsed.title == "Doc T"
    for junk in ("Menu Home", "Site header", "alert", "Footer text"):
        assert junk not in page.text
    assert "First bold paragraph." in page.text
    assert [(h.level, h.text) for h in page.headings] == [(1, "Main Title"), (2, "Specs")]
    assert "Range | 0-100 C" in page.text
    row = page.tables[0].rows[1]
    assert page.text[row.start : row.end] == "Range | 0-100 C"


def test_docx_paragraphs_headings_and_table_rows(tmp_path: Path) -> None:
    document = docx.Document()
    document.core_properties.title = "Handbook"
    document.add_heading("Welcome", level=1)
    document.add_paragraph("Hello and welcome.")
    table = document.add_table(rows=2, cols=2)
    table.rows[0].cells[0].text, table.rows[0].cells[1].text = "Leave Type", "Days"
    table.rows[1].cells[0].text, table.rows[1].cells[1].text = "Annual", "25"
    document.add_heading("Hours", level=2)
    document.add_paragraph("Core hours are 10 to 4.")
    buffer = io.BytesIO()
    document.save(buffer)
    parsed = parse(write(tmp_path, "h.docx", buffer.getvalue()))
    page = parsed.pages[0]
    assert parsed.title == "Handbook"
    assert [(h.level, h.text) for h in page.headings] == [(1, "Welcome"), (2, "Hours")]
    assert (
        page.text.index("Hello and welcome.") < page.text.index("Annual | 25") < page.text.index("Core hours")
    )
    assert [r.cells for r in page.tables[0].rows] == [["Leave Type", "Days"], ["Annual", "25"]]


def test_pdf_pages_are_physical_and_one_based(tmp_path: Path) -> None:
    path = make_pdf(
        tmp_path / "r.pdf",
        [
            "1. Overview\nPAGE-ONE text.",
            "PART II\nItem 7. Results\nPAGE-TWO",
            "2.1 Revenue by Segment\nPAGE-THREE",
        ],
        title="Report X",
    )
    parsed = parse(path)
    assert parsed.format == "pdf" and parsed.title == "Report X"
    assert [p.page for p in parsed.pages] == [1, 2, 3]
    assert all(f"PAGE-{w}" in p.text for p, w in zip(parsed.pages, ["ONE", "TWO", "THREE"], strict=True))
    assert [(h.level, h.text) for h in parsed.pages[1].headings] == [(1, "PART II"), (2, "Item 7. Results")]
    assert [(h.level, h.text) for h in parsed.pages[2].headings] == [(2, "2.1 Revenue by Segment")]
    for page in parsed.pages:
        for h in page.headings:
            assert page.text[h.start : h.start + len(h.text)] == h.text


def test_pdf_bookmarks_win_over_heuristics(tmp_path: Path) -> None:
    path = make_pdf(
        tmp_path / "b.pdf",
        ["Timeline\nAt 09:00 units failed.", "Root Cause\nA bad config."],
        bookmarks=[(1, "Timeline"), (2, "Root Cause")],
    )
    parsed = parse(path)
    assert [h.text for p in parsed.pages for h in p.headings] == ["Timeline", "Root Cause"]


def test_text_encodings(tmp_path: Path) -> None:
    bom8 = parse(write(tmp_path, "a.txt", codecs.BOM_UTF8 + "héllo".encode()))
    assert bom8.pages[0].text == "héllo"
    utf16 = parse(write(tmp_path, "b.txt", "zürich".encode("utf-16")))
    assert utf16.pages[0].text == "zürich"
    nfc = parse(write(tmp_path, "c.txt", "cafe\u0301"))
    assert nfc.pages[0].text == "caf\u00e9"


def test_csv_rows_have_exact_spans_even_with_quoted_newlines(tmp_path: Path) -> None:
    text = 'sku,name,price\nA-1,"Widget, large",10.5\nB-2,"Two\nlines",3\n'
    page = parse(write(tmp_path, "p.csv", text)).pages[0]
    rows = page.tables[0].rows
    assert [r.cells for r in rows] == [
        ["sku", "name", "price"],
        ["A-1", "Widget, large", "10.5"],
        ["B-2", "Two\nlines", "3"],
    ]
    assert page.text[rows[2].start : rows[2].end] == 'B-2,"Two\nlines",3'


def test_json_is_kept_as_written(tmp_path: Path) -> None:
    text = '{\n  "b": 1,\n  "a": [1, 2]\n}\n'
    assert parse(write(tmp_path, "c.json", text)).pages[0].text == text
    lines = parse(write(tmp_path, "c.jsonl", '{"a": 1}\n{"a": 2}\n'))
    assert lines.format == "json"


@pytest.mark.parametrize(
    ("name", "data", "status", "reason"),
    [
        ("empty.md", b"", "skipped", "empty"),
        ("blank.txt", b"   \n\n  ", "skipped", "empty"),
        ("image.png", b"\x89PNG\r\n\x1a\n....", "skipped", "unsupported format"),
        ("notebook.ipynb", b'{"cells": []}', "skipped", "unsupported format"),
        ("latin1.txt", "caf\u00e9 cr\u00e8me".encode("latin-1"), "failed", "bad encoding"),
        ("broken.pdf", b"%PDF-1.4\n garbage that is not a pdf", "failed", "corrupt: "),
        ("truncated.docx", b"PK\x03\x04 not really a zip", "failed", "corrupt: "),
        ("bad.json", b'{"a": ', "failed", "corrupt: invalid JSON"),
        ("bad.jsonl", b'{"a": 1}\n{oops}\n', "failed", "corrupt: invalid JSON on line 2"),
    ],
)
def test_unreadable_files_get_a_status_and_reason(
    tmp_path: Path, name: str, data: bytes, status: str, reason: str
) -> None:
    with pytest.raises(ParseError) as info:
        parse(write(tmp_path, name, data))
    assert info.value.status == status
    assert info.value.reason.startswith(reason)


def test_encrypted_pdf_is_reported_as_encrypted(tmp_path: Path) -> None:
    path = make_pdf(tmp_path / "locked.pdf", ["secret text"], password="s3cret")
    with pytest.raises(ParseError) as info:
        parse(path)
    assert (info.value.status, info.value.reason) == ("failed", "encrypted")


def test_pdf_without_text_layer_is_empty(tmp_path: Path) -> None:
    path = make_pdf(tmp_path / "blank.pdf", ["", ""])
    with pytest.raises(ParseError) as info:
        parse(path)
    assert info.value.reason == "empty"


def test_docx_that_is_a_zip_of_something_else(tmp_path: Path) -> None:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        archive.writestr("hello.txt", "not a document")
    with pytest.raises(ParseError) as info:
        parse(write(tmp_path, "odd.docx", buffer.getvalue()))
    assert info.value.status == "failed" and info.value.reason.startswith("corrupt: ")


@pytest.mark.parametrize(
    ("raw", "stored"),
    [
        ("the open\x02market program", "the open-market program"),  # PDFium's soft hyphen
        ("open\ufffemarket and open\u00admarket", "open-market and open-market"),
        ("infor\x02\nmation", "information"),  # a word split at a line end is whole again
        ("e\ufb03cient \ufb01nance \ufb02ow", "efficient finance flow"),  # ligatures spelled out
        ("a\u00a0b\u2009c\u202fd\u3000e", "a b c d e"),  # spaces that print as spaces
        ("ze\u200bro\ufeff wi\u2060dth\x07", "zero width"),  # what prints as nothing is gone
        ("tabs\tstay\r\nlines stay  \rtoo", "tabs\tstay\nlines stay\ntoo"),
        ("Café Ω 12,5 % — “quoted”", "Café Ω 12,5 % — “quoted”"),  # everything else as it was
    ],
)
def test_normalize_text_cleans_extraction_artefacts_once(raw: str, stored: str) -> None:
    assert normalize_text(raw) == stored
    assert normalize_text(stored) == stored  # idempotent: stored text never changes again


def test_every_parser_stores_normalized_text(tmp_path: Path) -> None:
    (tmp_path / "a.txt").write_text(
        "Share repurchase: open\x02market\u00a0purchases of e\ufb03cient scale.\n"
    )
    (tmp_path / "b.md").write_text("# Title\n\nThe open\u00admarket \ufb01gures.\n")
    (tmp_path / "c.html").write_text("<html><body><p>open\u00admarket\u200b \ufb02ows</p></body></html>")
    texts = [parse(tmp_path / name).pages[0].text for name in ("a.txt", "b.md", "c.html")]
    assert "open-market purchases of efficient scale." in texts[0]
    assert "The open-market figures." in texts[1]
    assert "open-market flows" in texts[2]


def test_pdf_text_gets_back_the_ff_its_ligatures_dropped(tmp_path: Path) -> None:
    """A text layer that lost the second f of an ff/ffi/ffl ligature ("af ect", "Of icer", as
    FinanceBench filings have ~300 times) is repaired at parse time, PDFs only; two real words stay
    apart ("of ice"); a Markdown file is kept as written (issue 25, item 7)."""
    from sleuth.format.text import repair_dropped_ligatures

    text = "Risks that could af ect results.\nOur Chief Financial Of icer has suf icient data.\nA lot of ice."
    pdf = make_pdf(tmp_path / "ligatures.pdf", [text])
    page = parse(pdf).pages[0].text
    assert "could affect results" in page and "Financial Officer has sufficient" in page
    assert "lot of ice" in page
    markdown = tmp_path / "notes.md"
    markdown.write_text("It may af ect us.\n", encoding="utf-8")
    assert "af ect" in parse(markdown).pages[0].text
    for broken, repaired in [
        ("Af ected by", "Affected by"),
        ("ef orts and ef iciency", "efforts and efficiency"),
        ("our of ering", "our offering"),
        ("if ever", "if ever"),  # two words: left as they are
        ("the staff expense", "the staff expense"),
        ("chef iced", "chef iced"),
    ]:
        assert repair_dropped_ligatures(broken) == repaired
        assert len(repair_dropped_ligatures(broken)) == len(broken)
