"""A quantity the documents state in their own words (issue 45, item 6): "How many employees did 3M
have at the end of 2018?" was answered by a balance-sheet row (`Employee benefits`) or a sentence
about employees with no number, though the filing says "the Company employed 93,516 people" — a word
no stemmer ties to "employees". The question's word now meets every word of its family that the
documents use (`word_families`), and an amount question's answer is a sentence that states a number
of that quantity."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from sleuth.agent.turn import Runtime, TurnRequest
from sleuth.agent.word_families import count_distance, family_filters, family_root
from sleuth.sandbox import SandboxHost
from sleuth.store.contexts.home import Home
from tests.agent.support import report_home, report_runtime

REPORT = """# Contoso Manufacturing annual report 2018

## Business conduct

All of our employees, including Contoso's Chief Executive Officer and Contoso's Chief Financial
Officer, are required to abide by Contoso's long-standing business conduct policies.

## Stock plans

Registration Statement (Form S-8 No. 333-136403) pertaining to the Contoso 2002 Employee Stock
Purchase Plan, under which eligible employees may buy Contoso stock.

## Consolidated balance sheet

| (Millions) | December 31, 2018 | December 31, 2017 |
|---|---|---|
| Accrued payroll | 749 | 870 |
| Employee benefits | 299 | 310 |
| Total current liabilities | 7,244 | 7,687 |

## Human capital

At December 31, 2018, the Company employed 9,120 people (full-time equivalents), with 3,412
employed in the United States.
"""


def test_a_word_meets_its_family_as_the_documents_spell_it() -> None:
    assert {family_root(w) for w in ("employees", "employee", "employed", "employment")} == {"employ"}
    assert family_root("inventories") == family_root("inventory") == "inventor"
    assert family_root("2018") is None and family_root("tax") is None  # nothing to narrow by
    assert family_filters(["total", "employee"]) == ["employ*"]  # not `total`
    assert family_filters(["employee", "headcount"]) == ["headcount*", "employ*"]  # the head word first
    assert count_distance("we had approximately 5,500 total employees.", {"employ"}) == 2
    assert count_distance("the Company employed 93,516 people", {"employ"}) == 1
    # a year beside the word is no count of it, nor is a number far from it
    assert count_distance("the 2002 Employee Stock Purchase Plan", {"employ"}) is None
    assert count_distance("eligible employees may contribute up to 60% of their salary", {"employ"}) is None
    assert count_distance("existing employees and a 20% growth in headcount", {"employ"}) is None  # a share
    assert (
        count_distance("Employee Stock Purchase Plan, (7) Registration", {"employ"}) is None
    )  # a list's mark
    assert (
        count_distance("Employee Retirement Plan (Exhibit 10.2 to Form 10-K)", {"employ"}) is None
    )  # a pointer


@pytest.fixture(scope="module")
def contoso(tmp_path_factory: pytest.TempPathFactory) -> Home:
    return report_home(tmp_path_factory.mktemp("contoso"), "contoso", REPORT)


@pytest.fixture
def runtime(
    contoso: Home, tmp_path: Path, agent_host: SandboxHost, monkeypatch: pytest.MonkeyPatch
) -> Iterator[Runtime]:
    with report_runtime(contoso, tmp_path, agent_host, monkeypatch) as rt:
        yield rt


@pytest.mark.parametrize(
    "ask",
    [
        "How many employees did Contoso have at the end of 2018?",
        "How many people did Contoso employ at December 31, 2018?",
        "What was Contoso's employee headcount in 2018?",
    ],
)
def test_a_head_count_is_the_sentence_that_states_it(runtime: Runtime, ask: str) -> None:
    query = runtime.ask(TurnRequest(ask=ask, scope=["contoso"]))
    assert query.status == "completed" and query.answer is not None, query.error
    first = query.answer.split("\n")[0]
    assert "employed 9,120 people" in first, query.answer
    assert "Employee benefits" not in query.answer  # a liability is no head count
    assert query.synthesis is not None and query.synthesis.assurance == "nearest"
