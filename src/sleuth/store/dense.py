"""The dense index (`index/dense/`): one L2-normalized float32 matrix per namespace plus its id
list, searched by exact inner product (spec/stack.md §3: exact NumPy is the simplest correct answer up
to a few hundred thousand vectors per context)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import numpy.typing as npt

NAMESPACES = ("chunks", "artifacts")


@dataclass(frozen=True)
class DenseHit:
    id: str
    score: float  # cosine similarity


def write(
    directory: Path, namespace: str, ids: list[str], vectors: npt.NDArray[np.float32], model: str, dim: int
) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    matrix = np.ascontiguousarray(vectors, dtype=np.float32).reshape(len(ids), dim)
    np.save(directory / f"{namespace}.npy", matrix, allow_pickle=False)
    (directory / f"{namespace}.ids.json").write_text(json.dumps(ids), encoding="utf-8")


def write_meta(directory: Path, model: str, dim: int, counts: dict[str, int]) -> None:
    meta = {"model": model, "dim": dim, "dtype": "float32", "normalized": True, "count": counts}
    (directory / "meta.json").write_text(json.dumps(meta, indent=2), encoding="utf-8")


class DenseIndex:
    """One namespace's matrix, loaded once, searched exactly."""

    def __init__(self, directory: Path, namespace: str) -> None:
        self.ids: list[str] = json.loads((directory / f"{namespace}.ids.json").read_text("utf-8"))
        self.matrix: npt.NDArray[np.float32] = np.load(directory / f"{namespace}.npy", allow_pickle=False)
        self._row = {cid: i for i, cid in enumerate(self.ids)}

    def __len__(self) -> int:
        return len(self.ids)

    def search(
        self, vector: npt.NDArray[np.float32], top_k: int = 10, allowed: Sequence[str] | None = None
    ) -> list[DenseHit]:
        if not self.ids:
            return []
        if allowed is not None:
            rows = np.array([self._row[i] for i in allowed if i in self._row], dtype=np.int64)
            if rows.size == 0:
                return []
            scores = self.matrix[rows] @ vector
            ids = [self.ids[r] for r in rows]
        else:
            scores = self.matrix @ vector
            ids = self.ids
        k = min(top_k, len(ids))
        top = np.argpartition(-scores, k - 1)[:k]
        top = top[np.argsort(-scores[top], kind="stable")]
        return [DenseHit(ids[i], float(scores[i])) for i in top]
