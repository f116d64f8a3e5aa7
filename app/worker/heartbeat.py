"""The heartbeat: one batched lease renewal per worker per interval, on a connection of
its own so that neither job code nor a busy pool can starve it.

A run missing from the renewal's result was reclaimed by the leader: its execution must
stop, and its outcome is dropped. If renewals fail (database unreachable) for so long
that the leases may have run out, the worker stops its own executions rather than let
two attempts of one run live at once.
"""

from __future__ import annotations

import asyncio
import os
import socket
from collections.abc import Callable

import psycopg
import structlog

from app import metrics
from app.clock import Clock
from app.domain.models import RunKey
from app.settings import Settings
from app.store import runs, workers
from app.store.db import OwnConnection, first_line

log = structlog.get_logger("pgsched.heartbeat")


class Heartbeat:
    def __init__(
        self,
        url: str,
        worker_id: str,
        settings: Settings,
        clock: Clock,
        *,
        held: Callable[[], dict[RunKey, float]],
        on_lost: Callable[[list[RunKey]], None],
        on_cancel: Callable[[list[int]], None],
        running: Callable[[], int],
    ) -> None:
        self._worker_id = worker_id
        self._settings = settings
        self._clock = clock
        self._held = held
        self._on_lost = on_lost
        self._on_cancel = on_cancel
        self._running = running
        self._conn = OwnConnection(url, name="pgsched-heartbeat")
        self.renewals = 0
        self.failures = 0

    @property
    def deadline_seconds(self) -> float:
        """A run not renewed for this long may already be someone else's: stop it."""
        s = self._settings
        return (s.lease - s.heartbeat_interval / 2).total_seconds()

    async def run(self) -> None:
        try:
            while True:
                await self.beat()
                await asyncio.sleep(self._settings.heartbeat_interval.total_seconds())
        finally:
            await self._conn.close()

    async def beat(self) -> None:
        # A snapshot: runs claimed while this statement is in flight were not sent, and
        # must not be judged by its answer (they would look lost).
        sent = list(self._held())
        sent_at = self._clock.monotonic()
        try:
            async with self._conn.use() as conn:
                if sent:
                    renewed = await runs.heartbeat(
                        conn, sent, worker_id=self._worker_id, lease=self._settings.lease
                    )
                    self._apply(sent, renewed, sent_at)
                await workers.heartbeat(
                    conn,
                    id=self._worker_id,
                    hostname=socket.gethostname(),
                    pid=os.getpid(),
                    concurrency=self._settings.concurrency,
                    running=self._running(),
                )
            self.renewals += 1
            metrics.HEARTBEATS.inc()
        except psycopg.OperationalError as exc:
            self.failures += 1
            metrics.HEARTBEAT_FAILURES.inc()
            log.warning("heartbeat_failed", error=first_line(exc))
        self._fence_expired()

    def _apply(self, sent: list[RunKey], renewed: dict[int, bool], sent_at: float) -> None:
        held = self._held()  # the worker's live record of its runs and their renewals
        lost = [key for key in sent if key.id not in renewed and key in held]
        cancelled = [run_id for run_id, flag in renewed.items() if flag]
        for key in sent:
            if key.id in renewed and key in held:
                held[key] = sent_at
        if lost:
            self._lose("lease_lost", lost)
        if cancelled:
            self._on_cancel(cancelled)

    def _fence_expired(self) -> None:
        now = self._clock.monotonic()
        limit = self.deadline_seconds
        stale = [k for k, renewed_at in self._held().items() if now - renewed_at > limit]
        if stale:
            self._lose("lease_expired_locally", stale)

    def _lose(self, event: str, keys: list[RunKey]) -> None:
        log.warning(event, run_ids=[k.id for k in keys])
        metrics.LEASES_LOST.inc(len(keys))
        self._on_lost(keys)
