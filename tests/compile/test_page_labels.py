"""Printed page numbers (issue 26, item 7): the number a page prints ("38" at the foot of the PDF's
40th page) is read when neighbouring pages agree on its distance from the index, and a stray number
on a line of its own is not one."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from sleuth.compile.parse import pdf
from sleuth.compile.parse.page_labels import printed_labels
from sleuth.store.contexts.home import Home
from sleuth.store.version.search import VersionReader
from tests.support import compiled_version, make_pdf

BODY = "Revenue grew in every region.\nMargins held.\nThe outlook is unchanged for the year."


def test_a_sequence_of_printed_numbers_is_read_in_its_forms() -> None:
    pages = ["Cover\nAcme Annual Report", "Contents\nBusiness 1"]  # a cover and contents: unnumbered
    pages += [f"{BODY}\n{n}" for n in (1, 2)]  # "1", "2" alone at the foot
    pages += [f"Page {n}\n{BODY}" for n in (3, 4)]  # at the head, as "Page N"
    pages += [f"{BODY}\n- {n} -" for n in (5,)]
    pages += [f"{BODY}\nAcme Instruments | {n}" for n in (6, 7)]
    pages += [f"{BODY}\n{n} of 9" for n in (8, 9)]
    assert printed_labels(pages) == [None, None, "1", "2", "3", "4", "5", "6", "7", "8", "9"]


def test_a_stray_number_is_not_a_page_number() -> None:
    """A table's cell on a line of its own, or numbers that do not step with the pages, stay None."""
    pages = [f"{BODY}\nTotal\n412", f"{BODY}\n7", f"{BODY}\n1,204", f"{BODY}\n3"]
    assert printed_labels(pages) == [None, None, None, None]
    assert printed_labels([]) == []
    assert printed_labels([f"{BODY}\n12"]) == [None]  # one page: nothing to agree with


def test_a_compiled_pdf_records_its_printed_numbers(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Through a compile: the pages file keeps each label, the reader and the page viewer's route
    serve it; the citable page stays the PDF's own index."""
    monkeypatch.setenv("SLEUTH_HOME", str(tmp_path / "home"))
    source = make_pdf(
        tmp_path / "in" / "report.pdf",
        ["Acme Report\nA cover page.", f"Results\n{BODY}\n1", f"Outlook\n{BODY}\n2", f"Risks\n{BODY}\n3"],
    )
    parsed = pdf.parse(source.read_bytes())
    assert [p.label for p in parsed.pages] == [None, "1", "2", "3"]
    version = compiled_version("labels", [source.parent], Home(tmp_path / "home"))
    reader = VersionReader(version)
    [path] = reader.page_files
    assert [reader.page_label(path, n) for n in (1, 2, 4)] == [None, "1", "3"]
    rows = [json.loads(line) for line in reader.page_files[path].read_text().splitlines()]
    assert [r.get("label") for r in rows] == [None, "1", "2", "3"]
