"""The root of every error Sleuth raises, and the five kinds a caller tells apart.

    Error
    ├── NotFound      the thing named does not exist          ContextNotFound, SessionNotFound,
    │                                                         QueryNotFound, TaskNotFound,
    │                                                         NotFoundError (SDK)
    ├── Invalid       the input is wrong, and stays wrong     InvalidSlug, UnsafePath, ManifestError,
    │                                                         CatalogError, KeyStoreError, ShapeError,
    │                                                         InvalidQueryId, EvalDataError,
    │                                                         ArchiveRefused, ServeError
    ├── Conflict      the state forbids it now; it may pass   CurateInFlight, SessionBusy,
    │                 later                                   ComparisonGroupFull
    ├── Unavailable   a part it needs is missing or down      SandboxUnavailable, EmbedderError,
    │                                                         ModelError, MissingExtra
    ├── Failed        the work started and broke              CompileError, ParseError, SandboxDied,
    │                                                         BudgetExceeded, ProtocolError,
    │                                                         ReplayError, TurnFailed, ShapeInvalid,
    │                                                         OfflineShapeError, TaskCancelled,
    │                                                         TaskStopTimeout, BudgetExhausted
    ├── Told          a request refused with the `code` and fields a client reads (spec/api.md §4),
    │                 raised below the API; each is also one of the kinds above (`ToldNotFound`,
    │                 `ToldInvalid`, `ToldConflict`, `ToldUnavailable`), which alone picks its status
    ├── TurnError     a turn refused before it starts, with spec/api.md §4's `code` (agent.turn)
    ├── SleuthError   what the SDK raises into the model's code (sdk.errors; its own small tree)
    └── ApiError      an HTTP error with its status and envelope (api.errors): the only errors
                      that carry a status code. ToolFailure is MCP's.

Each class keeps the built-in base it had (`LookupError`, `ValueError`, `RuntimeError`), so code that
catches those still catches it. Outside the tree on purpose: the sandbox's control flow
(`StepTimeout`, `CpuBudgetExceeded`, `FinalAnswer`), which derives from `BaseException` so that the
model's own `except Exception` cannot swallow it; and a module's private signals (`_Skip`,
`_LimitHit`, ...), which never leave the module that raises them.
"""

from __future__ import annotations

import importlib.util
from typing import Any

__all__ = [
    "Conflict",
    "Error",
    "Failed",
    "Invalid",
    "MissingExtra",
    "NotFound",
    "Told",
    "ToldConflict",
    "ToldInvalid",
    "ToldNotFound",
    "ToldTooLarge",
    "ToldTooMany",
    "ToldUnavailable",
    "Unavailable",
    "require_extra",
]


class Error(Exception):
    """Any error of Sleuth's own."""


class NotFound(Error):
    """The thing named does not exist."""


class Invalid(Error):
    """The input is wrong: asking again unchanged fails again."""


class Conflict(Error):
    """The current state forbids it; the same request may pass later."""


class Unavailable(Error):
    """A part it needs (the sandbox, the embedder, a model provider) is missing or down."""


class Failed(Error):
    """The work started and broke."""


class Told(Error):
    """A refusal a client is told as it is: a `code` (spec/api.md §4), a sentence, and fields such as
    `field` or `slug`. Raised by the server's services, which know no HTTP; the API's one handler picks
    the status from the kind (`ToldNotFound` 404, `ToldInvalid` 400, `ToldTooLarge` 413, `ToldConflict` 409,
    `ToldTooMany` 429, `ToldUnavailable` 503)."""

    def __init__(self, code: str, message: str, *, retry_after_s: int | None = None, **extra: Any) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.retry_after_s = retry_after_s  # when asking again may pass (`Retry-After`)
        self.extra = extra


class ToldNotFound(Told, NotFound):
    """What a request names does not exist (404)."""


class ToldInvalid(Told, Invalid):
    """The request is wrong as sent (400)."""


class ToldConflict(Told, Conflict):
    """The state forbids the request now (409)."""


class ToldTooLarge(Told, Invalid):
    """What the request carries or would make is over a size limit (413)."""


class ToldTooMany(Told, Conflict):
    """A limit on what runs at once is reached; asking again later may pass (429)."""


class ToldUnavailable(Told, Unavailable):
    """A part the request needs is down (503)."""


class MissingExtra(Unavailable, ImportError):
    """A feature was asked for whose optional package is not installed. Optional packages are imported
    only where their feature runs, so the core install starts, and this names the extra to add."""

    def __init__(self, feature: str, extra: str) -> None:
        self.extra = extra
        super().__init__(
            f"{feature} needs the '{extra}' extra, which is not installed: pip install 'sleuth[{extra}]'"
        )


def require_extra(feature: str, extra: str, *modules: str) -> None:
    """`MissingExtra` unless every module can be imported: call it where the feature starts."""
    for module in modules:
        if importlib.util.find_spec(module) is None:
            raise MissingExtra(feature, extra)
