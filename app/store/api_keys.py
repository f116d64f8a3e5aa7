"""API keys: stored as hashes, shown once."""

from __future__ import annotations

from typing import Any

from app.store.db import AsyncConn
from app.store.queries import many, one


async def insert(
    conn: AsyncConn, *, user_id: int, name: str, prefix: str, key_hash: str
) -> dict[str, Any]:
    row = await one(
        conn, "api_keys_insert", user_id=user_id, name=name, prefix=prefix, key_hash=key_hash
    )
    assert row is not None
    return row


async def list_(conn: AsyncConn, user_id: int) -> list[dict[str, Any]]:
    return await many(conn, "api_keys_list", user_id=user_id)


async def delete(conn: AsyncConn, key_id: int, *, user_id: int) -> bool:
    return await one(conn, "api_keys_delete", id=key_id, user_id=user_id) is not None


async def authenticate(conn: AsyncConn, key_hash: str) -> int | None:
    row = await one(conn, "api_keys_authenticate", key_hash=key_hash)
    return int(row["user_id"]) if row else None
