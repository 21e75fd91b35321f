"""Tables as a person reads them (issue 43, item 1): each column's header and period from where the
header's phrases stand over the columns, the title above the table that is not page furniture, each
row's group and its whole label without its figures. Over FinanceBench filings where they are kept
beside the repository, and over words placed by hand."""

from __future__ import annotations

from functools import cache

from sleuth.compile.pages import Page, Table, TableRow
from sleuth.compile.parse import parse_source
from sleuth.compile.parse.table_grid import Box, Word, columns_of, read_header
from sleuth.compile.table_cells import Cell, ColumnPeriod, cells_of, column_period
from sleuth.settings import DEFAULTS
from tests.support import FINANCEBENCH, needs_financebench


@cache
def _page(name: str, number: int) -> Page:
    return parse_source(FINANCEBENCH / name, max_text_bytes=DEFAULTS.max_text_bytes).pages[number - 1]


def _cells(name: str, number: int, table_no: int, label: str) -> list[Cell]:
    page = _page(name, number)
    return [c for c in cells_of(name, page) if c.table_no == table_no and c.label == label]


@needs_financebench("JPMORGAN_2022Q2_10Q.pdf")
def test_a_header_of_two_periods_over_their_columns() -> None:
    """`Three months ended June 30,` over three columns, `Six months ended June 30,` over the next
    three, each with its years and a change: every column its own period (neither period was read:
    every column was `June 30` and a year, the three months' and the six months' alike); a change
    column, the period it is the change in (the latest of the columns before it)."""
    [table, *_] = _page("JPMORGAN_2022Q2_10Q.pdf", 30).tables
    assert table.rows[0].cells[1:] == [
        "Three months ended June 30 2022",
        "Three months ended June 30 2021",
        "Three months ended June 30 Change",
        "Six months ended June 30 2022",
        "Six months ended June 30 2021",
        "Six months ended June 30 Change",
    ]
    advisory = _cells("JPMORGAN_2022Q2_10Q.pdf", 30, 1, "Advisory")
    assert [(c.text, c.year, c.months, c.period_end, c.period_start) for c in advisory] == [
        ("$ 664", 2022, 3, "2022-06-30", "2022-04-01"),
        ("$ 916", 2021, 3, "2021-06-30", "2021-04-01"),
        ("(28) %", 2022, 3, "2022-06-30", "2022-04-01"),  # the change in the quarter it follows
        ("$ 1,465", 2022, 6, "2022-06-30", "2022-01-01"),
        ("$ 1,596", 2021, 6, "2021-06-30", "2021-01-01"),
        ("(8) %", 2022, 6, "2022-06-30", "2022-01-01"),
    ]


@needs_financebench("Pfizer_2023Q2_10Q.pdf")
def test_a_prior_year_column_has_its_own_year() -> None:
    """Pfizer sets each header cell's date a line apart (`July 2,` / `2023` / `July 3,` / `2022`):
    the prior year's quarter is the quarter ended July 3, 2022 (it was headed July 2, 2023)."""
    revenues = _cells("Pfizer_2023Q2_10Q.pdf", 8, 1, "Revenues")
    assert [(c.text, c.header, c.year, c.period_end, c.months) for c in revenues] == [
        ("$ 12,734", "Three Months Ended July 2 2023", 2023, "2023-07-02", 3),
        ("$ 27,742", "Three Months Ended July 3 2022", 2022, "2022-07-03", 3),
        ("$ 31,015", "Six Months Ended July 2 2023", 2023, "2023-07-02", 6),
        ("$ 53,402", "Six Months Ended July 3 2022", 2022, "2022-07-03", 6),
    ]
    assert revenues[1].period_start == "2022-04-04"  # thirteen weeks: a 52/53-week calendar's quarter


@needs_financebench("Pfizer_2023Q2_10Q.pdf")
def test_a_row_group_ends_where_its_rows_stop_being_indented() -> None:
    page = _page("Pfizer_2023Q2_10Q.pdf", 8)
    groups = {c.label: c.section for c in cells_of("p.pdf", page) if c.table_no == 1 and c.column_no == 1}
    assert groups["Cost of sales"] == "Costs and expenses"
    assert groups["Other (income)/deductions––net"] == "Costs and expenses"
    assert groups["Income from continuing operations"] is None  # set flush again: the group ended
    wrapped = "Income from continuing operations attributable to Pfizer Inc. common shareholders"
    assert [c.section for c in cells_of("p.pdf", page) if c.label == wrapped and c.column_no == 1] == [
        "Earnings per common share––basic",
        "Earnings per common share––diluted",
    ]  # one table, its label whole across the line the layout broke it on


