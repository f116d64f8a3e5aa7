"""The AppError hierarchy: every error a user can cause or see has a class here."""

from __future__ import annotations

from typing import TypeVar

T = TypeVar("T")


class AppError(Exception):
    """Base of every error pgsched raises on purpose; `code` is stable for clients."""

    code = "error"

    def __init__(self, message: str, *, field: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.field = field


class ValidationError(AppError):
    code = "invalid"


class InvalidScheduleError(ValidationError):
    code = "invalid_schedule"


class SettingsError(AppError):
    code = "invalid_setting"


class NotFoundError(AppError):
    code = "not_found"


class ConflictError(AppError):
    code = "conflict"


class BenchFailed(AppError):
    """A benchmark could not measure what it set out to (a worker died, a wait timed out,
    a run was not executed exactly once): its figures would mean nothing."""

    code = "bench_failed"


class ForbiddenError(AppError):
    code = "forbidden"


class StoreError(AppError):
    """The database refused or could not be reached."""

    code = "store_error"


class UnavailableError(StoreError):
    code = "unavailable"


class UnauthorizedError(AppError):
    code = "unauthorized"


class PayloadTooLargeError(AppError):
    code = "payload_too_large"


def require_found(row: T | None, what: str, ident: int) -> T:
    """The row, or NotFoundError naming what was looked for (a missing row and one the
    caller may not see are the same answer)."""
    if row is None:
        raise NotFoundError(f"{what} {ident} not found")
    return row
