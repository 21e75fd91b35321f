"""A company that names a fiscal year by the calendar year it begins in (issue 45, item 1): Ulta's
"fiscal 2022" ended on January 28, 2023. "What were net sales for fiscal 2022?" read the column that
ends in 2022 and said nothing of the company's own name, and a question for a year no column ends in
was answered by another row (`Operating income (as a percentage of net sales)` for net income). Now
both readings are stated, each cited, and a row of another kind of the quantity is never its figure."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from sleuth.agent.arithmetic import names_quantity
from sleuth.agent.turn import Runtime, TurnRequest
from sleuth.sandbox import SandboxHost
from sleuth.store.contexts.home import Home
from tests.agent.support import report_home, report_runtime

WEEKS = "52 Weeks Ended January 28, 2023 | 52 Weeks Ended January 29, 2022 | 52 Weeks Ended January 30, 2021"
REPORT = f"""# Fabrikam Beauty Announces Fourth Quarter Fiscal 2022 Results

Today the company announced results for the thirteen-week period ("fourth quarter") and fifty-two-week
period ("fiscal year") ended January 28, 2023. For the Fourth Quarter of Fiscal 2022, net sales rose.

## Consolidated statements of income

| (In thousands) | {WEEKS} |
|---|---|---|---|
| Net sales | 10,208,580 | 8,630,889 | 6,152,036 |
| Operating income (as a percentage of net sales) | 15.7% | 14.9% | 3.9% |
| Net income | 1,242,408 | 985,837 | 175,835 |

## Selected balance sheet data

| (In thousands) | January 28, 2023 | January 29, 2022 |
|---|---|---|
| Merchandise inventories, net | 1,603,983 | 1,499,218 |
"""


@pytest.fixture(scope="module")
def fabrikam(tmp_path_factory: pytest.TempPathFactory) -> Home:
    return report_home(tmp_path_factory.mktemp("fabrikam"), "fabrikam", REPORT)


@pytest.fixture
def runtime(
    fabrikam: Home, tmp_path: Path, agent_host: SandboxHost, monkeypatch: pytest.MonkeyPatch
) -> Iterator[Runtime]:
    with report_runtime(fabrikam, tmp_path, agent_host, monkeypatch) as rt:
        yield rt


def _answer(runtime: Runtime, ask: str) -> str:
    query = runtime.ask(TurnRequest(ask=ask, scope=["fabrikam"]))
    assert query.status == "completed" and query.answer is not None, query.error
    assert query.synthesis is not None and query.synthesis.assurance == "matched", query.answer
    assert query.unsupported == [], query.answer  # every number in it is in a cited cell
    return query.answer


def test_a_year_the_company_names_otherwise_is_stated_both_ways(runtime: Runtime) -> None:
    answer = _answer(runtime, "What were Fabrikam's net sales for fiscal 2022?")
    assert answer.startswith(
        "According to uploads/corpus/annual-report.md (p. 1), Net sales, 52 weeks ended Jan 29, 2022:"
        " 8,630,889 [1]."
    ), answer
    assert "names its fiscal years by the calendar year they begin in" in answer
    assert answer.endswith(
        "its own fiscal year of the asked number: Net sales, 52 weeks ended Jan 28, 2023: 10,208,580 [2]."
    ), answer


def test_a_year_no_column_ends_in_is_read_by_the_companys_own_name(runtime: Runtime) -> None:
    # no column ends in 2020; the company's fiscal 2020 ended in January 2021
    answer = _answer(runtime, "What was Fabrikam's net income in fiscal 2020?")
    assert "Net income, 52 weeks ended Jan 30, 2021: 175,835 [1]" in answer, answer
    assert "this is the year it calls by the asked number" in answer


def test_a_row_of_another_kind_of_the_quantity_does_not_name_it() -> None:
    assert not names_quantity("Operating income (as a percentage of net sales)", ("net", "income"))
    assert not names_quantity("Operating income", ("net", "income"))
    assert names_quantity("Net income attributable to Fabrikam", ("net", "income"))
    assert names_quantity("Net revenues", ("revenue",))
    assert names_quantity("Total net sales", ("net", "sale"))
    assert names_quantity("Property and equipment, net", ("net", "property"))
