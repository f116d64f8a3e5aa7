"""Partitions of runs and run_logs."""

from __future__ import annotations

from datetime import datetime, timedelta

import psycopg
from psycopg import errors as pg_errors

from app.store.db import AsyncConn
from app.store.queries import many, one


async def ensure(
    conn: AsyncConn,
    *,
    behind: timedelta,
    ahead: timedelta,
    minutes: int,
    now: datetime | None = None,
) -> int:
    row = await one(conn, "partitions_ensure", behind=behind, ahead=ahead, minutes=minutes, now=now)
    return int(row["made"]) if row else 0


async def drop_expired(
    conn: AsyncConn, *, retention: timedelta, now: datetime | None = None
) -> list[str]:
    rows = await many(conn, "partitions_drop_expired", retention=retention, now=now)
    return [r["suffix"] for r in rows]


def missing(exc: psycopg.Error) -> bool:
    """Whether `exc` says a row had no partition to go to: a CHECK violation that names no
    constraint (its message text may be translated, so it is not read)."""
    return isinstance(exc, pg_errors.CheckViolation) and exc.diag.constraint_name is None
