"""What extraction made of each type: built, screened (and why), quotes verified, and the sources whose
calls failed. Counters are shared by the threads of one run, hence the lock."""

from __future__ import annotations

import dataclasses
import threading
from dataclasses import dataclass, field
from typing import Any


@dataclass
class TypeStats:
    """What extraction made of one type: built, screened and why, quotes verified."""

    built: int = 0
    screened: int = 0
    quotes_verified: int = 0
    quotes_rejected: int = 0
    values_rejected: int = 0  # model-made values not stated in their quotes (rows screened, dates dropped)
    mentions: int = 0
    groups: int = 0
    truncated_sources: int = 0
    reasons: dict[str, int] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)

    def count(self, name: str, n: int = 1) -> None:
        """Add `n` to counter `name` (calls run on several threads)."""
        with self._lock:
            setattr(self, name, getattr(self, name) + n)

    def screen(self, reason: str, n: int = 1) -> None:
        with self._lock:
            self.screened += n
            self.reasons[reason] = self.reasons.get(reason, 0) + n

    def to_json(self) -> dict[str, Any]:
        with self._lock:
            out = {
                f.name: getattr(self, f.name) for f in dataclasses.fields(self) if not f.name.startswith("_")
            }
            out["reasons"] = dict(self.reasons)
            return out


@dataclass
class SourceError:
    """A call that failed after its retries, for the source (or subject) it was about."""

    source: str
    type: str
    error: str
    transient: bool = True  # a timeout, 429 or 5xx: the next curate tries it again
