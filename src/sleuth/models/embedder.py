"""Text embedders. The default is all-MiniLM-L6-v2, int8 per-channel ONNX, run with onnxruntime
and tokenizers from files shipped inside the package (spec/stack.md, Decisions): no torch, and no hub
download, ever. The graph already mean-pools and L2-normalizes, so vectors come out unit length.
"""

from __future__ import annotations

import hashlib
import sqlite3
import threading
import time
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Protocol

import numpy as np
import numpy.typing as npt

from sleuth.errors import Unavailable

Vectors = npt.NDArray[np.float32]

DATA_DIR = Path(__file__).parent / "data" / "minilm-l6-v2"
#: Pinned so a corrupted or swapped model file fails loudly instead of embedding garbage.
MODEL_SHA256 = "91421827bde3ef1825d62527619a25c860dce6c9671d89561d5d0681815253f8"
TOKENIZER_SHA256 = "be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037"
MAX_WORD_PIECES = 256  # MiniLM's max_seq_length: the vector covers a longer text's head only


class Embedder(Protocol):
    """The seam every embedder fills: an id, a fingerprint of its weights (cached vectors from
    other weights are discarded) and unit-length vectors."""

    id: str
    dim: int
    fingerprint: str

    #: Word pieces one vector reads, special tokens included; None when it reads all of a text.
    window: int | None

    def embed(self, texts: list[str]) -> Vectors: ...

    def piece_starts(self, text: str) -> list[int]:
        """The start offset of each word piece of `text` (empty when `window` is None): the
        chunker cuts where the window ends, so that no chunk is half invisible."""
        ...


class EmbedderError(Unavailable, RuntimeError):
    """The embedder cannot run (missing or corrupt model files): a fatal compile error."""


def file_sha256(path: Path) -> str:
    """SHA-256 of a file, read in 1 MiB blocks."""
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def checked_file(path: Path, expected: str | None) -> Path:
    """`path`, once it exists and (unless `expected` is None) matches its pinned sha256: a corrupted
    or swapped model file fails loudly instead of embedding garbage."""
    if not path.is_file():
        raise EmbedderError(f"embedding model file missing: {path}")
    if expected is not None and file_sha256(path) != expected:
        raise EmbedderError(f"embedding model file does not match its pinned sha256: {path}")
    return path


class MiniLMEmbedder:
    id = "minilm-l6-v2-int8"
    dim = 384
    fingerprint = f"{MODEL_SHA256}+u8u8"  # the weights and how they are multiplied (`_load`)
    window: int | None = MAX_WORD_PIECES

    def __init__(self, data_dir: Path = DATA_DIR, batch_size: int = 32, threads: int | None = None) -> None:
        """`threads`: onnxruntime's intra-op threads (the `embed_threads` setting; None: its own choice,
        every core)."""
        self._data_dir = data_dir
        self._batch_size = batch_size
        self._threads = threads
        self._lock = threading.Lock()
        self._session: object | None = None
        self._counter: object | None = None

    def _tokenizer_file(self) -> Path:
        return checked_file(self._data_dir / "tokenizer.json", TOKENIZER_SHA256)

    def _load(self) -> tuple[object, object]:
        import onnxruntime as ort
        from tokenizers import Tokenizer

        model = checked_file(self._data_dir / "model.onnx", MODEL_SHA256)
        tokenizer = Tokenizer.from_file(str(self._tokenizer_file()))
        # The shipped tokenizer.json pads to a fixed 128; `embed` pads each batch to its longest.
        tokenizer.enable_truncation(MAX_WORD_PIECES)
        tokenizer.no_padding()
        options = ort.SessionOptions()
        # int8 products: AVX2 (and AVX-512 without VNNI) multiply u8 by s8 in pairs that saturate at
        # int16, where VNNI does not, so the same text scored up to 0.05 apart between machines and a
        # near-tie ranked differently. u8u8 on those CPUs is exact (about 10% slower): queries embed
        # bit-identically to an AVX-512 VNNI machine, passages within 0.02 (docs/spec/stack.md).
        options.add_session_config_entry("session.x64quantprecision", "1")
        if self._threads:
            options.intra_op_num_threads = self._threads
        session = ort.InferenceSession(str(model), options, providers=["CPUExecutionProvider"])
        return session, tokenizer

    @property
    def _runtime(self) -> tuple[object, object]:
        with self._lock:
            if self._session is None:
                self._session = self._load()
            return self._session  # type: ignore[return-value]

    def piece_starts(self, text: str) -> list[int]:
        with self._lock:  # the tokenizer alone: chunking needs no model session
            if self._counter is None:
                from tokenizers import Tokenizer

                counter = Tokenizer.from_file(str(self._tokenizer_file()))
                counter.no_truncation()
                counter.no_padding()
                self._counter = counter
        encoded = self._counter.encode(text, add_special_tokens=False)  # type: ignore[attr-defined]
        return [int(start) for start, _end in encoded.offsets]

    def embed(self, texts: list[str]) -> Vectors:
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        session, tokenizer = self._runtime
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        encoded = tokenizer.encode_batch([text or " " for text in texts])  # type: ignore[attr-defined]
        # Batches of similar length in word pieces (not characters: a line of figures has three times
        # the pieces of prose), each padded to its longest: padding wastes little work.
        order = sorted(range(len(texts)), key=lambda i: len(encoded[i].ids))
        for begin in range(0, len(order), self._batch_size):
            idx = order[begin : begin + self._batch_size]
            width = max(len(encoded[i].ids) for i in idx)
            feeds = {name: np.zeros((len(idx), width), dtype=np.int64) for name in _FEEDS}
            for row, i in enumerate(idx):
                e = encoded[i]
                feeds["input_ids"][row, : len(e.ids)] = e.ids
                feeds["attention_mask"][row, : len(e.ids)] = e.attention_mask
                feeds["token_type_ids"][row, : len(e.ids)] = e.type_ids
            out[idx] = session.run(None, feeds)[0]  # type: ignore[attr-defined]
        return out


