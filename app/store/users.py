"""Users: accounts that own jobs."""

from __future__ import annotations

from typing import Any

from app.store.db import AsyncConn
from app.store.queries import exec_, many, one


async def ensure(conn: AsyncConn, username: str) -> dict[str, Any]:
    row = await one(conn, "users_ensure", username=username)
    assert row is not None
    return row


async def insert(
    conn: AsyncConn,
    *,
    username: str,
    password_hash: str | None,
    job_weight: float,
    webhook_secret: str,
    is_admin: bool = False,
    shell_allowed: bool = False,
) -> dict[str, Any] | None:
    """The new user, or None if the name is taken."""
    return await one(
        conn,
        "users_insert",
        username=username,
        password_hash=password_hash,
        job_weight=job_weight,
        is_admin=is_admin,
        shell_allowed=shell_allowed,
        webhook_secret=webhook_secret,
    )


async def get_for_login(conn: AsyncConn, username: str) -> dict[str, Any] | None:
    return await one(conn, "users_get_for_login", username=username)


async def get(conn: AsyncConn, user_id: int) -> dict[str, Any] | None:
    return await one(conn, "users_get", id=user_id)


async def list_(conn: AsyncConn, *, limit: int) -> list[dict[str, Any]]:
    return await many(conn, "users_list", limit=limit)


async def update(
    conn: AsyncConn,
    user_id: int,
    *,
    job_weight: float | None,
    is_admin: bool | None,
    shell_allowed: bool | None,
) -> dict[str, Any] | None:
    return await one(
        conn,
        "users_update",
        id=user_id,
        job_weight=job_weight,
        is_admin=is_admin,
        shell_allowed=shell_allowed,
    )


async def delete(conn: AsyncConn, user_id: int) -> None:
    await exec_(conn, "users_delete", id=user_id)
