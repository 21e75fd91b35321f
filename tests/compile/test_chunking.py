from __future__ import annotations

import itertools
import json
import random
from pathlib import Path

import numpy as np
import pytest

from sleuth.compile.chunking import Window, chunk_pages, count_tokens, split_span, window_spans
from sleuth.compile.manifest import Chunking
from sleuth.compile.pages import Heading, Page
from sleuth.compile.pipeline import compile_context
from sleuth.models.embedder import get_embedder
from sleuth.settings import current
from sleuth.store.contexts.home import Home
from sleuth.store.version.search import VersionReader

WORDS = [
    "revenue",
    "policy",
    "sensor",
    "calibration",
    "remote",
    "employee",
    "the",
    "of",
    "and",
    "travel",
    "expense",
    "drift",
    "ERR-4012",
    "AX-220",
    "pressure.",
    "quarterly!",
    "approval?",
    "manager",
]


def random_text(rng: random.Random, n_words: int) -> str:
    out = []
    for _ in range(n_words):
        out.append(rng.choice(WORDS))
        r = rng.random()
        out.append("\n\n" if r < 0.03 else "\n" if r < 0.08 else "  " if r < 0.1 else " ")
    return "".join(out)


def markdown_page(rng: random.Random) -> Page:
    parts, headings, text = [], [], ""
    for i in range(rng.randint(1, 6)):
        level = rng.randint(1, 3)
        line = f"{'#' * level} Section {i}\n"
        headings.append(Heading(level, f"Section {i}", len(text)))
        body = random_text(rng, rng.randint(0, 900)) + "\n\n"
        text += line + body
        parts.append(line + body)
    return Page(1, text, headings)


@pytest.mark.parametrize("seed", range(25))
@pytest.mark.parametrize("strategy", ["markdown_heading", "sliding_window"])
def test_every_chunk_is_an_exact_page_slice(seed: int, strategy: str) -> None:
    rng = random.Random(seed)
    pages = [markdown_page(rng) for _ in range(3)]
    for number, page in enumerate(pages, 1):
        page.page = number
    config = Chunking(
        strategy=strategy, target_size=rng.choice([64, 128, 512]), overlap=rng.choice([0, 8, 32])
    )
    chunks = chunk_pages("uploads/x.md", pages, config)
    assert chunks
    by_page = {p.page: p.text for p in pages}
    for c in chunks:
        assert by_page[c.page][c.start : c.end] == c.text
        assert c.text == c.text.strip() and c.text
        assert len(c.text) <= config.target_size * 4
        assert c.tokens == count_tokens(c.text)
        assert c.id.startswith("chk_") and len(c.id) == 20


@pytest.mark.parametrize("seed", range(10))
def test_chunks_never_cross_a_section_boundary(seed: int) -> None:
    rng = random.Random(100 + seed)
    page = markdown_page(rng)
    chunks = chunk_pages("uploads/x.md", [page], Chunking(target_size=64, overlap=16))
    starts = sorted(h.start for h in page.headings)
    for c in chunks:
        inside = [s for s in starts if c.start < s < c.end]
        # Only a heading-only parent section may be merged into its first subsection.
        for s in inside:
            line_end = page.text.index("\n", s)
            previous_heading = max(h for h in starts if h < s) if any(h < s for h in starts) else None
            assert previous_heading is not None and previous_heading >= c.start
            assert page.text[previous_heading:s].count("\n") <= 1, (c.text, line_end)


def test_sections_carry_across_pages_and_ids_are_stable() -> None:
    p1 = Page(
        1,
        "# Report\n\n## Item 7\n\nStart of item seven.",
        [Heading(1, "Report", 0), Heading(2, "Item 7", 10)],
    )
    p2 = Page(2, "Continued text on page two.", [])
    chunks = chunk_pages("uploads/r.pdf", [p1, p2], Chunking())
    assert chunks[-1].page == 2
    assert chunks[-1].section_path == ["Report", "Item 7"]
    again = chunk_pages("uploads/r.pdf", [p1, p2], Chunking())
    assert [c.id for c in chunks] == [c.id for c in again]
    moved = chunk_pages("uploads/other.pdf", [p1, p2], Chunking())
    assert chunks[-1].id != moved[-1].id


def test_overlap_repeats_text_between_neighbours() -> None:
    text = " ".join(f"word{i}" for i in range(400))
    spans = list(split_span(text, 0, len(text), target=400, overlap=80))
    assert len(spans) > 5
    for (_a1, e1), (a2, _e2) in itertools.pairwise(spans):
        assert a2 < e1  # neighbours overlap
        assert text[a2 - 1] == " "  # and each starts on a word boundary
    assert spans[-1][1] == len(text)


def test_window_prefers_paragraph_breaks() -> None:
    para = "Sentence one is here. " * 10
    text = para.strip() + "\n\n" + para.strip()
    spans = list(split_span(text, 0, len(text), target=300, overlap=0))
    assert text[spans[0][0] : spans[0][1]] == para.strip()


def test_whitespace_only_page_gives_no_chunks() -> None:
    assert chunk_pages("uploads/e.txt", [Page(1, "   \n\n  ")], Chunking()) == []


def _minilm_window(header: str) -> Window:
    embedder = get_embedder("default", threads=None)
    assert embedder.window is not None
    return Window(embedder.window, embedder.piece_starts, lambda _path: header)


