"""Leadership lease rows."""

from __future__ import annotations

from datetime import datetime, timedelta

from app.store.db import AsyncConn
from app.store.queries import exec_, one


async def attempt_elect(
    conn: AsyncConn, name: str, leader_id: str, *, ttl: timedelta, now: datetime | None = None
) -> bool:
    row = await one(conn, "leaders_attempt_elect", name=name, leader_id=leader_id, ttl=ttl, now=now)
    return row is not None


async def resign(conn: AsyncConn, name: str, leader_id: str) -> None:
    await exec_(conn, "leaders_resign", name=name, leader_id=leader_id)