@needs_financebench("NETFLIX_2015_10K.pdf")
def test_a_segment_rows_label_holds_no_figures() -> None:
    """Netflix's segment table: four columns, most rows filling one (`Net income`): the four figures
    of `Revenues` are its cells, not its label's words (it was `Revenues $ 3,431,434 $ 1,308,061
    $ 765,161` with one cell)."""
    revenues = _cells("NETFLIX_2015_10K.pdf", 61, 2, "Revenues")
    assert [(c.header, c.year, c.value) for c in revenues] == [
        ("As of/Year ended December 31, 2014 Domestic Streaming", 2014, 3431434.0),
        ("As of/Year ended December 31, 2014 International Streaming", 2014, 1308061.0),
        ("As of/Year ended December 31, 2014 Domestic DVD", 2014, 765161.0),
        ("As of/Year ended December 31, 2014 Consolidated", 2014, 5504656.0),
    ]
    [net] = _cells("NETFLIX_2015_10K.pdf", 61, 2, "Net income")
    assert (net.column_no, net.header, net.value) == (
        4,
        "As of/Year ended December 31, 2014 Consolidated",
        266799.0,
    )


@needs_financebench("NETFLIX_2015_10K.pdf")
def test_a_title_is_the_caption_not_the_page_furniture() -> None:
    """The two segment tables under `Table of Contents` (the running header) are titled by the
    sentences that introduce them."""
    tables = _page("NETFLIX_2015_10K.pdf", 61).tables
    assert [t.title for t in tables] == [
        "The following tables represent segment information for the year ended December 31, 2015:",
        "The following tables represent segment information for the year ended December 31, 2014:",
    ]


@needs_financebench("PEPSICO_2022_10K.pdf")
def test_dates_a_caption_lists_one_a_column() -> None:
    """`Fiscal years ended December 31, 2022, December 25, 2021 and December 26, 2020` over the
    years: each column ends on its own date; the title is the statement's, not the company's."""
    [table, *_] = _page("PEPSICO_2022_10K.pdf", 62).tables
    assert table.title == "Consolidated Statement of Income"
    revenue = _cells("PEPSICO_2022_10K.pdf", 62, 1, "Net Revenue")
    assert [(c.period_end, c.months) for c in revenue] == [
        ("2022-12-31", 12),
        ("2021-12-25", 12),
        ("2020-12-26", 12),
    ]


@needs_financebench("AMCOR_2023Q2_10Q.pdf")
def test_prose_above_a_table_heads_no_column() -> None:
    """`… for the three and six months ended December 31, 2022 and 2021 is as follows:` above the
    table was read into every column's header."""
    [table] = [t for t in _page("AMCOR_2023Q2_10Q.pdf", 42).tables if t.rows[0].cells[1:]]
    assert table.rows[0].cells[1:] == [
        "Three Months Ended December 31 2022",
        "Three Months Ended December 31 2021",
        "Six Months Ended December 31 2022",
        "Six Months Ended December 31 2021",
    ]


def _word(text: str, left: float, bottom: float, line: int) -> Word:
    return Word(text, Box(left, left + 5.0 * len(text), bottom, bottom + 10.0), line)


def _words(line: int, bottom: float, *placed: tuple[str, float]) -> list[Word]:
    """A printed line's words: each phrase at its left edge, its words a space apart."""
    out: list[Word] = []
    for phrase, left in placed:
        for word in phrase.split():
            out.append(_word(word, left, bottom, line))
            left += 5.0 * len(word) + 2.5
    return out


