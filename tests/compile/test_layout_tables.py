"""PDF tables as data (issue 25, item 2): the rows of a laid-out table, their figure columns, the
headers and unit above them, each cell a span of the page text, and `_cells` in `tables.sqlite`."""

from __future__ import annotations

from pathlib import Path

from sleuth.compile.chunking import chunk_pages
from sleuth.compile.manifest import Chunking
from sleuth.compile.pages import Page, Table, TableRow
from sleuth.compile.parse import parse_source
from sleuth.compile.parse.layout_tables import find_tables
from sleuth.compile.table_cells import cells_of, figure_value
from sleuth.format.chunks import Chunk
from sleuth.sdk.types import Hit, Span
from sleuth.settings import DEFAULTS
from tests.support import FINANCEBENCH, needs_financebench, statement_pdf

STATEMENT: list[str | tuple[str, ...]] = [
    "Acme Corp and Subsidiaries",
    "Consolidated Statements of Cash Flows",
    "(in millions)",
    ("", "Years ended December 31,"),
    ("", "2018", "2017"),
    "Cash Flows from Operating Activities",
    ("Net income", "$ 5,363", "$ 4,869"),
    ("Depreciation and amortization", "1,488", "1,544"),
    "Proceeds from sale of businesses, net of cash",
    ("sold", "846", "1,065"),
    "Cash Flows from Investing Activities",
    ("Purchases of property, plant and equipment (PP&E)", "(1,577)", "(1,373)"),
    ("Other - net", "-", "6"),
    "The accompanying notes are an integral part of this statement. Page 60",
]


def test_a_statement_page_becomes_a_table_whose_cells_are_page_spans(tmp_path: Path) -> None:
    page = parse_source(
        statement_pdf(tmp_path / "cash.pdf", STATEMENT), max_text_bytes=DEFAULTS.max_text_bytes
    ).pages[0]
    [table] = page.tables
    assert table.unit == "millions" and table.title == "Consolidated Statements of Cash Flows"
    header, *rows = table.rows
    assert header.cells == ["", "Years ended December 31 2018", "Years ended December 31 2017"]
    assert [r.cells for r in rows] == [
        ["Cash Flows from Operating Activities"],
        ["Net income", "$ 5,363", "$ 4,869"],
        ["Depreciation and amortization", "1,488", "1,544"],
        ["Proceeds from sale of businesses, net of cash sold", "846", "1,065"],  # a wrapped label
        ["Cash Flows from Investing Activities"],
        ["Purchases of property, plant and equipment (PP&E)", "(1,577)", "(1,373)"],
        ["Other - net", "-", "6"],
    ]
    for row in rows:
        assert row.spans is not None
        for cell, span in zip(row.cells[1:], row.spans[1:], strict=True):
            assert span is not None and page.text[span[0] : span[1]] == cell
    wrapped = rows[3]
    assert wrapped.spans is not None and wrapped.spans[0] is not None
    label = page.text[wrapped.spans[0][0] : wrapped.spans[0][1]]
    assert " ".join(label.split()) == wrapped.cells[0]  # the label's span covers both lines


def test_cells_carry_row_column_period_unit_and_value(tmp_path: Path) -> None:
    page = parse_source(
        statement_pdf(tmp_path / "cash.pdf", STATEMENT), max_text_bytes=DEFAULTS.max_text_bytes
    ).pages[0]
    cells = list(cells_of("cash.pdf", page))
    capex = [c for c in cells if c.label.startswith("Purchases of property")]
    assert [(c.header, c.year, c.period_end, c.value, c.unit) for c in capex] == [
        ("Years ended December 31 2018", 2018, "2018-12-31", -1577.0, "millions"),
        ("Years ended December 31 2017", 2017, "2017-12-31", -1373.0, "millions"),
    ]
    assert {c.section for c in capex} == {"Cash Flows from Investing Activities"}
    nil = next(c for c in cells if c.label == "Other - net" and c.column_no == 1)
    assert nil.text == "-" and nil.value is None
    for cell in cells:
        assert page.text[cell.start : cell.end] == cell.text


