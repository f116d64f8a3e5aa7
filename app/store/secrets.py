"""Secrets generated once and shared by every replica."""

from __future__ import annotations

from app.store.db import AsyncConn
from app.store.queries import one


async def get_or_create(conn: AsyncConn, name: str, value: str) -> str:
    row = await one(conn, "secrets_get_or_create", name=name, value=value)
    assert row is not None
    secret: str = row["value"]
    return secret
