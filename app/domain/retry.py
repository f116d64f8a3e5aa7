"""Retry policy: how many attempts, and exponential backoff with a cap and jitter."""

from __future__ import annotations

import random
from dataclasses import dataclass
from datetime import timedelta

from app.errors import ValidationError

MAX_ATTEMPTS_LIMIT = 100


@dataclass(frozen=True)
class RetryPolicy:
    max_attempts: int
    backoff_base: timedelta
    backoff_max: timedelta

    def __post_init__(self) -> None:
        if not 1 <= self.max_attempts <= MAX_ATTEMPTS_LIMIT:
            raise ValidationError(
                f"max_attempts must be between 1 and {MAX_ATTEMPTS_LIMIT}", field="max_attempts"
            )
        if self.backoff_base <= timedelta(0):
            raise ValidationError("backoff_base must be positive", field="backoff_base")
        if self.backoff_max < self.backoff_base:
            raise ValidationError("backoff_max must be at least backoff_base", field="backoff_max")

    def ceiling(self, attempt: int) -> timedelta:
        """The un-jittered delay after failed attempt `attempt` (1-based)."""
        exponent = min(attempt - 1, 62)
        scaled: timedelta = self.backoff_base * (2**exponent)
        return min(self.backoff_max, scaled)

    def min_delay(self, attempt: int) -> timedelta:
        """The least delay `delay` can return: jitter never goes below half the ceiling."""
        return self.ceiling(attempt) / 2

    def delay(self, attempt: int, rng: random.Random | None = None) -> timedelta:
        """Equal jitter: half the ceiling for sure, the other half at random, so a herd of
        failures spreads out while every retry still waits at least `min_delay`."""
        ceiling = self.ceiling(attempt)
        fraction = (rng or random).random()
        return ceiling / 2 + ceiling / 2 * fraction

    def has_attempts_left(self, attempt: int) -> bool:
        return attempt < self.max_attempts
