"""What every connector is (issue 27): a source of items that can be listed and fetched one by one.

A connector lists items, each with a stable `id` (its path in the context's sources, below the
connector's folder), a `version` that changes when its content does (a git blob id, an S3 etag, a
file's size and time), and fetches one item's bytes. It does not say what was deleted: `sync` knows
what the previous sync listed, so an item no longer listed is gone. Every fetch is bounded: items
listed, bytes per item, bytes in all, and time (`Limits`).
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Protocol

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
