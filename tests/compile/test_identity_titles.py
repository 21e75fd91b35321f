"""A document whose pages name no title is titled by what it is (issue 39, item 10): `Netflix, Inc. —
Annual report FY2017`, not `NETFLIX_2017_10K`; the indexes still read the file name, so naming it for
people re-ranks and re-embeds nothing."""

from __future__ import annotations

import json
from pathlib import Path

from sleuth.compile.documents import context_header, index_title
from sleuth.compile.pipeline import compile_context
from sleuth.compile.version_files import SourceState
from sleuth.settings import current
from sleuth.store.contexts.home import Home
from tests.support import make_pdf


def _states(home: Home, slug: str) -> dict[str, SourceState]:
    ctx = home.find(slug)
    raw = json.loads((ctx.version_dir(ctx.live_version() or "") / "knowledge" / "sources.json").read_text())
    return {path: SourceState(**data) for path, data in raw.items()}


def test_a_filing_without_a_title_is_named_by_its_identity(tmp_path: Path, home: Home) -> None:
    root = tmp_path / "filings"
    make_pdf(
        root / "NETFLIX_2017_10K.pdf",
        [
            "FORM 10-K\nAnnual report for the fiscal year ended December 31, 2017\nNetflix, Inc.",
            "Revenue grew.",
        ],
    )
    (root / "notes.md").write_text("# Board notes\n\nNothing to report.\n", encoding="utf-8")
    compile_context("nf", [root], None, home=home, settings=current())
    states = _states(home, "nf")
    filing = next(s for p, s in states.items() if p.endswith("NETFLIX_2017_10K.pdf"))
    assert filing.title == "Netflix, Inc. — Annual report FY2017"
    # what the indexes read is what they read before: the file name
    assert index_title(filing) == "NETFLIX_2017_10K" and context_header(filing) == "NETFLIX 2017 10K"
    notes = next(s for p, s in states.items() if p.endswith("notes.md"))
    assert notes.title == "Board notes" and index_title(notes) == "Board notes"  # its own title stays

    # carried over: the same title, not a title of a title
    compile_context("nf", [root], None, home=home, settings=current())
    assert next(s for p, s in _states(home, "nf").items() if p.endswith(".pdf")).title == filing.title
