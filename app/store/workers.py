"""Worker registry rows."""

from __future__ import annotations

from datetime import datetime, timedelta

from app.store.db import AsyncConn
from app.store.queries import exec_


async def register(conn: AsyncConn, *, id: str, hostname: str, pid: int, concurrency: int) -> None:
    await exec_(
        conn, "workers_register", id=id, hostname=hostname, pid=pid, concurrency=concurrency
    )


async def heartbeat(
    conn: AsyncConn, *, id: str, hostname: str, pid: int, concurrency: int, running: int
) -> None:
    await exec_(
        conn,
        "workers_heartbeat",
        id=id,
        hostname=hostname,
        pid=pid,
        concurrency=concurrency,
        running=running,
    )


async def deregister(conn: AsyncConn, id: str) -> None:
    await exec_(conn, "workers_deregister", id=id)


async def prune(conn: AsyncConn, *, stale: timedelta, now: datetime | None = None) -> None:
    await exec_(conn, "workers_prune", stale=stale, now=now)
