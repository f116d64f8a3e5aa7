"""The webhook outbox."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any

from app.store.db import AsyncConn
from app.store.queries import exec_, many


async def claim(
    conn: AsyncConn, *, limit: int, lease: timedelta, now: datetime | None = None
) -> list[dict[str, Any]]:
    return await many(conn, "notifications_claim", limit=limit, lease=lease, now=now)


async def record(
    conn: AsyncConn,
    results: Sequence[tuple[int, bool, int | None, str | None, float]],
    *,
    max_attempts: int,
) -> None:
    """Record (id, ok, http status, error, retry in seconds) per delivery attempt."""
    if not results:
        return
    ids, oks, statuses, errors, retry_in = zip(*results, strict=True)
    await exec_(
        conn,
        "notifications_record",
        ids=list(ids),
        oks=list(oks),
        statuses=list(statuses),
        errors=list(errors),
        retry_in=list(retry_in),
        max_attempts=max_attempts,
    )


async def list_for_job(
    conn: AsyncConn, job_id: int, *, owner_id: int | None, limit: int
) -> list[dict[str, Any]]:
    return await many(
        conn, "notifications_list_for_job", job_id=job_id, owner_id=owner_id, limit=limit
    )
