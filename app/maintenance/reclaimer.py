"""The reclaimer (leader only): runs whose lease expired become `lost`.

A worker that died (kill -9, lost host, partition) stops renewing; once its lease is
past, each of its runs is marked `lost` and gets its next attempt due now, or with no
attempts left becomes a dead letter. The expiry is re-checked inside the UPDATE
(sql/runs.sql runs_reclaim) so a renewal that lands meanwhile wins.
"""

from __future__ import annotations

import structlog

from app.maintenance.service import LeaderService
from app.store import runs, workers

log = structlog.get_logger("pgsched.reclaimer")

BATCH = 1000


class Reclaimer(LeaderService):
    name = "reclaimer"

    interval_setting = "reclaim_interval"

    async def run_once(self) -> int:
        total = 0
        while True:
            async with self._pool.connection() as conn:
                lost = await runs.reclaim(conn, limit=BATCH)
            for row in lost:
                log.warning(
                    "run_lost",
                    run_id=row["id"],
                    job_id=row["job_id"],
                    attempt=row["attempt"],
                    worker_id=row["worker_id"],
                    dead=row["dead"],
                )
            total += len(lost)
            if len(lost) < BATCH:
                break
        async with self._pool.connection() as conn:
            await workers.prune(conn, stale=self._settings.lease * 4)
        return total
