"""Helpers tests share: the bundled sample corpus and generated PDFs. The fixtures are in
`conftest.py`, which tests never import."""

from __future__ import annotations

from pathlib import Path

import pytest
from fpdf import FPDF

from sleuth.compile.pipeline import compile_context
from sleuth.settings import current
from sleuth.store.contexts.home import Home

REPO = Path(__file__).resolve().parents[1]
SAMPLE_CORPUS = REPO / "examples" / "acme-corpus"
SAMPLE_MANIFEST = REPO / "examples" / "acme-manifest.json"
#: FinanceBench's PDFs, evaluation data kept beside the repository (never in it): the tests that read
#: them in place skip where a checkout has no such neighbour (a clone in /tmp).
FINANCEBENCH = REPO.parent / "shared" / "data" / "financebench" / "pdfs"


def needs_financebench(*names: str) -> pytest.MarkDecorator:
    return pytest.mark.skipif(
        not all((FINANCEBENCH / name).exists() for name in names),
        reason="FinanceBench is evaluation data kept beside the repository, not in it",
    )


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
    "read_around",
    "read_page",
    "read_section",
    "compare_sections",
    "query_db",
    "list_tables",
    "walk_graph",
    "get_fact",
    "orientation",
)


#: One line of `make_styled_pdf`: its text, font size in points, and whether it is bold.
StyledLine = tuple[str, float, bool]


def make_styled_pdf(path: Path, pages: list[list[StyledLine]]) -> Path:
    """A real PDF whose lines are set in the given sizes and weights (Helvetica / Helvetica-Bold),
    as documents set their headings apart by type."""
    pdf = FPDF()
    for lines in pages:
        pdf.add_page()
        for text, size, bold in lines:
            pdf.set_font("Helvetica", style="B" if bold else "", size=size)
            pdf.multi_cell(0, size * 0.55, text, new_x="LMARGIN", new_y="NEXT")
    path.parent.mkdir(parents=True, exist_ok=True)
    pdf.output(str(path))
    return path


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


def statement_pdf(path: Path, lines: list[str | tuple[str, ...]]) -> Path:
    """A page laid out as a financial statement: a `str` is a line of text; a tuple is a row, its
    label at the left margin and each figure right-aligned in its own column, as filings set them."""
    pdf = FPDF(unit="pt", format="letter")
    pdf.set_font("Helvetica", size=9)
    pdf.add_page()
    for line in lines:
        if isinstance(line, str):
            pdf.cell(0, 12, line, new_x="LMARGIN", new_y="NEXT")
            continue
        label, *figures = line
        pdf.cell(300, 12, label)
        for figure in figures:
            pdf.cell(80, 12, figure, align="R")
        pdf.ln(12)
    path.parent.mkdir(parents=True, exist_ok=True)
    pdf.output(str(path))
    return path


#: Lines of `contents_page`: about 10,000 characters (difflib's alignment took 165 CPU s on it).
LEADER_LINES = 300


def tall_page(path: Path) -> Path:
    """A 100 × 14,400 pt page (the largest side PDF allows): 3000 px wide, it would be 432,000 high."""
    pdf = FPDF(unit="pt", format=(100, 14400))
    pdf.set_font("Helvetica", size=10)
    pdf.add_page()
    pdf.cell(0, 12, "A very tall page", new_x="LMARGIN", new_y="NEXT")
    pdf.output(str(path))
    return path


def contents_page(path: Path, lines: int = LEADER_LINES) -> Path:
    """A contents page: `Item N .................... P` on every line, one page."""
    pdf = FPDF(unit="pt", format=(612, 12 * lines + 80))
    pdf.set_font("Helvetica", size=9)
    pdf.add_page()
    for n in range(1, lines + 1):
        pdf.cell(0, 12, f"Item {n} " + "." * 20 + f" {n % 90 + 10}", new_x="LMARGIN", new_y="NEXT")
    pdf.output(str(path))
    return path


def compiled_version(slug: str, inputs: list[Path], home: Home) -> Path:
    """Compile `inputs` into context `slug` of `home` and return its live version's directory."""
    compile_context(slug, inputs, home=home, settings=current())
    ctx = home.find(slug)
    return ctx.version_dir(ctx.live_version() or "")
