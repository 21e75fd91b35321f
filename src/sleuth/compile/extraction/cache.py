"""The extraction cache (spec/context.md §5.1 "Resume", §7: `cache/extract/<sha256>.json`).

Every validated reply is stored under a key that hashes what decided it: the text the model read (so
the source's content), the type's definition, the prompt version and the model. An unchanged source
therefore costs no model call, a changed type redoes only that type, and a curate killed midway
resumes from the replies it already had. Files are written atomically; a damaged one is a miss, and
so is one over `MAX_ENTRY_BYTES` (never written, and never read whole if an older run left one).

With shared storage (many machines) each entry is also stored there, under the context: any worker
that curates the context next finds the replies, whichever worker paid for them.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

from sleuth.store.contexts.home import ContextDir
from sleuth.store.contexts.replica import context_storage
from sleuth.store.storage import ObjectMissing, Storage

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
    def __init__(self, directory: Path, shared: Storage | None = None, prefix: str = "") -> None:
        self.directory = directory
        self.shared = shared
        self.prefix = prefix
        self.hits = 0
        self.misses = 0

    @classmethod
    def of(cls, ctx: ContextDir) -> ExtractionCache:
        """The context's cache: its `cache/extract/`, backed by the shared storage when there is one."""
        return cls(ctx.extraction_cache, context_storage(ctx), f"contexts/{ctx.root.name}/extract")

    def _fetch(self, key: str, path: Path) -> None:
        """Copy a shared entry here (a miss stays a miss; an oversize one is never written here)."""
        if self.shared is None or path.exists():
            return
        try:
            data = self.shared.get_bytes(f"{self.prefix}/{key}.json")
        except ObjectMissing:
            return
        if len(data) <= MAX_ENTRY_BYTES:
            self._write(key, data)

    def fill(self) -> int:
        """Copy every shared entry that is not here yet (a pack carries the whole cache); how many."""
        if self.shared is None:
            return 0
        fetched = 0
        for name in self.shared.keys(self.prefix):
            key = name.rsplit("/", 1)[-1].removesuffix(".json")
            if len(key) == 64 and not (self.directory / f"{key}.json").exists():
                self._fetch(key, self.directory / f"{key}.json")
                fetched += 1
        return fetched

    def publish(self) -> int:
        """Store every entry made here (a restored pack's) that the shared storage lacks; how many."""
        if self.shared is None or not self.directory.is_dir():
            return 0
        stored = {name.rsplit("/", 1)[-1] for name in self.shared.keys(self.prefix)}
        sent = 0
        for path in self.directory.glob("*.json"):
            if path.name not in stored and len(path.stem) == 64 and path.stat().st_size <= MAX_ENTRY_BYTES:
                self.shared.put_file(f"{self.prefix}/{path.name}", path)
                sent += 1
        return sent

    def get(self, key: str) -> dict[str, Any] | None:
        path = self.directory / f"{key}.json"
        self._fetch(key, path)
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
        self._write(key, data)
        if self.shared is not None:
            self.shared.put_bytes(f"{self.prefix}/{key}.json", data)
        return True

    def _write(self, key: str, data: bytes) -> None:
        self.directory.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=self.directory, prefix=".tmp-", suffix=".json")
        try:
            with os.fdopen(fd, "wb") as fh:
                fh.write(data)
            os.replace(tmp, self.directory / f"{key}.json")
        finally:
            Path(tmp).unlink(missing_ok=True)

    def clear(self) -> None:
        """`force`: rebuild from scratch (§5.2), here and in the shared storage."""
        shutil.rmtree(self.directory, ignore_errors=True)
        if self.shared is not None:
            self.shared.delete(list(self.shared.keys(self.prefix)))
