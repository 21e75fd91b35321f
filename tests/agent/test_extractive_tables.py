"""A figure from a table is quoted with its column header (issue 11, 4): "(1,577) (1,373) (1,420)"
says nothing until "(Millions) 2018 2017 2016" says which column is which year."""

from __future__ import annotations

from sleuth.agent.citations import build_citations
from sleuth.agent.extractive import extractive_answer
from sleuth.agent.spans import EvidenceSpan
from sleuth.agent.table_rows import table_header

STATEMENT = (
    "3M Company and Subsidiaries\nConsolidated Statement of Cash Flows\n(Millions) 2018 2017 2016\n"
    "Cash Flows from Investing Activities\n"
    "Purchases of property, plant and equipment (PP&E) (1,577) (1,373) (1,420)\n"
    "Proceeds from sale of PP&E and other assets 262 49 58"
)
MARKDOWN = "Pump models\n\n| Model | Flow rate | Voltage |\n|---|---|---|\n| P-100 | 40 l/min | 230 V |\n"


def _header(text: str, needle: str) -> str | None:
    at = text.index(needle)
    found = table_header(text, at, at + len(needle))
    return None if found is None else text[found[0] : found[1]]


def test_table_header_of_pdf_rows_markdown_rows_and_prose() -> None:
    assert _header(STATEMENT, "Purchases of property") == "(Millions) 2018 2017 2016"
    assert _header(MARKDOWN, "P-100") == "Model | Flow rate | Voltage"
    dated = "Fiscal Years Ended January 28, 2023 January 29, 2022\nRevenue $ 46,298 $ 51,761"
    assert _header(dated, "Revenue") == "Fiscal Years Ended January 28, 2023 January 29, 2022"
    prose = "Revenue grew in 2018 and 2017 alike.\nSales were 1,200 units and 1,300 units."
    assert _header(prose, "Sales were") is None  # a sentence holding two amounts is no row
    assert _header("(Millions) 2018 2017\nNet sales rose sharply", "Net sales") is None  # no figures


def test_a_quoted_row_carries_its_header_and_the_citation_grounds_the_row() -> None:
    span = EvidenceSpan(
        ref="E1",
        context="acme",
        source_path="3M_2018_10K.pdf",
        page=60,
        start=0,
        end=len(STATEMENT),
        text=STATEMENT,
    )
    answer = extractive_answer(
        "What were 3M's purchases of property, plant and equipment in 2018?", [span], None, ["acme"]
    )
    first = answer.splitlines()[0]
    assert first == (
        'According to 3M_2018_10K.pdf (p. 60), under "(Millions) 2018 2017 2016": '
        '"Purchases of property, plant and equipment (PP&E) (1,577) (1,373) (1,420)" [1]'
    )
    result = build_citations(answer, [span], lambda _ctx, _path, _page: STATEMENT)
    # Each quoted line of the one span has a citation of its own, grounded by exactly what it quotes.
    assert len(result.citations) == len(answer.splitlines()) and not result.dropped
    assert result.citations[0].grounding == (
        "Purchases of property, plant and equipment (PP&E) (1,577) (1,373) (1,420)"
    )  # the row grounds the citation, not the header


def test_a_better_ranked_span_wins_a_near_tie_but_not_a_clear_loss() -> None:
    """Evidence comes best first: with the same words, the first span's sentence is quoted; a later
    span still wins when it answers clearly better."""
    first = EvidenceSpan(
        ref="E1",
        context="acme",
        source_path="a.pdf",
        page=1,
        start=0,
        end=44,
        text="Revenue for the year was reported in detail.",
    )
    second = EvidenceSpan(
        ref="E2",
        context="acme",
        source_path="b.pdf",
        page=1,
        start=0,
        end=44,
        text="Revenue for the year was reported in detail!",
    )
    answer = extractive_answer("What was revenue for the year?", [first, second], None, ["acme"])
    assert answer.splitlines()[0].startswith("According to a.pdf")
    swapped = extractive_answer("What was revenue for the year?", [second, first], None, ["acme"])
    assert swapped.splitlines()[0].startswith("According to b.pdf")
    weak = EvidenceSpan(
        ref="E1",
        context="acme",
        source_path="c.pdf",
        page=1,
        start=0,
        end=30,
        text="The year was long for everyone.",
    )
    strong_text = "Alder pump revenue for the fiscal year was $12.5 million."
    strong = EvidenceSpan(
        ref="E2", context="acme", source_path="d.pdf", page=1, start=0, end=len(strong_text), text=strong_text
    )
    answer = extractive_answer(
        "What was Alder pump revenue for the fiscal year?", [weak, strong], None, ["acme"]
    )
    assert answer.splitlines()[0].startswith("According to d.pdf")
