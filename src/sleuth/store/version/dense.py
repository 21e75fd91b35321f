"""The dense index (`index/dense/`): one L2-normalized float32 matrix per namespace plus its id
list, searched by exact inner product (spec/stack.md §3: exact NumPy is the simplest correct answer up
to a few hundred thousand vectors per context).

A chunk may have several rows, one per embedder window (`compile.chunking.window_spans`): then
`<namespace>.rows.npy` holds how many rows each id has, rows of one id are consecutive, and an id
scores its best row. The matrix is memory-mapped, so a server holding a version keeps one copy of it,
in the page cache, shared with every other process reading the same version. A large index also has
an HNSW graph (`store.ann`) that an unfiltered search, or one over a large part of the index, reads
for candidates; their scores are still exact.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

import numpy as np
import numpy.typing as npt

from sleuth.store.version import ann

NAMESPACES = ("chunks", "artifacts")


@dataclass(frozen=True)
class DenseHit:
    id: str
    score: float  # cosine similarity (of the id's best row)


def write(
    directory: Path,
    namespace: str,
    ids: list[str],
    vectors: npt.NDArray[np.float32],
    model: str,
    dim: int,
    per_id: Sequence[int] | None = None,
) -> None:
    """`vectors` has one row per id, or `per_id[i]` consecutive rows for id i."""
    directory.mkdir(parents=True, exist_ok=True)
    with MatrixWriter(matrix_path(directory, namespace), dim) as matrix:
        matrix.append(vectors)
    write_ids(directory, namespace, ids, matrix.rows, per_id)


def matrix_path(directory: Path, namespace: str) -> Path:
    return directory / f"{namespace}.npy"


def write_ids(
    directory: Path, namespace: str, ids: list[str], rows: int, per_id: Sequence[int] | None = None
) -> None:
    """The id list of a matrix of `rows` rows: one row per id, or `per_id[i]` rows for id i."""
    if rows != (len(ids) if per_id is None else int(sum(per_id))):
        raise ValueError(f"{namespace}: {rows} rows for {len(ids)} ids")
    (directory / f"{namespace}.ids.json").write_text(json.dumps(ids), encoding="utf-8")
    counts = directory / f"{namespace}.rows.npy"
    if per_id is not None and rows != len(ids):
        if len(per_id) != len(ids) or min(per_id, default=1) < 1:
            raise ValueError("every id needs at least one row")
        np.save(counts, np.asarray(per_id, dtype=np.int32), allow_pickle=False)
    else:
        counts.unlink(missing_ok=True)


class MatrixWriter:
    """A float32 `.npy` matrix written a block of rows at a time, so that a compile never holds a
    version's vectors: the header leaves room for any row count and is completed on close."""

    HEADER = 128  # bytes: the magic, the version, the length and the header dict, padded

    def __init__(self, path: Path, dim: int) -> None:
        self.path = path
        self.dim = dim
        self.rows = 0
        self._file = path.open("wb")
        self._file.write(self._header())

    def append(self, block: npt.NDArray[np.float32]) -> None:
        rows = np.ascontiguousarray(block, dtype="<f4").reshape(-1, self.dim)
        self._file.write(rows.tobytes())
        self.rows += len(rows)

    def close(self) -> None:
        if self._file.closed:
            return
        self._file.seek(0)
        self._file.write(self._header())
        self._file.close()

    def _header(self) -> bytes:
        text = repr({"descr": "<f4", "fortran_order": False, "shape": (self.rows, self.dim)})
        text = text.ljust(self.HEADER - 11) + "\n"
        return b"\x93NUMPY\x01\x00" + len(text).to_bytes(2, "little") + text.encode("latin1")

    def __enter__(self) -> MatrixWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def read_blocks(path: Path, block_rows: int) -> Iterator[npt.NDArray[np.float32]]:
    """A saved matrix's rows, `block_rows` at a time, read rather than memory-mapped: a graph built
    from them holds one block of the matrix besides itself."""
    with path.open("rb") as fh:
        version = np.lib.format.read_magic(fh)
        read_header = (
            np.lib.format.read_array_header_1_0 if version == (1, 0) else np.lib.format.read_array_header_2_0
        )
        shape, _fortran, dtype = read_header(fh)
        rows, dim = shape
        for start in range(0, rows, block_rows):
            count = min(block_rows, rows - start)
            block = np.fromfile(fh, dtype=dtype, count=count * dim).reshape(count, dim)
            yield block.astype(np.float32, copy=False)


def write_meta(directory: Path, model: str, dim: int, counts: dict[str, int]) -> None:
    meta = {"model": model, "dim": dim, "dtype": "float32", "normalized": True, "count": counts}
    (directory / "meta.json").write_text(json.dumps(meta, indent=2), encoding="utf-8")