def test_two_tables_on_a_page_and_prose_with_numbers(tmp_path: Path) -> None:
    text = "\n".join(
        [
            "We had 3,500 employees at the end of 2015 and 3,200 at the end of 2014, and we expect the",
            "number to grow by 10 percent in 2016 as we open 4 new offices.",
            "Revenue by region 2016 2015",
            "Americas 1,200 1,100",
            "Europe 800 750",
            "Asia 400 380",
            "Headcount 2016 2015",
            "Engineering 120 100",
            "Sales 80 70",
            "Support 40 35",
        ]
    )
    tables = find_tables(text)
    assert [[r.cells for r in t.rows] for t in tables] == [
        [
            ["", "2016", "2015"],
            ["Americas", "1,200", "1,100"],
            ["Europe", "800", "750"],
            ["Asia", "400", "380"],
        ],
        [["", "2016", "2015"], ["Engineering", "120", "100"], ["Sales", "80", "70"], ["Support", "40", "35"]],
    ]
    assert find_tables("Item 7 of the report\nSee note 12\nPage 3 of 40\nFiled 2024") == []
    contents = "For the fiscal year ended December 31, 2017\nItem 1. Business 3\nItem 1A. Risk Factors 6\n"
    contents += "Item 7. Management's Discussion and Analysis 18\nItem 8. Financial Statements 37"
    assert find_tables(contents) == []  # page numbers under a date are no table


def test_a_layout_that_breaks_labels_a_word_a_line() -> None:
    text = "\n".join(
        [
            "CONSOLIDATED",
            "BALANCE",
            "SHEETS",
            "(In thousands)",
            "December",
            "31,",
            "2018 2017",
            "Current",
            "assets",
            "Cash and cash equivalents $ 1,526,762 $ 1,499,995",
            "Inventories 110,831 102,292",
            "Property",
            "and",
            "equipment,",
            "net 20,729,888 19,635,459",
            "Commitments and contingencies (Note 11)",
            "Goodwill 1,821,392 1,806,531",
        ]
    )
    [table] = find_tables(text)
    assert table.title == "CONSOLIDATED BALANCE SHEETS" and table.unit == "thousands"
    assert table.rows[0].cells == ["", "December 31 2018", "December 31 2017"]
    labels = [r.cells[0] for r in table.rows[1:]]
    assert labels == [
        "Current assets",
        "Cash and cash equivalents",
        "Inventories",
        "Property and equipment, net",
        "Commitments and contingencies (Note 11)",  # `11)` is the note's number, not a figure
        "Goodwill",
    ]


def test_column_groups_split_the_periods() -> None:
    text = "\n".join(
        [
            "Three Months Ended Six Months Ended",
            "June 30, 2023 June 30, 2022 June 30, 2023 June 30, 2022",
            "Net revenue 1,000 900 2,000 1,800",
            "Net income 100 90 200 180",
            "Diluted EPS 0.50 0.45 1.00 0.90",
        ]
    )
    [table] = find_tables(text)
    assert table.rows[0].cells[1:] == [
        "Three Months Ended June 30, 2023",
        "Three Months Ended June 30, 2022",
        "Six Months Ended June 30, 2023",
        "Six Months Ended June 30, 2022",
    ]


def test_chunks_of_a_tables_rows_carry_its_header(tmp_path: Path) -> None:
    rows: list[str | tuple[str, ...]] = [(f"Line item {n}", f"{n},001", f"{n},002") for n in range(1, 41)]
    page = parse_source(
        statement_pdf(tmp_path / "long.pdf", STATEMENT[:5] + rows), max_text_bytes=DEFAULTS.max_text_bytes
    ).pages[0]
    chunks = chunk_pages("long.pdf", [page], Chunking(target_size=64, overlap=0))
    assert len(chunks) >= 3
    header = (
        "Consolidated Statements of Cash Flows: Years ended December 31 2018 | "
        "Years ended December 31 2017 (millions)"
    )
    assert chunks[0].table_header is None  # it holds the header lines itself
    assert [c.table_header for c in chunks[1:]] == [header] * (len(chunks) - 1)
    assert Chunk.from_json(chunks[1].to_json()) == chunks[1]
    assert "table_header" not in chunks[0].to_json()  # chunk files read before tables had headers
    reader_hit = Hit.from_span("chk_1", 1.0, "chunk", _span(chunks[1]), chunks[1].table_header)
    assert reader_hit.fields["table_header"] == header and f"columns=[{header}]" in repr(reader_hit)


def _span(chunk: Chunk) -> Span:
    return Span(
        ref="E1",
        context="c",
        source_path=chunk.source_path,
        page=chunk.page,
        start=chunk.start,
        end=chunk.end,
        text=chunk.text,
        section_path=[],
        via="chunk",
    )


def test_change_columns_and_a_unit_stated_at_the_top_of_the_page() -> None:
    text = "\n".join(
        [
            "(in thousands, except per share data)",
            "Our results improved in every region this year, as the table below shows in detail.",
            "Year Ended December 31, Change",
            "2015 2014 2015 vs. 2014",
            "Revenues $ 6,779,511 $ 5,504,656 23 %",
            "Net income 122,641 266,799 (54)%",
            "Members 74,762 57,391 30 %",
        ]
    )
    [table] = find_tables(text)
    assert table.unit == "thousands" and table.title is None
    assert [h.split("Change ")[-1] for h in table.rows[0].cells[1:]] == ["2015", "2014", "2015 vs. 2014"]
    cells = list(cells_of("r.pdf", Page(1, text, tables=[table])))
    revenue = [(c.year, c.value) for c in cells if c.label == "Revenues"]
    assert revenue == [(2015, 6779511.0), (2014, 5504656.0), (None, 23.0)]  # a change has no one year


