"""The offline planner's step code is written as text, so no linter sees it where it is built. Here
every kind of step, in each of its variants, is generated over the compiled sample corpus and checked
as the Python it is, in the order the REPL runs it: it compiles (top-level `await` allowed, as in the
REPL) and pyflakes (through ruff) finds no undefined name, unused import or other error in it."""

from __future__ import annotations

import ast
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from sleuth.agent.planner_code import StepCode
from sleuth.agent.planner_figures import FigureAsk
from sleuth.agent.planner_scope import PlannerScope, Target, planner_scope
from sleuth.sdk.knowledge import PRIMITIVES
from sleuth.store.version.documents import DocumentResolver

# What the REPL binds besides the primitives (`sandbox/repl.py` `Repl._bind`).
RUFF = (sys.executable, "-m", "ruff", "check", "--no-cache", "--select", "F,E9", "--ignore", "F704")
NAMESPACE = (*PRIMITIVES, "final", "answer", "asyncio", "json", "re", "math", "statistics", "collections")


@pytest.fixture(scope="module")
def scope(sample_version: Path) -> PlannerScope:
    return planner_scope({"acme": sample_version, "mirror": sample_version})


def _variants(scope: PlannerScope) -> dict[str, str]:
    table = next(t for t in scope.tables if t.type is not None and t.context == "acme")
    typ = next(t for t in scope.types if t.has_roster and t.context == "acme")
    text_column = next(c for c, kind in table.user_columns if "TEXT" in kind)
    filtered = Target("table", "rows", table, None, (f'"{text_column}" LIKE ?',), ("%a%",), " with a")
    roster = Target("roster", typ.name.lower(), type=typ)
    sources = Target("sources", "documents", source_slugs=("acme", "mirror"))
    plain = StepCode("How many products are there?", None, scope)
    follow_up = StepCode("And their prices?", "And their prices? products catalog", scope)
    filings = DocumentResolver(
        {
            f"uploads/{name.lower()}-2022.pdf": {
                "path": f"uploads/{name.lower()}-2022.pdf",
                "title": f"{name} 2022 Annual Report",
                "issuer": name,
                "doc_type": "annual report",
                "year": 2022,
                "period": "FY2022",
                "aliases": "",
            }
            for name in ("Alder Corp", "Birch Inc")
        }
    )
    naming = replace(scope, documents=(("mirror", filings),))
    named = StepCode("What was Alder's revenue in FY2022?", None, naming)
    tabled = StepCode("What was Alder's revenue in FY2022, as the income statement shows?", None, naming)
    codes = {
        "count table": plain.count(Target("table", "rows", table)),
        "count filtered table": plain.count(filtered),
        "count roster": plain.count(roster),
        "count sources": plain.count(sources),
        "list table": plain.listing(filtered),
        "list roster": plain.listing(roster),
        "list sources": plain.listing(sources),
        "exact": StepCode("What does ERR-4012 mean?", None, scope).exact(),
        "general": plain.general(),
        "general follow-up": follow_up.general(),
        "general named": named.general(),
        "general named, figure": named.general(FigureAsk(("revenue",), ("mirror",), years=(2022,))),
        "general named, a table named": tabled.general(),
        "search, a table named, drill": tabled.general() + tabled.drill(("Remote Work Policy", None), []),
        "general, figure in two contexts": plain.general(
            FigureAsk(("revenue",), ("acme", "mirror"), True, ("revenue", "cost"), (2021, 2022))
        ),
        # a drill runs after the search step, in the same REPL: it reads that step's results
        "search, drill artifact and sources": follow_up.general()
        + follow_up.drill(("Remote Work Policy", "acme"), ["uploads/a.md"]),
        "search, drill artifact": plain.general() + plain.drill(("Remote Work Policy", None), []),
        "search, drill sources": plain.general() + plain.drill(None, ["uploads/a.md", "uploads/b.md"]),
    }
    assert "search_in_sources(named" in codes["general named"]  # the variant that names a document
    # without a figure the plan has no `rows` or `figures` for plan_line to cut
    assert "print(plan_line(plan, ['chunks', 'named', 'artifacts', 'tabled']))" in codes["general"]
    # the page of the table the question names is read whole, in the named document only
    assert "table_words = [['income', 'statement']]" in codes["general named, a table named"]
    assert "read_page(path, page" in codes["general named, a table named"]
    assert "tabled = []" in codes["general"]
    return codes


def test_every_step_variant_compiles_and_lints_clean(scope: PlannerScope) -> None:
    codes = _variants(scope)
    header = "".join(f"{name} = None\n" for name in NAMESPACE)
    problems: dict[str, str] = {}
    for kind, code in codes.items():
        compile(code, kind, "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)  # a SyntaxError fails here
        checked = subprocess.run(
            [*RUFF, "--output-format", "concise", "--stdin-filename", "step.py", "-"],
            input=header + code,
            capture_output=True,
            text=True,
            check=False,
        )
        if checked.returncode != 0:
            problems[kind] = checked.stdout + checked.stderr
    assert problems == {}, "\n".join(f"{kind}:\n{text}" for kind, text in problems.items())


def test_a_step_is_deterministic(scope: PlannerScope) -> None:
    assert _variants(scope) == _variants(scope)
