"""Users: accounts that own jobs."""

from __future__ import annotations

from typing import Any

from app.store.db import AsyncConn
from app.store.queries import one


async def ensure(conn: AsyncConn, username: str) -> dict[str, Any]:
    row = await one(conn, "users_ensure", username=username)
    assert row is not None
    return row


async def get_by_name(conn: AsyncConn, username: str) -> dict[str, Any] | None:
    return await one(conn, "users_get_by_name", username=username)
