"""The extraction cache (spec/context.md §5.1 "Resume", §7: `cache/extract/<sha256>.json`).

Every validated reply is stored under a key that hashes what decided it: the text the model read (so
the source's content), the type's definition, the prompt version and the model. An unchanged source
therefore costs no model call, a changed type redoes only that type, and a curate killed midway
resumes from the replies it already had. Files are written atomically; a damaged one is a miss, and
so is one over `MAX_ENTRY_BYTES` (never written, and never read whole if an older run left one).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

#: The largest cache entry written or read: twice the longest reply the client accepts
#: (`client.MAX_REPLY_BYTES`), room for the fields validation fills in.
MAX_ENTRY_BYTES = 1024 * 1024


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
            if path.stat().st_size > MAX_ENTRY_BYTES:
                raise ValueError("oversize entry")
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError, RecursionError):
            self.misses += 1
            return None
        reply = data.get("reply") if isinstance(data, dict) else None
        if not isinstance(reply, dict):
            self.misses += 1
            return None
        self.hits += 1
        return reply

    def put(self, key: str, reply: dict[str, Any], **about: str) -> bool:
        """Store a reply; False (nothing written) when it is over `MAX_ENTRY_BYTES`. A lone surrogate
        is written as its JSON escape (`backslashreplace` gives exactly that inside a JSON string),
        so a write never fails on text that is not valid Unicode."""
        data = json.dumps({**about, "reply": reply}, ensure_ascii=False).encode("utf-8", "backslashreplace")
        if len(data) > MAX_ENTRY_BYTES:
            return False
        self.directory.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=self.directory, prefix=".tmp-", suffix=".json")
        try:
            with os.fdopen(fd, "wb") as fh:
                fh.write(data)
            os.replace(tmp, self.directory / f"{key}.json")
        finally:
            Path(tmp).unlink(missing_ok=True)
        return True

    def clear(self) -> None:
        """`force`: rebuild from scratch (§5.2)."""
        shutil.rmtree(self.directory, ignore_errors=True)
