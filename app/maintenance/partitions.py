"""The partition keeper (leader only): partitions of runs ahead of time, and retention by
dropping whole partitions whose runs have all finished (no mass DELETE, no bloat)."""

from __future__ import annotations

import structlog

from app.maintenance.service import LeaderService
from app.store import partitions, runs

log = structlog.get_logger("pgsched.partitions")


class PartitionKeeper(LeaderService):
    name = "partition-keeper"

    interval_setting = "keeper_interval"

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