def test_header_phrases_head_the_columns_they_stand_over() -> None:
    """A sentence above the header ends it; `Three Months Ended` centred over two columns heads
    both; the years under them head one each; a unit over the labels heads none."""
    columns = [(300.0, 330.0), (360.0, 390.0), (420.0, 450.0), (480.0, 510.0)]
    words = [
        *_words(
            0,
            140.0,
            ("Our results for the quarter and the half year ended September 30 were as follows:", 24.0),
        ),
        *_words(1, 128.0, ("Three Months Ended", 302.0), ("Six Months Ended", 422.0)),
        *_words(2, 116.0, ("September 30,", 285.0), ("September 30,", 405.0)),
        *_words(3, 104.0, ("(in millions)", 20.0), ("2023", 310.0), ("2022", 370.0)),
        *_words(3, 104.0, ("2023", 430.0), ("2022", 490.0)),
    ]
    header = read_header(words, columns, below=90.0, labels_right=150.0)
    assert header.columns == [
        "Three Months Ended September 30 2023",
        "Three Months Ended September 30 2022",
        "Six Months Ended September 30 2023",
        "Six Months Ended September 30 2022",
    ]
    assert header.label_side == ["(in millions)"] and header.lines == frozenset({1, 2, 3})


def test_a_narrow_header_heads_every_column_it_is_centred_over() -> None:
    """`SECOND QUARTER` centred over five columns and `Percent Change` over the three that are not
    years head them all, though each is narrower than what it heads; a period shares out no word
    of a cell's upper line (`Percent` over `to Sales` heads no `Amount`)."""
    columns = [(100.0, 130.0), (160.0, 190.0), (220.0, 250.0), (280.0, 310.0), (340.0, 370.0)]
    words = [
        *_words(0, 128.0, ("SECOND QUARTER", 203.75)),
        *_words(1, 116.0, ("Percent Change", 263.75)),
        *_words(2, 104.0, ("2023", 105.0), ("2022", 165.0), ("Total", 222.0)),
        *_words(2, 104.0, ("Operations", 270.0), ("Currency", 335.0)),
    ]
    header = read_header(words, columns, below=90.0, labels_right=60.0)
    assert header.columns == [
        "SECOND QUARTER 2023",
        "SECOND QUARTER 2022",
        "SECOND QUARTER Percent Change Total",
        "SECOND QUARTER Percent Change Operations",
        "SECOND QUARTER Percent Change Currency",
    ]
    stacked = [
        *_words(0, 128.0, ("2023", 135.0), ("2022", 256.75)),
        *_words(1, 116.0, ("Percent", 157.0), ("Percent", 277.0)),
        *_words(2, 104.0, ("Amount", 100.0), ("to Sales", 156.0), ("Amount", 220.0), ("to Sales", 276.0)),
    ]
    header = read_header(stacked, columns[:4], below=90.0, labels_right=60.0)
    assert header.columns == ["2023 Amount", "2023 Percent to Sales", "2022 Amount", "2022 Percent to Sales"]


def test_a_company_name_beside_the_title_heads_no_column() -> None:
    """`Corning Incorporated and Subsidiary Companies` set right of the statement's title, over the
    columns: above the header, not in it."""
    columns = [(300.0, 330.0), (380.0, 410.0)]
    words = [
        *_words(
            0,
            128.0,
            ("Consolidated Statements of Cash Flows", 20.0),
            ("Acme Incorporated and Subsidiary Companies", 290.0),
        ),
        *_words(1, 116.0, ("Year ended December 31", 300.0)),
        *_words(2, 104.0, ("(In millions)", 20.0), ("2021", 305.0), ("2020", 385.0)),
    ]
    header = read_header(words, columns, below=90.0, labels_right=150.0)
    assert header.columns == ["Year ended December 31 2021", "Year ended December 31 2020"]


def test_columns_are_where_figures_stand_one_under_another() -> None:
    rows = [
        [(150.0, 160.0), (300.0, 330.0), (400.0, 430.0)],  # a footnote's `(1)` after a label
        [(305.0, 330.0), (405.0, 430.0)],
        [(402.0, 430.0)],  # a blank cell in the first column
        [(310.0, 330.0), (400.0, 430.0)],
    ]
    assert columns_of(rows) == [(300.0, 330.0), (400.0, 430.0)]


