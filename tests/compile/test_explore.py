"""Explore proposes what fits, or says it is not sure (issue 39, item 6): tables alone do not make filings,
a weak fit falls back to General documents with the closest named, a filing's legal words do not make
it an agreement, and a template whose SQL tables stay empty without a model says so."""

from __future__ import annotations

from pathlib import Path

from sleuth.compile.explore import CONFIDENCE_FLOOR, explore
from sleuth.compile.explore_model import propose
from sleuth.compile.templates import TEMPLATES
from sleuth.settings import DEFAULTS
from tests.support import make_pdf

MINUTES = """# Board Meeting Minutes — 2026-0{n}-12

Attendees: Ana, Ben, Chloe, Dev.

## 1. Budget

| Item | Q{n} 2026 | Q{n} 2025 |
|---|---|---|
| Travel | 12,000 | 10,500 |
| Hardware | 40,000 | 38,000 |

The board approved the budget. Actions: Ben to post the roles by Friday.
"""


def test_minutes_with_tables_are_not_filings(tmp_path: Path) -> None:
    for n in range(1, 5):
        (tmp_path / f"board-minutes-2026-0{n}.md").write_text(MINUTES.format(n=n), encoding="utf-8")
    proposal = explore(tmp_path, max_text_bytes=DEFAULTS.max_text_bytes)
    assert proposal.template == "knowledge-base", proposal
    assert proposal.scores["financial-filings"] == 0  # 4 tables, no filing among them
    assert (
        "document types: minutes ×4" in proposal.reasons
        and "4 tables found in their pages" in proposal.reasons
    )


def test_a_weak_fit_falls_back_to_general_documents(tmp_path: Path) -> None:
    make_pdf(tmp_path / "long.pdf", [f"Section {n}\nSome text on page {n}." for n in range(1, 12)])
    (tmp_path / "note.txt").write_text("A short note about nothing in particular.\n" * 3, encoding="utf-8")
    proposal = explore(tmp_path, max_text_bytes=DEFAULTS.max_text_bytes)
    assert proposal.template == "general", proposal
    closest = [r for r in proposal.reasons if r.startswith("no template fits clearly")]
    assert closest and "paged-documents" in closest[0], proposal.reasons
    assert proposal.confidence >= CONFIDENCE_FLOOR


def test_a_filings_legal_words_do_not_make_it_an_agreement(filings: Path) -> None:
    legal = " ".join(["The party shall give notice of termination under the governing law."] * 30)
    for pdf in filings.glob("*.pdf"):
        pdf.unlink()
    make_pdf(
        filings / "alder-2023.pdf",
        ["FORM 10-K\nAnnual report for the fiscal year ended December 31, 2023\nAlder Pumps, Inc.", legal],
    )
    proposal = explore(filings, max_text_bytes=DEFAULTS.max_text_bytes)
    assert not any("like an agreement" in r or "like agreements" in r for r in proposal.reasons), (
        proposal.reasons
    )
    assert proposal.reasons[0] == "read 1 of 1 source"


def test_a_template_whose_tables_stay_empty_offline_says_so(filings: Path) -> None:
    answer = propose(filings)
    assert answer is not None and answer["template"] == "financial-filings"
    assert answer["without_model"]["empty_tables"] == ["Reported Figure"]
    assert any("'Reported Figure' table stays empty" in r and "_cells" in r for r in answer["reasons"])


def test_every_template_reads_after_for() -> None:
    """The design view says "{description} For {when_to_use}" (it read "For you are not sure yet")."""
    for template in TEMPLATES:
        first = str(template["when_to_use"]).split()[0].lower()
        assert first not in {"you", "when", "if", "for"}, template["id"]
