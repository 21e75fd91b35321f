"""The store tests' fixtures: `db` is the server database on each backend (`database_target`), the
conformance suite's subject."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from sleuth.store.records.server_db import ServerDB


@pytest.fixture
def db(database_target: str, tmp_path: Path) -> Iterator[ServerDB]:
    store = ServerDB(database_target, replay_root=tmp_path)
    yield store
    store.close()
