"""The deferred wake-up: one NOTIFY, after the commit, for many single-run inserts.

PostgreSQL holds a database-wide lock from a notifying transaction's pre-commit until its
commit is flushed. Inserts that each NOTIFY (the insert trigger's wake-up) therefore
commit one at a time, however many clients send them. An insert made with `defer_wake`
leaves its wake-up to this process's Waker: the inserts commit side by side, and one
NOTIFY, sent from the Waker's own connection after them, wakes the workers for all.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator

import psycopg
import structlog

from app.store import runs
from app.store.db import AsyncConn, OwnConnection, first_line

# After a failed NOTIFY (the database restarting), wait this long before trying again.
RETRY_SECONDS = 0.5

log = structlog.get_logger("pgsched.waker")


class Waker:
    def __init__(self, url: str) -> None:
        self._conn = OwnConnection(url, name="pgsched-waker")
        self._pending = asyncio.Event()

    def wake(self, conn: AsyncConn) -> None:
        """Call once `conn`'s transaction that inserted runs with `defer_wake` has
        committed; never before, since a worker woken early would not see the runs."""
        if conn.info.transaction_status != psycopg.pq.TransactionStatus.IDLE:
            raise RuntimeError("Waker.wake before the inserting transaction committed")
        self._pending.set()

    async def run(self) -> None:
        """Send a NOTIFY whenever a wake-up is pending: each is sent after every commit
        whose wake() came before it, so no insert is left without one."""
        # Connect now, not at the first wake-up, which would wait for it.
        with contextlib.suppress(psycopg.Error):
            async with self._conn.use():
                pass
        while True:
            await self._pending.wait()
            if not await self._send():
                await asyncio.sleep(RETRY_SECONDS)

    async def close(self) -> None:
        """Send what is pending (once), then close; called after the run task stopped."""
        if self._pending.is_set():
            await self._send()
        await self._conn.close()

    async def _send(self) -> bool:
        self._pending.clear()
        try:
            async with self._conn.use() as conn:
                await runs.wake(conn)
        except psycopg.Error as exc:
            # Workers whose LISTEN broke as well read the queue again when they reconnect;
            # for the others, the wake-up is still owed.
            log.warning("wake_failed", error=first_line(exc))
            self._pending.set()
            return False
        return True


@contextlib.asynccontextmanager
async def running(url: str) -> AsyncIterator[Waker]:
    """A Waker with its task running for the duration of the block."""
    waker = Waker(url)
    task = asyncio.create_task(waker.run(), name="waker")
    try:
        yield waker
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
        await waker.close()


@contextlib.asynccontextmanager
async def transaction(conn: AsyncConn, waker: Waker | None) -> AsyncIterator[bool]:
    """`conn.transaction()` whose run inserts may leave their wake-up to `waker`: yields
    whether they should (their `defer_wake`), and asks the waker once it has committed.
    `conn` must not be inside a transaction of the caller's (wake refuses it)."""
    async with conn.transaction():
        yield waker is not None
    if waker is not None:
        waker.wake(conn)
