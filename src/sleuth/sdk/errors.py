"""SDK errors, written for the model that reads them (spec/runtime.md §5.1)."""

from __future__ import annotations

from sleuth.errors import Error, NotFound, Unavailable


class SleuthError(Error):
    """Base of every error an SDK call raises."""


class NotFoundError(SleuthError, NotFound):
    """A name that does not exist; the message lists the closest names."""


class AmbiguousError(SleuthError):
    """A name that exists in several contexts or types; the message says which `context=` to pass."""


class QueryError(SleuthError):
    """An SQL statement was refused, failed or ran too long."""


class BusyError(SleuthError, Unavailable):
    """Every SQL statement slot of the server is in use: the call is refused at once, not queued."""


class LimitError(SleuthError):
    """An argument outside its allowed range; the message gives the range."""


class HostError(SleuthError):
    """A host function (query embedding, remote index, model sub-call) failed."""
