"""Refresh tokens: opaque, hashed, rotated on use."""

from __future__ import annotations

from datetime import timedelta

from app.store.db import AsyncConn
from app.store.queries import exec_, one


async def insert(conn: AsyncConn, *, user_id: int, token_hash: str, ttl: timedelta) -> None:
    await exec_(conn, "refresh_tokens_insert", user_id=user_id, token_hash=token_hash, ttl=ttl)


async def consume(conn: AsyncConn, token_hash: str) -> int | None:
    """The user id of a valid token, which is used up; None if unknown or expired."""
    row = await one(conn, "refresh_tokens_consume", token_hash=token_hash)
    return int(row["user_id"]) if row and row["valid"] else None
