"""The dense index: several rows per chunk (best window wins), memory-mapped, and the HNSW path
above the threshold, checked against the exact scan on generated clustered vectors."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import numpy.typing as npt
import pytest

from sleuth.compile.pipeline import compile_context
from sleuth.settings import current
from sleuth.store.contexts.home import Home
from sleuth.store.version import ann, dense
from sleuth.store.version.dense import DenseIndex
from sleuth.store.version.search import VersionReader

DIM = 32


def unit(rows: npt.NDArray[np.float32]) -> npt.NDArray[np.float32]:
    out: npt.NDArray[np.float32] = (rows / np.linalg.norm(rows, axis=-1, keepdims=True)).astype(np.float32)
    return out


def clustered(n: int, seed: int = 1) -> tuple[npt.NDArray[np.float32], npt.NDArray[np.float32]]:
    """`n` vectors around 200 topics, and 50 queries near topics (text embeddings cluster so)."""
    rng = np.random.default_rng(seed)
    centers = rng.standard_normal((200, DIM)).astype(np.float32)
    noise = rng.standard_normal((n + 50, DIM)).astype(np.float32)
    vectors = unit(centers[rng.integers(0, 200, n)] + 0.6 * noise[:n])
    queries = unit(centers[rng.integers(0, 200, 50)] + 0.8 * noise[n:])
    return vectors, queries


def test_a_chunk_scores_its_best_window(tmp_path: Path) -> None:
    rng = np.random.default_rng(0)
    rows = unit(rng.standard_normal((6, DIM)).astype(np.float32))
    dense.write(tmp_path, "chunks", ["a", "b", "c"], rows, "m", DIM, per_id=[1, 3, 2])
    index = DenseIndex(tmp_path, "chunks")
    assert isinstance(index.matrix, np.memmap)  # mapped, not read into the heap
    query = rows[2]  # b's second window
    hits = index.search(query, top_k=3)
    assert hits[0].id == "b" and hits[0].score == pytest.approx(1.0, abs=1e-5)
    expected = {"a": rows[0] @ query, "b": 1.0, "c": max(rows[4] @ query, rows[5] @ query)}
    assert {h.id: round(h.score, 5) for h in hits} == {k: round(float(v), 5) for k, v in expected.items()}
    # A filter reads only the allowed chunks' rows, and still scores each by its best one.
    assert [h.id for h in index.search(query, top_k=5, allowed=["c", "a"])] == sorted(
        ["a", "c"], key=lambda cid: -expected[cid]
    )
    assert index.search(query, top_k=5, allowed=["missing"]) == []


def test_one_row_per_chunk_writes_no_row_counts(tmp_path: Path) -> None:
    rows = unit(np.eye(3, DIM, dtype=np.float32))
    dense.write(tmp_path, "chunks", ["a", "b", "c"], rows, "m", DIM, per_id=[1, 1, 1])
    assert not (tmp_path / "chunks.rows.npy").exists()
    assert [h.id for h in DenseIndex(tmp_path, "chunks").search(rows[1], top_k=1)] == ["b"]
    with pytest.raises(ValueError, match="at least one row"):
        dense.write(tmp_path, "bad", ["a", "b"], rows, "m", DIM, per_id=[3, 0])


def test_a_matrix_written_in_blocks_is_an_ordinary_npy_file(tmp_path: Path) -> None:
    """A compile writes its vectors a buffer at a time (`MatrixWriter`) and builds the graph from the
    file a block at a time (`read_blocks`): neither holds the whole matrix."""
    vectors, _queries = clustered(1_000)
    with dense.MatrixWriter(tmp_path / "chunks.npy", DIM) as writer:
        for start in range(0, 1_000, 300):
            writer.append(vectors[start : start + 300])
    assert writer.rows == 1_000
    assert np.array_equal(np.load(tmp_path / "chunks.npy"), vectors)
    assert np.array_equal(np.concatenate(list(dense.read_blocks(tmp_path / "chunks.npy", 256))), vectors)
    np.save(tmp_path / "saved.npy", vectors)  # read_blocks reads what numpy writes, too
    assert np.array_equal(np.concatenate(list(dense.read_blocks(tmp_path / "saved.npy", 999))), vectors)
    dense.write_ids(tmp_path, "chunks", [f"c{i}" for i in range(1_000)], writer.rows)
    assert DenseIndex(tmp_path, "chunks").search(vectors[7], top_k=1)[0].id == "c7"
    with pytest.raises(ValueError, match="rows for"):
        dense.write_ids(tmp_path, "chunks", ["a", "b"], writer.rows)
    with dense.MatrixWriter(tmp_path / "empty.npy", DIM):
        pass
    assert np.load(tmp_path / "empty.npy").shape == (0, DIM)


def exact_top(vectors: npt.NDArray[np.float32], query: npt.NDArray[np.float32], k: int) -> list[int]:
    return [int(i) for i in np.argsort(-(vectors @ query), kind="stable")[:k]]


@pytest.mark.skipif(not ann.available(), reason="the `ann` extra (usearch) is not installed")
def test_graph_search_recalls_what_the_exact_scan_finds(tmp_path: Path) -> None:
    vectors, queries = clustered(20_000)
    ids = [f"c{i}" for i in range(len(vectors))]
    dense.write(tmp_path, "chunks", ids, vectors, "m", DIM)
    exact = DenseIndex(tmp_path, "chunks")
    assert exact.graph is None  # no graph written: every search scans
    # Built as a compile builds it: from the saved matrix, a block of rows at a time.
    ann.build_blocks(ann.graph_path(tmp_path, "chunks"), dense.read_blocks(tmp_path / "chunks.npy", 3_000))
    index = DenseIndex(tmp_path, "chunks", exact_below=5_000)
    assert index.graph is not None
    recall = []
    for query in queries:
        hits = index.search(query, top_k=10)
        assert len(hits) == 10
        truth = {ids[i] for i in exact_top(vectors, query, 10)}
        recall.append(len(truth & {h.id for h in hits}) / 10)
        # Scores are exact (rescored from the float32 matrix), whatever the graph stored.
        for hit in hits:
            assert hit.score == pytest.approx(float(vectors[int(hit.id[1:])] @ query), abs=1e-5)
    assert np.mean(recall) >= 0.98

    # A filter leaving few chunks scans them exactly; one leaving many goes through the graph and
    # still returns top_k of the allowed chunks, never another.
    few = ids[:300]
    many = ids[::2]
    for allowed in (few, many):
        hits = index.search(queries[0], top_k=10, allowed=allowed)
        assert len(hits) == 10 and {h.id for h in hits} <= set(allowed)
    truth_few = [ids[i] for i in exact_top(vectors[:300], queries[0], 10)]
    assert [h.id for h in index.search(queries[0], top_k=10, allowed=few)] == truth_few


@pytest.mark.skipif(not ann.available(), reason="the `ann` extra (usearch) is not installed")
def test_graph_over_window_rows_returns_distinct_chunks(tmp_path: Path) -> None:
    vectors, queries = clustered(9_000, seed=3)
    per_id = [3] * 3_000
    ids = [f"c{i}" for i in range(3_000)]
    dense.write(tmp_path, "chunks", ids, vectors, "m", DIM, per_id=per_id)
    ann.build(ann.graph_path(tmp_path, "chunks"), vectors)
    index = DenseIndex(tmp_path, "chunks", exact_below=1_000)
    best = (vectors @ queries[1]).reshape(3_000, 3).max(axis=1)
    truth = {ids[i] for i in np.argsort(-best)[:10]}
    hits = index.search(queries[1], top_k=10)
    assert len({h.id for h in hits}) == 10
    assert len(truth & {h.id for h in hits}) >= 9
    # A graph that does not match the matrix is refused, not read.
    ann.build(ann.graph_path(tmp_path, "chunks"), vectors[:100])
    with pytest.raises(ValueError, match="does not match"):
        _ = DenseIndex(tmp_path, "chunks").graph


@pytest.mark.skipif(not ann.available(), reason="the `ann` extra (usearch) is not installed")
def test_a_compile_builds_the_graph_only_from_the_threshold(
    tmp_path: Path, home: Home, monkeypatch: pytest.MonkeyPatch
) -> None:
    corpus = tmp_path / "docs"
    corpus.mkdir()
    for i in range(6):
        (corpus / f"note-{i}.md").write_text(f"# Note {i}\n\nSensor {i} drifts {i * 3} percent a year.\n")
    compile_context("small", [corpus], None, home=home, settings=current())
    below = VersionReader.live(home.find("small"))
    assert not (below.root / "index" / "dense" / "chunks.hnsw").exists()

    monkeypatch.setenv("SLEUTH_ANN_MIN_VECTORS", "1")
    settings = current()  # read once, as a command does at its start, for the compile and the reader
    compile_context("large", [corpus], None, home=home, settings=settings)
    large = home.find("large")
    above = VersionReader(
        large.version_dir(large.live_version() or ""), ann_min_vectors=settings.ann_min_vectors
    )
    dense_index = above._dense
    assert dense_index is not None and dense_index.graph is not None
    query = "How much does sensor 4 drift?"
    assert [h.id for h in above.search(query, top_k=3, mode="semantic")] == [
        h.id for h in below.search(query, top_k=3, mode="semantic")
    ]
    # A filtered search returns only the allowed source's chunks, through the graph or not.
    source = "uploads/docs/note-4.md"
    hits = above.search(query, top_k=3, mode="semantic", sources=[source])
    assert hits and {h.source_path for h in hits} == {source}
