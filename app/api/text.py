"""Text checks the body decoder cannot express: PostgreSQL text cannot hold NUL."""

from __future__ import annotations

from typing import Any

from app.errors import ValidationError


def _has_nul(value: Any) -> bool:
    if isinstance(value, str):
        return "\x00" in value
    if isinstance(value, dict):
        return any(_has_nul(k) or _has_nul(v) for k, v in value.items())
    if isinstance(value, list | tuple):
        return any(_has_nul(v) for v in value)
    return False


def reject_nul(**fields: Any) -> None:
    for name, value in fields.items():
        if _has_nul(value):
            raise ValidationError(f"{name} must not contain NUL characters", field=name)
