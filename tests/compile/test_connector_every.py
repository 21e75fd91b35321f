"""A connector's period is a finite duration (issue 40, item 11): `every: NaN` was stored and, comparing
false with every time, was due at every tick of the schedule."""

from __future__ import annotations

import json
import math

import pytest

from sleuth.compile.connectors import registry
from sleuth.compile.connectors.base import ConnectorConfigError
from sleuth.store.contexts.home import Home


@pytest.mark.parametrize("every", [math.nan, math.inf, -60.0, 30, 10**12, "1e999"])
def test_a_period_that_is_not_a_duration_is_refused(every: float | str) -> None:
    with pytest.raises(ConnectorConfigError):
        registry.parse_every(every)


def test_a_stored_nan_period_is_no_schedule(home: Home) -> None:
    ctx = home.create("kb", "KB")
    (ctx.root / "connectors.json").write_text(
        json.dumps({"docs": {"name": "docs", "kind": "folder", "config": {}, "every_s": math.nan}}),
        encoding="utf-8",
    )
    assert registry.load(ctx)["docs"].every_s is None
    assert registry.parse_every("1h") == 3600.0
