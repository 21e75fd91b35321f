"""One error tree (`sleuth.errors`): every exception class Sleuth defines descends from `Error`,
except the sandbox's control flow, which must stay out of reach of the model's `except Exception`."""

from __future__ import annotations

import importlib
import inspect
import pkgutil

import sleuth
from sleuth.errors import Conflict, Error, Failed, Invalid, NotFound, Unavailable

# BaseException on purpose: the model's code must not be able to catch these.
CONTROL_FLOW = {"StepTimeout", "CpuBudgetExceeded", "FinalAnswer"}
SKIPPED_MODULES = ("sleuth.__main__",)


def _exception_classes() -> dict[str, type[BaseException]]:
    found: dict[str, type[BaseException]] = {}
    for info in pkgutil.walk_packages(sleuth.__path__, "sleuth."):
        if info.name in SKIPPED_MODULES:
            continue
        module = importlib.import_module(info.name)
        for name, value in vars(module).items():
            if (
                inspect.isclass(value)
                and issubclass(value, BaseException)
                and value.__module__ == module.__name__
                and not name.startswith("_")  # a module's private signal never leaves it
            ):
                found[f"{module.__name__}.{name}"] = value
    return found


def test_every_error_has_the_root() -> None:
    classes = _exception_classes()
    assert len(classes) >= 40
    outside = sorted(
        name
        for name, cls in classes.items()
        if not issubclass(cls, Error) and cls.__name__ not in CONTROL_FLOW
    )
    assert outside == []
    for name, cls in classes.items():
        if cls.__name__ in CONTROL_FLOW:
            assert not issubclass(cls, Exception), name


def test_kinds_keep_their_builtin_bases() -> None:
    from sleuth.compile.manifest import ManifestError
    from sleuth.sandbox.host import SandboxUnavailable
    from sleuth.store.contexts.home import ContextNotFound
    from sleuth.store.contexts.lock import CurateInFlight
    from sleuth.store.records.server_db import SessionBusy

    assert issubclass(ContextNotFound, NotFound) and issubclass(ContextNotFound, LookupError)
    assert issubclass(ManifestError, Invalid) and issubclass(ManifestError, ValueError)
    assert issubclass(CurateInFlight, Conflict) and issubclass(CurateInFlight, RuntimeError)
    assert issubclass(SessionBusy, Conflict)
    assert issubclass(SandboxUnavailable, Unavailable)
    assert not issubclass(Failed, (ValueError, LookupError))


def test_only_the_api_layer_carries_http_statuses() -> None:
    """A status code is HTTP's: errors outside `sleuth.api` carry none (`api.errors` maps them)."""
    from sleuth.agent.turn import TurnError

    error = TurnError("session_busy", "busy")
    assert error.code == "session_busy" and not hasattr(error, "status")
    for name, cls in _exception_classes().items():
        if not name.startswith("sleuth.api."):
            parameters = inspect.signature(cls.__init__).parameters
            numeric = [p for p in parameters.values() if "status" in p.name and p.annotation in (int, "int")]
            assert numeric == [], name  # a ledger status (`ParseError.status`) is a word, not HTTP's
