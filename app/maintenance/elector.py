"""The elector: one leader at a time for the maintenance duties, by a lease row.

    follower --attempt_elect wins--> leader --renew ok--> leader
       ^                               |
       +---- renew fails / expires ----+   (a leader that cannot renew for a whole TTL
                                            demotes itself before anyone can take over)

A lease row (`leaders`), not a session advisory lock, so leadership survives connection
recycling and works through PgBouncer. Renewal runs every TTL/3; on stop the leader
resigns (deletes its row) so a successor is elected at once, not after the TTL.
"""

from __future__ import annotations

import contextlib

import psycopg
import structlog
from psycopg_pool import AsyncConnectionPool

from app import metrics
from app.clock import Clock
from app.maintenance.service import Service
from app.settings import Settings
from app.store import leaders
from app.store.db import AsyncConn

log = structlog.get_logger("pgsched.elector")

MAINTAINER = "maintainer"


class Elector(Service):
    name = "elector"

    def __init__(
        self,
        pool: AsyncConnectionPool[AsyncConn],
        settings: Settings,
        clock: Clock,
        leader_id: str,
    ) -> None:
        super().__init__(settings.leader_ttl / 3)
        self._pool = pool
        self._ttl = settings.leader_ttl
        self._clock = clock
        self.leader_id = leader_id
        self._is_leader = False
        self._renewed_at = 0.0
        self._on_elected: list[Service] = []

    def on_elected(self, *services: Service) -> None:
        """Services to run at once when this process becomes leader (a new leader
        reclaims the old one's expired leases without waiting an interval)."""
        self._on_elected.extend(services)

    @property
    def is_leader(self) -> bool:
        # Without a renewal for a whole TTL, someone else may lead by now.
        silent = self._clock.monotonic() - self._renewed_at
        if self._is_leader and silent >= self._ttl.total_seconds():
            self._set(False)
        return self._is_leader

    def _set(self, leader: bool) -> None:
        if leader == self._is_leader:
            return
        log.info("leader_elected" if leader else "leader_lost", leader_id=self.leader_id)
        self._is_leader = leader
        metrics.IS_LEADER.set(1 if leader else 0)
        if leader:
            for service in self._on_elected:
                service.kick()

    async def run_once(self) -> bool:
        attempted_at = self._clock.monotonic()
        try:
            async with self._pool.connection() as conn:
                won = await leaders.attempt_elect(conn, MAINTAINER, self.leader_id, ttl=self._ttl)
        except psycopg.OperationalError:
            return self.is_leader
        if won:
            self._renewed_at = attempted_at
        self._set(won)
        return won

    async def stop(self) -> None:
        await super().stop()
        if self._is_leader:
            with contextlib.suppress(psycopg.Error):
                async with self._pool.connection(timeout=2) as conn:
                    await leaders.resign(conn, MAINTAINER, self.leader_id)
            self._set(False)