_FEEDS = ("input_ids", "attention_mask", "token_type_ids")


STATIC_DIR = Path(__file__).parent / "data" / "minilm-l6-v2-static"
STATIC_SHA256 = "6a0374c4361a36b5912388f840f054c5c5de16c38ba46bfa10e9448e9bc25c54"
STATIC_TOKENIZER_SHA256 = "dd33465341c98889c3338356b6200c8b232b89af5f1b7aa8e6ee1d4d7a699631"


class StaticEmbedder:
    """The `lite` embedder: a static model2vec distillation of the same MiniLM (token vectors,
    averaged). About 100× faster than MiniLM on a CPU with lower recall (spec/stack.md §2): for very
    large corpora and quick experiments, not the default."""

    id = "minilm-l6-v2-static"
    dim = 256
    fingerprint = STATIC_SHA256
    window: int | None = None

    def __init__(self, data_dir: Path = STATIC_DIR, check_hashes: bool = True) -> None:
        self._data_dir = data_dir
        self._check = check_hashes
        self._lock = threading.Lock()
        self._loaded: tuple[Vectors, object, int | None] | None = None

    def _load(self) -> tuple[Vectors, object, int | None]:
        from tokenizers import Tokenizer

        matrix_file, tokenizer_file = self._data_dir / "embeddings.npy", self._data_dir / "tokenizer.json"
        for path, expected in ((matrix_file, STATIC_SHA256), (tokenizer_file, STATIC_TOKENIZER_SHA256)):
            checked_file(path, expected if self._check else None)
        matrix = np.load(matrix_file, allow_pickle=False).astype(np.float32)
        tokenizer = Tokenizer.from_file(str(tokenizer_file))
        return matrix, tokenizer, tokenizer.token_to_id("[UNK]")

    def piece_starts(self, text: str) -> list[int]:
        return []  # a static model averages every token: it has no window

    def embed(self, texts: list[str]) -> Vectors:
        with self._lock:
            if self._loaded is None:
                self._loaded = self._load()
        matrix, tokenizer, unk = self._loaded
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        encoded = tokenizer.encode_batch(texts, add_special_tokens=False)  # type: ignore[attr-defined]
        for i, enc in enumerate(encoded):
            ids = [t for t in enc.ids if t != unk]
            if ids:
                out[i] = matrix[ids].mean(axis=0)
        norms = np.linalg.norm(out, axis=1, keepdims=True)
        return (out / np.where(norms == 0, 1.0, norms)).astype(np.float32)


_embedders_lock = threading.Lock()


