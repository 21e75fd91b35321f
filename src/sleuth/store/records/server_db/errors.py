"""The server database's own errors, each a domain error (`sleuth.errors`) the API maps to its status."""

from __future__ import annotations

from sleuth.errors import Conflict, Error, NotFound


class ServerDBError(Error):
    """Base of the store's own errors."""


class SessionNotFound(ServerDBError, NotFound, LookupError):
    """No such session (`404 session_not_found` over HTTP)."""


class SessionBusy(ServerDBError, Conflict):
    """A turn is in flight on the session (`409 session_busy` over HTTP)."""


class QueryNotFound(ServerDBError, NotFound, LookupError):
    """No such query (`404` over HTTP)."""


class ComparisonGroupFull(ServerDBError, Conflict):
    """A comparison group already holds its 3 turns (`409 comparison_group_full` over HTTP)."""


class TurnPlacesFull(ServerDBError, Conflict):
    """Running and queued turns fill the deployment's places (`429 too_many_queries`), or the key's
    share of them (`429 key_turn_limit`, `code`)."""

    def __init__(self, code: str, message: str, held: int, limit: int) -> None:
        super().__init__(message)
        self.code, self.held, self.limit = code, held, limit
