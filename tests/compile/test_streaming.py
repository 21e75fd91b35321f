"""A compile holds one source's text at a time (issue 24, bounded memory): pages and chunks are read
back from the version's files when a phase needs them, vectors go to disk a buffer at a time, and
the version is the same whatever the buffer's size."""

from __future__ import annotations

import json
import tracemalloc
from pathlib import Path

import numpy as np
import pytest

from sleuth.compile import build
from sleuth.compile.pipeline import compile_context
from sleuth.settings import current
from sleuth.store.contexts.home import Home
from sleuth.store.version.search import VersionReader

WORDS = ["pump", "valve", "steel", "supply", "Oslo", "turbine", "gasket", "flange", "invoice",
         "freight", "ledger", "audit", "harbor", "crane", "contract", "tariff", "vessel", "cargo",
         "anchor", "winch", "hull", "rudder", "ballast", "keel", "mast", "sail", "deck"]  # fmt: skip


def write_corpus(directory: Path, files: int, sections: int = 20, chars: int = 800) -> int:
    """`files` Markdown files of `sections` sections of ~`chars` characters; returns the characters."""
    directory.mkdir(parents=True)
    rng = np.random.default_rng(files)
    written = 0
    for f in range(files):
        parts = [f"# Report {f}\n"]
        for k in range(sections):
            body = " ".join(rng.choice(WORDS, size=chars // 5))[:chars]
            parts.append(f"## Part {k} of report {f}\n\n{body}\n")
        text = "\n".join(parts)
        (directory / f"report-{f:04d}.md").write_text(text, encoding="utf-8")
        written += len(text)
    return written


def lite_manifest(path: Path) -> Path:
    path.write_text(json.dumps({"curate": {"chunks": {"embedding_model": "minilm-l6-v2-static"}}}))
    return path


def live_dir(home: Home, slug: str) -> Path:
    ctx = home.find(slug)
    version = ctx.live_version()
    assert version is not None
    return ctx.version_dir(version)


def test_the_version_is_the_same_whatever_the_embedding_buffer(
    tmp_path: Path, corpus: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Windows are embedded a buffer at a time, longest first within it: the rows still land in
    chunk order (several windows per chunk with the default embedder), whatever the buffer holds."""
    write_corpus(corpus / "long", files=2, sections=4, chars=1900)  # chunks of two windows
    long_chunks = tmp_path / "manifest.json"  # 512-token chunks: two windows each
    long_chunks.write_text(json.dumps({"curate": {"chunks": {"chunking": {"target_size": 512}}}}))
    whole = Home(tmp_path / "whole")
    compile_context("docs", [corpus], long_chunks, home=whole, settings=current())
    monkeypatch.setattr(build, "EMBED_BUFFER", 2)
    small = Home(tmp_path / "small")
    compile_context("docs", [corpus], long_chunks, home=small, settings=current())
    a, b = live_dir(whole, "docs") / "index" / "dense", live_dir(small, "docs") / "index" / "dense"
    assert json.loads((a / "chunks.ids.json").read_text()) == json.loads((b / "chunks.ids.json").read_text())
    rows = np.load(a / "chunks.rows.npy")
    assert rows.max() > 1  # some chunk has several windows: the test covers their order
    assert np.array_equal(rows, np.load(b / "chunks.rows.npy"))
    # The int8 embedder quantises each batch's activations with the batch's own scale, so a vector
    # depends a little on its batch: each row is its twin's closest row, and nearly equal.
    whole_rows, small_rows = np.load(a / "chunks.npy"), np.load(b / "chunks.npy")
    similarity = whole_rows @ small_rows.T
    assert np.array_equal(similarity.argmax(axis=1), np.arange(len(whole_rows)))
    assert np.diag(similarity).min() > 0.98
    assert json.loads((a / "meta.json").read_text()) == json.loads((b / "meta.json").read_text())
    reader = VersionReader(live_dir(small, "docs"))
    assert "HW-1107" in reader.search("Which code do laptop support tickets use?", top_k=1)[0].text


def test_a_compile_does_not_hold_the_corpus(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Python's peak allocation during a compile grows by a fraction of the text it adds (each chunk's
    id, its rows and its lines' hashes: ~170 bytes a chunk, a fifth of these 800-character chunks):
    four times the corpus costs less than a third of the added text (a compile that held every page
    and chunk, as before, grew by seven times the text). tracemalloc counts Python's allocations only:
    tantivy's writer heap is fixed (`keyword.WRITER_HEAP`) and not the corpus's."""
    monkeypatch.setattr(build, "EMBED_BUFFER", 64)
    manifest = lite_manifest(tmp_path / "manifest.json")
    sizes: dict[int, tuple[int, int]] = {}
    for files in (30, 30, 120):  # the first run loads the embedder and warms every cache
        corpus = tmp_path / f"corpus-{files}-{len(sizes)}"
        chars = write_corpus(corpus, files)
        home = Home(tmp_path / f"home-{files}-{len(sizes)}")
        tracemalloc.start()
        try:
            report = compile_context("mem", [corpus], manifest, home=home, settings=current())
            _current, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
        assert report.counts["chunks"] >= files * 20
        sizes[files] = (chars, peak)
    (small_chars, small_peak), (large_chars, large_peak) = sizes[30], sizes[120]
    added = large_chars - small_chars
    assert large_peak - small_peak < 0.33 * added, (small_peak, large_peak, added)