def get_embedder(name: str, *, threads: int | None) -> Embedder:
    """Resolve a manifest's `embedding_model` id, run on `threads` (the process's `embed_threads`
    setting); one loaded model per process, even when threads ask at once (a worker's jobs and its
    start-up warm-up)."""
    with _embedders_lock:
        return _embedder(name, threads)


@cache
def _embedder(name: str, threads: int | None) -> Embedder:
    if name in ("default", MiniLMEmbedder.id):
        return MiniLMEmbedder(threads=threads)
    if name in ("lite", StaticEmbedder.id):
        return _static()  # NumPy on the calling thread: no pool to size
    raise EmbedderError(f"unknown embedding model {name!r}")


@cache
def _static() -> StaticEmbedder:
    return StaticEmbedder()


_opening = threading.Lock()
OPEN_ATTEMPTS = 40  # about 40 s of waiting in all, like the connection's busy timeout


@dataclass
class EmbeddingCache:
    """SHA-256 of the text → vector, per model: a vector is a pure function of model and text, so
    re-compiles, changed manifests and `--force` never embed the same text twice."""

    path: Path
    dim: int
    fingerprint: str

    def __post_init__(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._db = sqlite3.connect(self.path, timeout=30)
        # Two parts of a curate open the cache at once (threads of a worker, or processes on one home).
        # Switching a new file to WAL cannot wait on the busy handler, so it is retried, and the
        # threads of this process take turns.
        with _opening:
            for attempt in range(OPEN_ATTEMPTS):
                try:
                    self._db.execute("PRAGMA journal_mode=WAL")
                    break
                except sqlite3.OperationalError as exc:
                    if "locked" not in str(exc) or attempt == OPEN_ATTEMPTS - 1:
                        raise
                    time.sleep(0.05 * (attempt + 1))
            self._setup()

    def _setup(self) -> None:
        with self._db:
            self._db.execute("CREATE TABLE IF NOT EXISTS vectors (sha TEXT PRIMARY KEY, vec BLOB NOT NULL)")
            self._db.execute("CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT)")
            row = self._db.execute("SELECT value FROM meta WHERE key = 'fingerprint'").fetchone()
            if row is None or row[0] != self.fingerprint:
                # Vectors from other weights would silently mix spaces: start over.
                self._db.execute("DELETE FROM vectors")
                self._db.execute("INSERT OR REPLACE INTO meta VALUES ('fingerprint', ?)", (self.fingerprint,))

    @classmethod
    def for_embedder(cls, directory: Path, embedder: Embedder) -> EmbeddingCache:
        return cls(directory / f"{embedder.id}.sqlite", embedder.dim, embedder.fingerprint)

    def get_many(self, shas: list[str]) -> dict[str, Vectors]:
        found: dict[str, Vectors] = {}
        unique = list(dict.fromkeys(shas))
        for begin in range(0, len(unique), 500):
            part = unique[begin : begin + 500]
            marks = ",".join("?" * len(part))
            for sha, blob in self._db.execute(f"SELECT sha, vec FROM vectors WHERE sha IN ({marks})", part):
                vec = np.frombuffer(blob, dtype=np.float32)
                if vec.shape == (self.dim,):
                    found[sha] = vec
        return found

    def put_many(self, items: dict[str, Vectors]) -> None:
        with self._db:
            self._db.executemany(
                "INSERT OR REPLACE INTO vectors (sha, vec) VALUES (?, ?)",
                [(sha, np.asarray(v, dtype=np.float32).tobytes()) for sha, v in items.items()],
            )

    def close(self) -> None:
        self._db.close()


def text_sha(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def embed_cached(embedder: Embedder, cache: EmbeddingCache, texts: list[str]) -> tuple[Vectors, int]:
    """Vectors for `texts`, computing only those not in the cache; returns (vectors, computed)."""
    shas = [text_sha(t) for t in texts]
    known = cache.get_many(shas)
    missing = [i for i, sha in enumerate(shas) if sha not in known]
    missing_texts = list(dict.fromkeys(texts[i] for i in missing))
    if missing_texts:
        fresh = embedder.embed(missing_texts)
        new = {text_sha(t): fresh[j] for j, t in enumerate(missing_texts)}
        cache.put_many(new)
        known.update(new)
    out = np.zeros((len(texts), embedder.dim), dtype=np.float32)
    for i, sha in enumerate(shas):
        out[i] = known[sha]
    return out, len(missing_texts)
