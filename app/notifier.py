"""The notifier: delivers the webhook outbox, on every worker at once (SKIP LOCKED).

A delivery is leased while in flight; if this process dies mid-way, the lease runs out
and another notifier sends it again, so a receiver sees each event at least once and
must deduplicate by the `X-Pgsched-Delivery` id.
"""

from __future__ import annotations

import asyncio
import json
import time
from datetime import timedelta
from typing import Any

import httpx
import structlog
from psycopg_pool import AsyncConnectionPool

from app.domain.retry import RetryPolicy
from app.domain.webhook import SIGNATURE_HEADER, sign
from app.maintenance.service import Service
from app.settings import Settings
from app.store import notifications
from app.store.db import AsyncConn

log = structlog.get_logger("pgsched.notifier")

BATCH = 100
MAX_ATTEMPTS = 10
DELIVERY_TIMEOUT_SECONDS = 10.0
LEASE = timedelta(seconds=30)


class Notifier(Service):
    name = "notifier"

    def __init__(
        self,
        pool: AsyncConnectionPool[AsyncConn],
        settings: Settings,
        client: httpx.AsyncClient,
    ) -> None:
        super().__init__(settings.notify_interval)
        self._pool = pool
        self._client = client
        self._backoff = RetryPolicy(MAX_ATTEMPTS, settings.backoff_base, settings.backoff_max)

    async def run_once(self) -> int:
        async with self._pool.connection() as conn:
            due = await notifications.claim(conn, limit=BATCH, lease=LEASE)
        if not due:
            return 0
        results = await asyncio.gather(*(self._deliver(row) for row in due))
        async with self._pool.connection() as conn:
            await notifications.record(conn, results, max_attempts=MAX_ATTEMPTS)
        return sum(1 for r in results if r[1])

    async def _deliver(
        self, row: dict[str, Any]
    ) -> tuple[int, bool, int | None, str | None, float]:
        body = json.dumps(row["payload"], separators=(",", ":"), sort_keys=True).encode()
        headers = {
            "Content-Type": "application/json",
            "X-Pgsched-Event": row["event"],
            "X-Pgsched-Delivery": str(row["id"]),
            SIGNATURE_HEADER: sign(row["secret"] or "", body, int(time.time())),
        }
        retry_in = self._backoff.delay(row["attempts"]).total_seconds()
        try:
            response = await self._client.post(
                row["url"], content=body, headers=headers, timeout=DELIVERY_TIMEOUT_SECONDS
            )
        except httpx.HTTPError as exc:
            error = f"{type(exc).__name__}: {exc}"[:500]
            log.info("webhook_failed", delivery=row["id"], attempt=row["attempts"], error=error)
            return row["id"], False, None, error, retry_in
        ok = response.is_success
        if not ok:
            log.info(
                "webhook_failed",
                delivery=row["id"],
                attempt=row["attempts"],
                status=response.status_code,
            )
        return (
            row["id"],
            ok,
            response.status_code,
            None if ok else f"HTTP {response.status_code}",
            (retry_in),
        )