class DenseIndex:
    """One namespace's matrix, memory-mapped, searched exactly."""

    def __init__(self, directory: Path, namespace: str, exact_below: int = 50_000) -> None:
        """`exact_below`: a filtered search over fewer ids than this scans them exactly."""
        self._graph_file = ann.graph_path(directory, namespace)
        self._exact_below = exact_below
        self.ids: list[str] = json.loads((directory / f"{namespace}.ids.json").read_text("utf-8"))
        self.matrix: npt.NDArray[np.float32] = np.load(
            directory / f"{namespace}.npy", mmap_mode="r", allow_pickle=False
        )
        counts = directory / f"{namespace}.rows.npy"
        self._counts: npt.NDArray[np.int64] | None = (
            np.load(counts, allow_pickle=False).astype(np.int64) if counts.exists() else None
        )
        if self._counts is not None and (
            len(self._counts) != len(self.ids) or int(self._counts.sum()) != len(self.matrix)
        ):
            raise ValueError(f"{counts}: row counts do not match the matrix")

    def __len__(self) -> int:
        return len(self.ids)

    @cached_property
    def _index(self) -> dict[str, int]:
        return {cid: i for i, cid in enumerate(self.ids)}

    @cached_property
    def _first_row(self) -> npt.NDArray[np.int64]:
        assert self._counts is not None
        return np.concatenate(([0], np.cumsum(self._counts)[:-1])).astype(np.int64)

    def positions(self, ids: Sequence[str]) -> npt.NDArray[np.int64]:
        """The positions of `ids` in this index (unknown ids dropped, order kept)."""
        index = self._index
        return np.array([index[i] for i in ids if i in index], dtype=np.int64)

    def scores(
        self, vector: npt.NDArray[np.float32], positions: npt.NDArray[np.int64] | None = None
    ) -> npt.NDArray[np.float32]:
        """Each id's best row score against `vector`: every id, or those at `positions`."""
        if self._counts is None:
            rows = self.matrix if positions is None else self.matrix[positions]
            return np.asarray(rows @ vector, dtype=np.float32)
        if positions is None:
            return np.maximum.reduceat(np.asarray(self.matrix @ vector), self._first_row).astype(np.float32)
        counts = self._counts[positions]
        offsets = np.cumsum(counts) - counts
        picked = (
            np.arange(int(counts.sum()))
            - np.repeat(offsets, counts)
            + np.repeat(self._first_row[positions], counts)
        )
        return np.maximum.reduceat(np.asarray(self.matrix[picked] @ vector), offsets).astype(np.float32)

    @cached_property
    def graph(self) -> ann.Graph | None:
        """The HNSW graph, when the compile built one and the `ann` extra is here to read it."""
        if not self._graph_file.exists() or not ann.available():
            return None
        return ann.Graph(self._graph_file, len(self.matrix))

    @cached_property
    def _owner(self) -> npt.NDArray[np.int32]:
        """Row → the position of the id it belongs to."""
        if self._counts is None:
            return np.arange(len(self.ids), dtype=np.int32)
        return np.repeat(np.arange(len(self.ids), dtype=np.int32), self._counts)

    def search(
        self, vector: npt.NDArray[np.float32], top_k: int = 10, allowed: Sequence[str] | None = None
    ) -> list[DenseHit]:
        """The `top_k` best ids (of `allowed`, when given) by their best row's cosine similarity.
        Through the graph when there is one, unless the filter leaves few enough ids to scan; a
        filtered graph search that finds fewer than `top_k` allowed ids scans them instead."""
        if not self.ids or top_k < 1:
            return []
        positions = None if allowed is None else self.positions(allowed)
        if positions is not None and positions.size == 0:
            return []
        if self.graph is not None and (positions is None or positions.size >= self._exact_below):
            found = self._through_graph(self.graph, vector, top_k, positions)
            if found is not None:
                return found
        scores = self.scores(vector, positions)
        return self._top(scores, top_k, positions)

    def _through_graph(
        self,
        graph: ann.Graph,
        vector: npt.NDArray[np.float32],
        top_k: int,
        positions: npt.NDArray[np.int64] | None,
    ) -> list[DenseHit] | None:
        rows_per_id = len(self.matrix) / len(self.ids)
        share = 1.0 if positions is None else positions.size / len(self.ids)
        # Twice the ids asked for and 40 more: the graph ranks by int8 vectors, and the exact rescoring
        # of this many restores the exact top (recall figures: `store.ann`).
        count = min(len(self.matrix), int((2 * top_k + 40) * rows_per_id / share))
        owners: npt.NDArray[np.int64] = np.unique(self._owner[graph.candidates(vector, count)]).astype(
            np.int64
        )
        if positions is not None:
            owners = owners[np.isin(owners, positions)]
            if owners.size < top_k and owners.size < positions.size:
                return None
        return self._top(self.scores(vector, owners), top_k, owners)

    def _top(
        self, scores: npt.NDArray[np.float32], top_k: int, positions: npt.NDArray[np.int64] | None
    ) -> list[DenseHit]:
        if scores.size == 0:
            return []
        k = min(top_k, len(scores))
        top = np.argpartition(-scores, k - 1)[:k]
        top = top[np.argsort(-scores[top], kind="stable")]
        if positions is not None:
            return [DenseHit(self.ids[positions[i]], float(scores[i])) for i in top]
        return [DenseHit(self.ids[i], float(scores[i])) for i in top]
