"""The embedding cache (`models/embedder.EmbeddingCache`): opened by many at once, as the parts of a
shared curate open it (threads of one worker, and processes on one home)."""

from __future__ import annotations

import subprocess
import sys
import threading
from pathlib import Path

import numpy as np

from sleuth.models.embedder import EmbeddingCache

OPEN_AND_PUT = """
import sys
import numpy as np
from pathlib import Path
from sleuth.models.embedder import EmbeddingCache
cache = EmbeddingCache(Path(sys.argv[1]), 4, "fp")
cache.put_many({sys.argv[2]: np.full(4, 2.0, np.float32)})
cache.close()
"""


def test_a_new_cache_opened_by_many_at_once_loses_nothing(tmp_path: Path) -> None:
    path = tmp_path / "cache" / "model.sqlite"
    errors: list[str] = []

    def put(key: str) -> None:
        try:
            cache = EmbeddingCache(path, 4, "fp")
            cache.put_many({key: np.ones(4, np.float32)})
            cache.close()
        except Exception as exc:  # recorded: the assert shows it
            errors.append(repr(exc))

    others = [
        subprocess.Popen([sys.executable, "-c", OPEN_AND_PUT, str(path), f"proc-{n}"]) for n in range(2)
    ]
    threads = [threading.Thread(target=put, args=(f"thread-{n}",)) for n in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert [proc.wait(timeout=120) for proc in others] == [0, 0]
    assert errors == []
    cache = EmbeddingCache(path, 4, "fp")
    keys = [f"thread-{n}" for n in range(8)] + ["proc-0", "proc-1"]
    found = cache.get_many(keys)
    cache.close()
    assert sorted(found) == sorted(keys)
    assert float(found["proc-0"][0]) == 2.0 and float(found["thread-0"][0]) == 1.0