def test_a_column_period_from_its_header() -> None:
    assert column_period("Three Months Ended June 25 2022") == ColumnPeriod(
        2022, "2022-06-25", "2022-03-27", 3
    )
    assert column_period("Nine Months Ended September 30, 2023") == ColumnPeriod(
        2023, "2023-09-30", "2023-01-01", 9
    )
    assert column_period("Fiscal Years Ended January 28, 2023") == ColumnPeriod(
        2023, "2023-01-28", "2022-01-30", 12
    )
    assert column_period("December 31, 2022") == ColumnPeriod(2022, "2022-12-31", None, None)  # a date
    assert column_period("2015 vs. 2014") == ColumnPeriod(None, None, None, None)  # a change
    assert column_period("Three Years Ended December 26, 2015 2013").year == 2013  # its own year
    # an earnings release's 12-week quarter, its date in figures (PepsiCo; the hand labels' misses)
    assert column_period("12 Weeks Ended 3/25/2023") == ColumnPeriod(2023, "2023-03-25", "2023-01-01", 3)
    assert column_period("36 Weeks Ended 9/9/2023").months == 9
    assert column_period("SECOND QUARTER 2023") == ColumnPeriod(2023, None, None, 3)  # J&J's release
    assert column_period("Fourth Quarter 2022").months == 3


def test_a_row_group_from_the_parser_and_the_year_it_names() -> None:
    """Rows the parser grouped carry their group; a group that names a year alone gives it to the
    columns whose header names none (a quarterly table: `2017` above the quarters' rows)."""
    text = "First Second\n2017\nNet revenues 10 20\nNet income 1 2"
    table = Table(
        [
            TableRow(0, 12, ["", "First", "Second"], [None, None, None]),
            TableRow(13, 17, ["2017"], [(13, 17)]),
            TableRow(18, 33, ["Net revenues", "10", "20"], [(18, 30), (31, 33), (34, 36)], "2017"),
            TableRow(37, 51, ["Net income", "1", "2"], [(37, 47), (48, 49), (50, 51)], "2017"),
        ]
    )
    page = Page(1, text, tables=[table])
    assert Page.from_json(page.to_json()).tables == [table]
    cells = list(cells_of("q.pdf", page))
    assert {(c.label, c.section, c.header, c.year) for c in cells if c.column_no == 1} == {
        ("Net revenues", "2017", "First", 2017),
        ("Net income", "2017", "First", 2017),
    }


@needs_financebench("JOHNSON_JOHNSON_2023Q2_EARNINGS.pdf")
def test_a_header_the_text_layer_gives_after_the_rows() -> None:
    """J&J's sales table: the text layer gives `SECOND QUARTER  SIX MONTHS` and one `Percent Change`
    after the rows (and on every page, like a running header), and reads each row's two years in
    the wrong order with a `%` glued to the second (`$ 1,687 1,787 % 6.0`). Read by position: ten
    columns, each figure under its own year (it was six columns, `2023 2022 Total` one of them)."""
    us = _cells("JOHNSON_JOHNSON_2023Q2_EARNINGS.pdf", 8, 1, "U.S.")[:10]
    assert [(c.header, c.year, c.months, c.value) for c in us] == [
        ("SECOND QUARTER 2023", 2023, 3, 1787.0),
        ("SECOND QUARTER 2022", 2022, 3, 1687.0),
        ("SECOND QUARTER Percent Change Total", 2023, 3, 6.0),
        ("SECOND QUARTER Percent Change Operations", 2023, 3, 6.0),
        ("SECOND QUARTER Percent Change Currency", 2023, 3, None),
        ("SIX MONTHS 2023", 2023, 6, 3522.0),
        ("SIX MONTHS 2022", 2022, 6, 3244.0),
        ("SIX MONTHS Percent Change Total", 2023, 6, 8.6),
        ("SIX MONTHS Percent Change Operations", 2023, 6, 8.6),
        ("SIX MONTHS Percent Change Currency", 2023, 6, None),
    ]
    [table] = _page("JOHNSON_JOHNSON_2023Q2_EARNINGS.pdf", 10).tables[:1]
    assert table.rows[0].cells[1:] == [
        "SECOND QUARTER 2023 Amount",
        "SECOND QUARTER 2023 Percent to Sales",
        "SECOND QUARTER 2022 Amount",
        "SECOND QUARTER 2022 Percent to Sales",
        "SECOND QUARTER Percent Increase (Decrease)",
    ]


