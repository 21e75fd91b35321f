"""What a compile reports as it runs (`Progress`, per phase) and when it ends (`CompileReport`: the
delta, the version built, counts, failures, warnings and timings).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, Protocol


class Progress(Protocol):
    """Where a compile reports its phases; the CLI draws a progress bar per phase."""

    def start(self, phase: str, total: int) -> None: ...
    def advance(self, phase: str, amount: int = 1) -> None: ...
    def finish(self, phase: str) -> None: ...
    def tokens(self, prompt: int, completion: int) -> None:
        """The model tokens spent so far (curation with a model); a server shows them in task stats."""
        ...


class NullProgress:
    def start(self, phase: str, total: int) -> None:
        pass

    def tokens(self, prompt: int, completion: int) -> None:
        pass

    def advance(self, phase: str, amount: int = 1) -> None:
        pass

    def finish(self, phase: str) -> None:
        pass


@dataclass
class CompileReport:
    context: str
    version: str | None
    parent: str | None
    flipped: bool
    delta: str  # "empty" | "changed"
    new: list[str] = field(default_factory=list)
    changed: list[str] = field(default_factory=list)
    deleted: list[str] = field(default_factory=list)
    unchanged: list[str] = field(default_factory=list)
    failures: dict[str, dict[str, str]] = field(default_factory=dict)
    counts: dict[str, Any] = field(default_factory=dict)
    timings: dict[str, float] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)
    artifacts_skipped_no_model: dict[str, str] = field(default_factory=dict)
    imported: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    def tally(self) -> dict[str, int]:
        """The sources as a summary counts them: every source seen (`total`: those the snapshot listed
        and those left out at import), those compiled (`compiled`: read without a failure), and of
        those the new and changed ones; a source that failed or was skipped counts in none of these
        but `total`, whatever it was before."""
        listed = {*self.new, *self.changed, *self.unchanged}
        return {
            "total": len(listed | set(self.failures)),
            "compiled": len(listed - set(self.failures)),
            "new": sum(1 for path in self.new if path not in self.failures),
            "changed": sum(1 for path in self.changed if path not in self.failures),
            "deleted": len(self.deleted),
        }
