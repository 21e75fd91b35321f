"""The extraction cache (spec/context.md §5.1 "Resume", §7: `cache/extract/<sha256>.json`).

Every validated reply is stored under a key that hashes what decided it: the text the model read (so
the source's content), the type's definition, the prompt version and the model. An unchanged source
therefore costs no model call, a changed type redoes only that type, and a curate killed midway
resumes from the replies it already had. Files are written atomically; a damaged one is a miss.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any


def cache_key(*parts: str) -> str:
    digest = hashlib.sha256()
    for part in parts:
        digest.update(part.encode("utf-8", "surrogatepass"))
        digest.update(b"\x1f")
    return digest.hexdigest()


class ExtractionCache:
    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.hits = 0
        self.misses = 0

    def get(self, key: str) -> dict[str, Any] | None:
        path = self.directory / f"{key}.json"
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            self.misses += 1
            return None
        reply = data.get("reply") if isinstance(data, dict) else None
        if not isinstance(reply, dict):
            self.misses += 1
            return None
        self.hits += 1
        return reply

    def put(self, key: str, reply: dict[str, Any], **about: str) -> None:
        self.directory.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=self.directory, prefix=".tmp-", suffix=".json")
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            json.dump({**about, "reply": reply}, fh, ensure_ascii=False)
        os.replace(tmp, self.directory / f"{key}.json")

    def clear(self) -> None:
        """`force`: rebuild from scratch (§5.2)."""
        shutil.rmtree(self.directory, ignore_errors=True)
