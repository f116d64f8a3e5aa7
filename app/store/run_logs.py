"""Run logs: reading what an execution printed or logged."""

from __future__ import annotations

from typing import Any

from app.store.db import AsyncConn
from app.store.queries import many


async def list_for_run(
    conn: AsyncConn, run_id: int, *, owner_id: int | None, limit: int = 10_000
) -> list[dict[str, Any]]:
    return await many(conn, "run_logs_list", run_id=run_id, owner_id=owner_id, limit=limit)
