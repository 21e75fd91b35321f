"""What every connector is (issue 27): a source of items that can be listed and fetched one by one.

A connector lists items, each with a stable `id` (its path in the context's sources, below the
connector's folder), a `version` that changes when its content does (a git blob id, an S3 etag, a
file's size and time), and fetches one item's bytes. It does not say what was deleted: `sync` knows
what the previous sync listed, so an item no longer listed is gone. Every fetch is bounded: items
listed, bytes per item, bytes in all, and time (`Limits`). A connector that downloads or waits (web, git)
also holds the sync's `Budget`: one deadline for the whole sync, the bytes it downloads (counted before
any decoding), and the stop request of the task running it, checked between chunks and during waits.
"""

from __future__ import annotations

import fnmatch
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

from sleuth.errors import Failed, Invalid
from sleuth.settings import Settings


class ConnectorError(Failed):
    """A sync cannot go on: the remote refused, the limits were reached, the address is not allowed."""


class ConnectorConfigError(Invalid, ValueError):
    """A connector's configuration is wrong (a bad URL, a missing field): said before any sync."""


@dataclass(frozen=True)
class Item:
    id: str  # a relative POSIX path: where the item lands below the connector's folder
    version: str  # changes when the content does
    size: int | None = None  # when the listing says it (checked against the limits before a fetch)
    origin: str = ""  # where it came from, as a person finds it again: a URL, `commit:path`, `s3://…`


class Connector(Protocol):
    kind: str

    def items(self) -> Iterator[Item]:
        """Every item there is now, each once."""
        ...

    def fetch(self, item: Item, max_bytes: int) -> bytes:
        """The item's content; `ConnectorError` past `max_bytes`."""
        ...


def included(path: str, include: tuple[str, ...]) -> bool:
    """Whether an item's path matches one of a connector's `include` globs (no globs: every item)."""
    return not include or any(fnmatch.fnmatch(path, pattern) for pattern in include)


@dataclass(frozen=True)
class Limits:
    max_items: int
    max_file_bytes: int
    max_total_bytes: int
    timeout_s: float

    @classmethod
    def of(cls, settings: Settings) -> Limits:
        return cls(
            settings.connector_max_items,
            settings.max_file_bytes,
            settings.connector_max_bytes,
            settings.connector_timeout_s,
        )

    def deadline(self) -> float:
        return time.monotonic() + self.timeout_s


def _never_stopped() -> None:
    return None


@dataclass
class Budget:
    """One sync's deadline, download bytes and stop request, shared by everything the sync fetches.

    `stop` raises when the task running the sync was asked to stop (its cancel), so a crawl ends
    within a chunk or a wait, not when the last page is read."""

    deadline: float
    timeout_s: float
    max_bytes: int
    stop: Callable[[], None] = _never_stopped
    spent: int = field(default=0, init=False)

    @classmethod
    def of(cls, limits: Limits, stop: Callable[[], None] | None = None) -> Budget:
        return cls(limits.deadline(), limits.timeout_s, limits.max_total_bytes, stop or _never_stopped)

    def left_s(self) -> float:
        return self.deadline - time.monotonic()

    def check(self) -> None:
        """Raise if the sync was asked to stop or is past its deadline."""
        self.stop()
        if time.monotonic() > self.deadline:
            raise ConnectorError(f"the sync took over {self.timeout_s:.0f} s (SLEUTH_CONNECTOR_TIMEOUT_S)")

    def sleep(self, seconds: float) -> None:
        """Wait `seconds` in short slices, checking the stop request; a wait past the deadline fails
        now instead of sleeping first."""
        if seconds > self.left_s():
            raise ConnectorError(
                f"a wait of {seconds:.0f} s would pass the sync's {self.timeout_s:.0f} s "
                "(SLEUTH_CONNECTOR_TIMEOUT_S)"
            )
        end = time.monotonic() + seconds
        while (left := end - time.monotonic()) > 0:
            self.check()
            time.sleep(min(left, 0.25))
        self.check()

    def spend(self, size: int, what: str) -> None:
        """Count `size` downloaded bytes (raw, as they arrive) against the sync's byte budget."""
        self.spent += size
        if self.spent > self.max_bytes:
            raise ConnectorError(
                f"{what}: the sync downloaded over {self.max_bytes} bytes (SLEUTH_CONNECTOR_MAX_BYTES)"
            )


@runtime_checkable
class Budgeted(Protocol):
    """A connector that downloads or waits, and so takes the sync's budget before it lists."""

    budget: Budget | None
