"""Approximate nearest neighbours for a large dense index: an HNSW graph over its rows.

Below `settings.ann_min_vectors` rows the exact scan (`store.dense`) is fast enough (a few ms), and
nothing here runs. Above it, the compile builds a graph with usearch (the `ann` extra: one wheel per
platform, Apache-2.0, no GPU stack), chosen because it saves a graph that is read memory-mapped
(`view=True`: a server holding a version loads nothing into its heap, and every process on the node
shares the page cache) and builds 100k vectors in seconds on two cores. The graph stores int8
vectors; its candidates are then rescored exactly against the float32 matrix, so scores are the
exact scan's and only the candidate set is approximate. Measured recall@10 against exact search:
benchmarks/search.py.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

#: Graph degree and build beam. Measured at 1M clustered vectors (recall@10 of the rescored
#: candidates against the exact scan, 200 candidates): a build beam of 64 stalls at 0.93 whatever the
#: search beam; 128 gives 0.987 at a search beam of 256 and 0.997 at 512 (1.2 ms), and builds in
#: 215 s instead of 132 s on two cores.
CONNECTIVITY = 16
EXPANSION_ADD = 128
#: The search beam, which a graph needs wider as it grows; a search asking for more candidates widens
#: it to their count. Measured at 100k clustered vectors: a beam of 128 gives recall@10 1.000 and
#: recall@50 0.978 (rescored, 60 and 140 candidates) at a third of the time of 512, whose recall@50 is
#: 0.992; at 1M, 512 (above).
EXPANSION_SEARCH = 512
SMALL_GRAPH_ROWS = 500_000
SMALL_GRAPH_EXPANSION_SEARCH = 128


def search_beam(rows: int) -> int:
    """The search beam of a graph of `rows` vectors."""
    return SMALL_GRAPH_EXPANSION_SEARCH if rows < SMALL_GRAPH_ROWS else EXPANSION_SEARCH


def _usearch() -> Any:
    """usearch's index module, loaded after onnxruntime: usearch 2.26.2 to 2.26.6 crash the process
    when onnxruntime's library loads after theirs (the `ann` extra excludes them; this keeps the
    order safe for any other build)."""
    import onnxruntime  # noqa: F401
    import usearch.index

    return usearch.index


def available() -> bool:
    """Whether the `ann` extra is installed."""
    try:
        _usearch()
    except ImportError:
        return False
    return True


def graph_path(directory: Path, namespace: str) -> Path:
    return directory / f"{namespace}.hnsw"


def build(path: Path, matrix: npt.NDArray[np.float32], threads: int = 0) -> None:
    """Write the graph of `matrix`'s rows (keys are row numbers) to `path`, whole or not at all."""
    build_blocks(path, [matrix], threads)


def build_blocks(path: Path, blocks: Iterable[npt.NDArray[np.float32]], threads: int = 0) -> None:
    """`build` from a matrix given a block of rows at a time (`dense.read_blocks`): the graph keeps
    its own 8-bit copy of each row, so the float matrix need not be held beside it."""
    index: Any = None
    added = 0
    for block in blocks:
        if index is None:
            index = _usearch().Index(
                ndim=block.shape[1],
                metric="ip",
                dtype="i8",
                connectivity=CONNECTIVITY,
                expansion_add=EXPANSION_ADD,
            )
        keys = np.arange(added, added + len(block), dtype=np.uint64)
        index.add(keys, np.ascontiguousarray(block, dtype=np.float32), threads=threads)
        added += len(block)
    if index is None:
        raise ValueError("a graph needs at least one block of rows")
    partial = path.with_name(path.name + ".partial")
    index.save(str(partial))
    os.replace(partial, path)


class Graph:
    """A saved graph, memory-mapped."""

    def __init__(self, path: Path, rows: int) -> None:
        self._index: Any = _usearch().Index.restore(str(path), view=True)
        if self._index is None or len(self._index) != rows:
            raise ValueError(f"{path}: the graph does not match the matrix")
        self._index.expansion_search = search_beam(rows)

    def candidates(self, vector: npt.NDArray[np.float32], count: int) -> npt.NDArray[np.int64]:
        """The rows of (about) the `count` nearest vectors, best first."""
        matches = self._index.search(np.ascontiguousarray(vector, dtype=np.float32), count)
        return np.asarray(matches.keys, dtype=np.int64)
