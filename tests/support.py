"""Helpers tests share: the bundled sample corpus and generated PDFs. The fixtures are in
`conftest.py`, which tests never import."""

from __future__ import annotations

from pathlib import Path

from fpdf import FPDF

REPO = Path(__file__).resolve().parents[1]
SAMPLE_CORPUS = REPO / "examples" / "acme-corpus"
SAMPLE_MANIFEST = REPO / "examples" / "acme-manifest.json"
#: The SDK's primitives in the order of spec/runtime.md §5.2, written out: what the code declares is
#: checked against it, in the REPL's registry and in the MCP tools.
SDK_PRIMITIVES = (
    "outline_knowledge",
    "read_artifact",
    "read_rosters",
    "describe_type",
    "search_knowledge",
    "search_source",
    "search_source_by_keyword",
    "search_in_sources",
    "cite_from_artifact",
    "query_db",
    "list_tables",
    "walk_graph",
    "get_fact",
)


def make_pdf(
    path: Path,
    pages: list[str],
    title: str | None = None,
    bookmarks: list[tuple[int, str]] | None = None,
    password: str | None = None,
) -> Path:
    """A real PDF with a text layer: one string per page (lines split on newlines)."""
    pdf = FPDF()
    pdf.set_font("Helvetica", size=11)
    if title:
        pdf.set_title(title)
    if password:
        pdf.set_encryption(owner_password=password + "-owner", user_password=password)
    marks = dict(bookmarks or [])
    for number, text in enumerate(pages, 1):
        pdf.add_page()
        if number in marks:
            pdf.start_section(marks[number])
        for line in text.split("\n"):
            pdf.multi_cell(0, 6, line, new_x="LMARGIN", new_y="NEXT")
    path.parent.mkdir(parents=True, exist_ok=True)
    pdf.output(str(path))
    return path
