"""The error envelope of spec/api.md §4: every non-2xx answer is `{"message", "code", …}`."""

from __future__ import annotations

from typing import Any

from sleuth.errors import (
    Error,
    Told,
    ToldConflict,
    ToldInvalid,
    ToldNotFound,
    ToldTooLarge,
    ToldTooMany,
    ToldUnavailable,
)

#: The status of each `agent.turn.TurnError` code that is not a plain 400 (spec/api.md §4).
TURN_ERROR_STATUS: dict[str, int] = {
    "session_not_found": 404,
    "context_not_found": 404,
    "session_busy": 409,
    "context_not_curated": 409,
}


class ApiError(Error):
    """Raised by routes; the app turns it into the envelope with its status and extra keys."""

    def __init__(
        self, status: int, code: str, message: str, headers: dict[str, str] | None = None, **extra: Any
    ):
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message
        self.headers = headers or {}
        self.extra = extra

    def body(self) -> dict[str, Any]:
        return {"message": self.message, "code": self.code, **self.extra}


def error_responses(*pairs: tuple[int, str]) -> dict[int | str, dict[str, Any]]:
    """OpenAPI `responses=`: the documented error statuses of a route, with the envelope."""
    return {
        status: {
            "description": code,
            "content": {"application/json": {"example": {"message": code.replace("_", " "), "code": code}}},
        }
        for status, code in pairs
    }


#: The status of each kind of refusal the services below the API raise (`sleuth.errors.Told`).
TOLD_STATUS: tuple[tuple[type[Told], int], ...] = (
    (ToldNotFound, 404),
    (ToldTooLarge, 413),
    (ToldInvalid, 400),
    (ToldTooMany, 429),
    (ToldConflict, 409),
    (ToldUnavailable, 503),
)


def from_told(told: Told) -> ApiError:
    """The HTTP error a service's refusal is: its kind picks the status, its code and fields stay."""
    status = next((s for kind, s in TOLD_STATUS if isinstance(told, kind)), 500)
    headers = {"Retry-After": str(told.retry_after_s)} if told.retry_after_s is not None else None
    return ApiError(status, told.code, told.message, headers, **told.extra)
