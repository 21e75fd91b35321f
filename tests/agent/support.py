"""Types and checks the agent tests share; the fixtures are in `conftest.py`, which tests never import."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

import pytest
from pypdf import PdfWriter

from sleuth.agent.records import Citation
from sleuth.agent.turn import Runtime
from sleuth.compile.pipeline import compile_context
from sleuth.sandbox import SandboxHost
from sleuth.settings import current
from sleuth.store.contexts.home import Home
from sleuth.store.records.server_db import ServerDB

#: `make_runtime(replies, protocol="native")`: a Runtime whose provider models are scripted.
RuntimeFactory = Callable[..., Runtime]

QUOTED = re.compile(r"[\"“]([\s\S]{15,}?)[\"”]([^\"“”\[\]\n]{0,80}?)((?:\[\d+\])+)")


def assert_quotes_are_groundings(text: str, citations: Sequence[Citation]) -> int:
    """Every quotation that sits beside markers reads exactly as each of those citations' grounding
    (whitespace collapsed). Returns how many quotations were checked."""
    checked = 0
    for m in QUOTED.finditer(text):
        if re.search(r"[.!?]\s+\S", m.group(2)):
            continue  # the markers belong to a later sentence
        # The quotation is what stands between an opening mark and the closing one (it may hold
        # marks of its own, and an uncited quote may come first in the same match).
        body = m.group(1)
        cuts = [0, *(q.end() for q in re.finditer(r"[\"“”]", body))]
        shown = [" ".join(body[c:].split()) for c in cuts]
        for n in re.findall(r"\[(\d+)\]", m.group(3)):
            grounding = " ".join(citations[int(n) - 1].grounding.split())
            assert grounding in shown, (body, grounding)
            checked += 1
    return checked


def report_home(root: Path, slug: str, report: str) -> Home:
    """A home holding one Markdown report compiled as context `slug` (a test module compiles its
    report once and its tests only read it)."""
    corpus = root / "corpus"
    corpus.mkdir()
    (corpus / "annual-report.md").write_text(report, encoding="utf-8")
    home = Home(root / "home")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("SLEUTH_HOME", str(home.root))
        compile_context(slug, [corpus], home=home, settings=current())
    return home


def filing_home(root: Path, slug: str, name: str, parts: Sequence[Path], *others: Path) -> Home:
    """A home holding one filing `name` made of the PDF `parts` in order (narrative, then statements),
    and any `others` beside it, compiled as context `slug`."""
    writer = PdfWriter()
    for part in parts:
        writer.append(str(part))
    corpus = root / "corpus"
    corpus.mkdir(exist_ok=True)
    with (corpus / name).open("wb") as out:
        writer.write(out)
    for other in others:
        (corpus / other.name).write_bytes(other.read_bytes())
    home = Home(root / "home")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("SLEUTH_HOME", str(home.root))
        compile_context(slug, [corpus], home=home, settings=current())
    return home


@contextmanager
def report_runtime(
    home: Home, tmp_path: Path, host: SandboxHost, monkeypatch: pytest.MonkeyPatch
) -> Iterator[Runtime]:
    """A Runtime over `home` with its own server database (the offline planner answers)."""
    monkeypatch.setenv("SLEUTH_HOME", str(home.root))
    with Runtime(
        home, db=ServerDB(tmp_path / "server.sqlite", replay_root=tmp_path), sandbox_host=host
    ) as rt:
        yield rt