@needs_financebench("CORNING_2021_10K.pdf", "COCACOLA_2017_10K.pdf", "3M_2018_10K.pdf")
def test_statement_headers_as_a_reader_reads_them() -> None:
    """`December 31` beside or above the years dates each column (the balance sheets had the years
    alone); the company's name beside the title is no header (it headed two of three columns); `Net
    Sales` over three years heads all three (it headed the middle one)."""
    assert [c.period_end for c in _cells("CORNING_2021_10K.pdf", 67, 1, "Cash and cash equivalents")] == [
        "2021-12-31",
        "2020-12-31",
    ]
    assert [c.period_end for c in _cells("COCACOLA_2017_10K.pdf", 76, 1, "Cash and cash equivalents")] == [
        "2017-12-31",
        "2016-12-31",
    ]
    assert [c.header for c in _cells("CORNING_2021_10K.pdf", 68, 1, "Net income")] == [
        "Year ended December 31 2021",
        "Year ended December 31 2020",
        "Year ended December 31 2019",
    ]
    assert [c.header for c in _cells("3M_2018_10K.pdf", 126, 1, "Industrial")] == [
        "Net Sales 2018",
        "Net Sales 2017",
        "Net Sales 2016",
        "Operating Income 2018",
        "Operating Income 2017",
        "Operating Income 2016",
    ]


def _row(text: str, cells: list[str], group: str | None = None) -> TableRow:
    """A row of `text` whose cells are found in it in order, as the parser gives them."""
    spans: list[tuple[int, int] | None] = []
    cursor = 0
    for cell in cells:
        found = text.index(cell, cursor)
        spans.append((found, found + len(cell)))
        cursor = found + len(cell)
    first, last = spans[0], spans[-1]
    assert first is not None and last is not None
    return TableRow(first[0], last[1], cells, spans, group)


def test_a_label_without_its_footnote_marks_and_a_roll_forward_in_its_year() -> None:
    """A row reads as a question names it (`Total assets(a)` is `Total assets`), and a roll-forward
    whose columns name no period is the year its dated rows name (MGM's changes in accumulated
    other comprehensive income, April 1 to June 30, 2023)."""
    text = (
        "Currency Other Total\nBalances, April 1, 2023 36,873 (65) 36,808\n"
        "Other comprehensive loss (b) (6,040) — (6,040)\nBalances, June 30, 2023 30,122 (65) 30,057"
    )
    lines = text.split("\n")
    offsets = [sum(len(line) + 1 for line in lines[:i]) for i in range(len(lines))]
    header = TableRow(0, len(lines[0]), ["", "Currency", "Other", "Total"], [None, (0, 8), (9, 14), (15, 20)])
    rows = [
        _row(text, ["Balances, April 1, 2023", "36,873", "(65)", "36,808"]),
        _row(text, ["Other comprehensive loss (b)", "(6,040)", "—", "(6,040)"]),
        _row(text, ["Balances, June 30, 2023", "30,122", "(65)", "30,057"]),
    ]
    assert [r.start for r in rows] == offsets[1:]
    page = Page(1, text, tables=[Table([header, *rows], unit="thousands")])
    cells = list(cells_of("aoci.pdf", page))
    assert {c.label for c in cells} == {
        "Balances, April 1, 2023",
        "Other comprehensive loss",
        "Balances, June 30, 2023",
    }
    assert {(c.year, c.months) for c in cells} == {(2023, None)}  # balances at dates: no length


@needs_financebench("JPMORGAN_2022Q2_10Q.pdf")
def test_a_statement_row_without_its_footnote_mark() -> None:
    """JPMorgan's balance sheet prints `Total assets(a)`: the row is `Total assets`."""
    assert [c.text for c in _cells("JPMORGAN_2022Q2_10Q.pdf", 90, 1, "Total assets")][:1] == ["$ 3,841,314"]


@needs_financebench("MICROSOFT_2023_10K.pdf")
def test_a_figure_whose_bracket_is_set_apart() -> None:
    """Microsoft prints `(22,245 )`: the bracket closes the figure, and the cash-flow table goes on past
    the first such row (it ended there, 14 rows short)."""
    repurchased = _cells("MICROSOFT_2023_10K.pdf", 61, 1, "Common stock repurchased")
    assert [(c.text, c.value) for c in repurchased] == [
        ("(22,245 )", -22245.0),
        ("(32,696 )", -32696.0),
        ("(27,385 )", -27385.0),
    ]
    assert [c.value for c in _cells("MICROSOFT_2023_10K.pdf", 61, 1, "Net cash used in investing")][:1] == [
        -22680.0
    ]