def test_chunks_fit_the_embedders_window_with_their_header() -> None:
    """The default MiniLM reads 256 word pieces; a 512-token chunk of numbers is about 450. With
    the window given, every chunk and its header fit (within a piece or two where a cut splits a
    word), and the chunks are still exact slices that cover the page."""
    embedder = get_embedder("default", threads=None)
    rng = random.Random(7)
    rows = [
        f"{rng.choice(WORDS)} {rng.choice(WORDS)} {rng.randint(100, 99999):,} ({rng.randint(1, 999)}) "
        f"{rng.randint(1, 99)}.{rng.randint(0, 9)}%"
        for _ in range(400)
    ]
    page = Page(page=1, text="\n".join(rows))
    header = "Acme Corporation annual report 2023 — Item 8 > Statements of Cash Flows"
    plain = chunk_pages("a.pdf", [page], Chunking())
    fitted = chunk_pages("a.pdf", [page], Chunking(), _minilm_window(header))
    pieces = [len(embedder.piece_starts(f"{header}\n{c.text}")) + 2 for c in plain]
    assert max(pieces) > 256  # the old cut leaves part of most chunks unseen
    for chunk in fitted:
        assert page.text[chunk.start : chunk.end] == chunk.text
        assert len(embedder.piece_starts(f"{header}\n{chunk.text}")) + 2 <= 256 + 2
    covered = set().union(*(range(c.start, c.end) for c in fitted))
    assert all(i in covered or page.text[i].isspace() for i in range(len(page.text)))
    assert len(fitted) > len(plain)


def test_a_short_text_or_a_windowless_embedder_cuts_as_before() -> None:
    rng = random.Random(3)
    page = Page(page=1, text=random_text(rng, 120))
    assert chunk_pages("a.md", [page], Chunking()) == chunk_pages(
        "a.md", [page], Chunking(), _minilm_window("A short header")
    )
    lite = get_embedder("lite", threads=None)
    assert lite.window is None and lite.piece_starts("any text") == []


def _ledger(tmp_path: Path) -> Path:
    """A folder with one Markdown ledger of 300 lines of figures (many word pieces per character)."""
    corpus = tmp_path / "notes"
    corpus.mkdir()
    rng = random.Random(11)
    body = "\n".join(
        f"The {rng.choice(WORDS)} line {i} reads {rng.randint(1000, 99999):,} units." for i in range(300)
    )
    (corpus / "ledger.md").write_text(f"# Ledger\n\n{body}\n")
    return corpus


@pytest.mark.parametrize("fit", [True, False])
def test_a_compile_fits_chunks_to_the_window_unless_the_manifest_says_not(
    fit: bool, tmp_path: Path, home: Home
) -> None:
    corpus = _ledger(tmp_path)
    manifest = tmp_path / "manifest.json"
    manifest.write_text(json.dumps({"curate": {"chunks": {"chunking": {"fit_embedder": fit}}}}))
    compile_context("notes", [corpus], manifest, home=home, settings=current())
    reader = VersionReader.live(home.find("notes"))
    embedder = get_embedder("default", threads=None)
    longest = max(len(embedder.piece_starts(c.text)) for c in reader.chunks.values())
    assert (longest <= 256) is fit


def test_window_spans_read_every_word_of_a_chunk_once() -> None:
    rng = random.Random(5)
    text = random_text(rng, 900)
    window = _minilm_window("Acme Corporation annual report 2023 — Item 8")
    spans = window_spans(text, window, ["Item 8"])
    assert len(spans) >= 3
    for (_a, b), (c, _d) in itertools.pairwise(spans):
        assert b <= c and text[b:c].strip() == ""  # consecutive, no overlap, nothing skipped
    assert spans[0][0] == 0 and spans[-1][1] == len(text.rstrip())
    for i, (a, b) in enumerate(spans):
        assert len(window.starts(text[a:b])) <= window.budget(["Item 8"], i)
    assert window_spans("short text", window, []) == [(0, 10)]


def test_a_compile_reads_each_chunk_in_windows_and_a_chunk_scores_its_best(
    tmp_path: Path, home: Home
) -> None:
    """The default layout: evidence-sized chunks (up to `target_size`), one vector per window; with a
    512-token target, a chunk is read in two windows."""
    corpus = _ledger(tmp_path)
    manifest = tmp_path / "manifest.json"
    manifest.write_text(json.dumps({"curate": {"chunks": {"chunking": {"target_size": 512}}}}))
    compile_context("notes", [corpus], manifest, home=home, settings=current())
    reader = VersionReader.live(home.find("notes"))
    embedder = get_embedder("default", threads=None)
    chunks = list(reader.chunks.values())
    longest = max(len(embedder.piece_starts(c.text)) for c in chunks)
    assert 256 < longest <= 2 * 256  # two windows' worth: longer than one, never a short third
    counts = np.load(reader.root / "index" / "dense" / "chunks.rows.npy")
    matrix = np.load(reader.root / "index" / "dense" / "chunks.npy")
    assert len(counts) == len(chunks) and int(counts.sum()) == len(matrix) and counts.max() == 2
    # A query copied from the second window of a chunk finds that chunk first.
    two = next(c for c, n in zip(chunks, counts, strict=True) if n == 2)
    window = Window(embedder.window or 256, embedder.piece_starts, lambda _path: "ledger")
    (c, d) = window_spans(two.text, window, two.section_path)[1]
    hits = reader.search(two.text[c:d], top_k=1, mode="semantic")
    assert hits[0].id == two.id
