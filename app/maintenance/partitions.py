"""The partition keeper (leader only): partitions of runs ahead of time, and retention by
dropping whole partitions whose runs have all finished (no mass DELETE, no bloat)."""

from __future__ import annotations

from collections.abc import Callable

import structlog
from psycopg_pool import AsyncConnectionPool

from app.maintenance.service import Service
from app.settings import Settings
from app.store import partitions, runs
from app.store.db import AsyncConn

log = structlog.get_logger("pgsched.partitions")


class PartitionKeeper(Service):
    name = "partition-keeper"

    def __init__(
        self,
        pool: AsyncConnectionPool[AsyncConn],
        settings: Settings,
        is_leader: Callable[[], bool],
    ) -> None:
        super().__init__(settings.keeper_interval)
        self._pool = pool
        self._settings = settings
        self._is_leader = is_leader

    def should_run(self) -> bool:
        return self._is_leader()

    async def run_once(self) -> tuple[int, list[str]]:
        s = self._settings
        async with self._pool.connection() as conn, conn.transaction():
            made = await partitions.ensure(
                conn,
                behind=runs.INSERT_MARGIN,
                ahead=s.partition_premake,
                minutes=s.partition_minutes,
            )
        async with self._pool.connection() as conn, conn.transaction():
            dropped = await partitions.drop_expired(conn, retention=s.retention)
        if made or dropped:
            log.info("partitions_kept", created=made, dropped=dropped)
        return made, dropped