def test_a_hostile_page_costs_linear_work() -> None:
    """Many small tables under one unit line and a 200,000-character line of period words: each line is
    read a bounded number of times (a quadratic reading of either would not finish)."""
    blocks = [
        f"Table {chr(65 + n % 26)}\n2024 2023\nAlpha {n % 900 + 100},001 7\nBeta 3 4\nGamma 5 6"
        for n in range(1500)
    ]
    text = "(in millions)\n" + "years " * 33_000 + "\n" + "\n".join(blocks)
    tables = find_tables(text)
    assert len(tables) == 1500 and {t.unit for t in tables} == {"millions"}
    assert tables[-1].rows[0].cells == ["", "2024", "2023"] and tables[-1].title == "Table R"


def test_an_unnamed_change_column_stays_a_column_and_row_units_stay_rows() -> None:
    text = "\n".join(
        [
            "(in millions)",
            "2018 2017 % Change",
            "Revenue 100 90 11%",
            "Cost of sales 50 45 11%",
            "Gross profit 50 45 11%",
            "Weighted average shares (in thousands) 512 498 3%",
            "Segment results",
            "2018 2017",
            "Pumps 60 50",
            "Valves 40 40",
            "Total 100 90",
        ]
    )
    first, second = find_tables(text)
    assert [r.cells for r in first.rows[1:3]] == [
        ["Revenue", "100", "90", "11%"],
        ["Cost of sales", "50", "45", "11%"],
    ]
    assert first.rows[0].cells[1:3] == ["2018", "2017"]  # 2018's revenue is 100, not 90
    assert first.unit == second.unit == "millions"  # a row's `(in thousands)` is that row's


def test_figure_values() -> None:
    values = {
        t: figure_value(t) for t in ("$ (1,577)", "$(1,577)", "−12", "(12)%", "12.5 %", "—", "n/a", "+28%")
    }
    assert values == {
        "$ (1,577)": -1577.0,
        "$(1,577)": -1577.0,
        "−12": -12.0,
        "(12)%": -12.0,
        "12.5 %": 12.5,
        "—": None,
        "n/a": None,
        "+28%": 28.0,
    }


def test_many_years_lines_and_a_long_period_line_stay_bounded() -> None:
    years = "2018 2017\n" * 40_000
    text = years + "Revenue 100 90\nCost 50 45\nProfit 50 45\n" + "years " * 20_000 + "ended 2018 2017"
    [table] = find_tables(text)
    assert table.rows[0].cells == ["", "2018", "2017"] and len(table.rows) == 4
    assert len(str(table)) < 2_000  # the header lines are capped, not all 40,000 kept


def test_page_json_keeps_spans_unit_and_title_and_reads_the_old_form() -> None:
    table = Table(
        [TableRow(0, 5, ["", "2024"], [None, None]), TableRow(6, 14, ["Rev", "12"], [(6, 9), (10, 12)])],
        unit="millions",
        title="Results",
    )
    page = Page(1, "x" * 20, tables=[table])
    assert Page.from_json(page.to_json()).tables == [table]
    old = {
        "page": 1,
        "text": "a | b",
        "headings": [],
        "tables": [[{"start": 0, "end": 5, "cells": ["a", "b"]}]],
    }
    assert Page.from_json(old).tables == [Table([TableRow(0, 5, ["a", "b"])])]
    assert Page.from_json(Page.from_json(old).to_json()).to_json() == old


@needs_financebench("3M_2018_10K.pdf")
def test_a_financebench_cash_flow_statement() -> None:
    """3M's 2018 cash flow statement (page 60): every row whole, periods and unit read."""
    page = parse_source(FINANCEBENCH / "3M_2018_10K.pdf", max_text_bytes=DEFAULTS.max_text_bytes).pages[59]
    [table] = page.tables
    assert table.title == "Consolidated Statement of Cash Flows" and table.unit == "millions"
    assert table.rows[0].cells[1:] == [f"Years ended December 31 {y}" for y in (2018, 2017, 2016)]
    cells = list(cells_of("3M_2018_10K.pdf", page))
    capex = [c for c in cells if c.label == "Purchases of property, plant and equipment (PP&E)"]
    assert [(c.year, c.value) for c in capex] == [(2018, -1577.0), (2017, -1373.0), (2016, -1420.0)]
    data_rows = [r for r in table.rows[1:] if len(r.cells) > 1]
    assert len(data_rows) == 33 and all(len(r.cells) == 4 for r in data_rows)
