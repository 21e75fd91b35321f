"""Types the agent tests share; the fixtures are in `conftest.py`, which tests never import."""

from __future__ import annotations

from collections.abc import Callable

from sleuth.agent.turn import Runtime

#: `make_runtime(replies, protocol="native")`: a Runtime whose provider models are scripted.
RuntimeFactory = Callable[..., Runtime]
