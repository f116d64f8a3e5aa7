"""The database's clock, which decides every time in pgsched."""

from __future__ import annotations

from datetime import datetime

from app.store.db import AsyncConn


async def db_now(conn: AsyncConn) -> datetime:
    cur = await conn.execute("SELECT now() AS now")
    row = await cur.fetchone()
    assert row is not None
    now: datetime = row["now"]
    return now
