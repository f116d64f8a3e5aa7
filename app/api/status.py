"""The HTTP status of each application error: the one mapping the API's JSON errors and
the dashboard's error pages share."""

from __future__ import annotations

from app.errors import (
    AppError,
    ConflictError,
    ForbiddenError,
    NotFoundError,
    PayloadTooLargeError,
    UnauthorizedError,
    UnavailableError,
    ValidationError,
)

STATUS = {
    ValidationError: 400,
    UnauthorizedError: 401,
    ForbiddenError: 403,
    NotFoundError: 404,
    ConflictError: 409,
    PayloadTooLargeError: 413,
    UnavailableError: 503,
}


def status_of(exc: AppError) -> int:
    return next((s for cls, s in STATUS.items() if isinstance(exc, cls)), 500)
