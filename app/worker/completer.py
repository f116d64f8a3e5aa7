"""The completer: writes outcomes in batches, one statement per batch.

Executions hand their outcome over and free their slot at once; the completer drains
whatever has accumulated while the previous batch was being written, so batches grow
with load and latency stays a round trip when idle. A write that fails for a lost
connection is retried (the runs stay heartbeated meanwhile); a run whose fence no longer
holds comes back absent from the result and is logged, never overwritten.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import psycopg
import structlog

from app import metrics
from app.domain.models import Completion, RunKey
from app.store import runs
from app.store.db import OwnConnection, first_line

log = structlog.get_logger("pgsched.completer")

BATCH_MAX = 1000
RETRY_DELAY_SECONDS = 0.5


class Completer:
    def __init__(
        self,
        url: str,
        worker_id: str,
        *,
        on_written: Callable[[list[RunKey]], None],
    ) -> None:
        self._conn = OwnConnection(url, name="pgsched-completer")
        self._worker_id = worker_id
        self._on_written = on_written
        self._queue: asyncio.Queue[Completion] = asyncio.Queue()
        self.fenced = 0
        self.written = 0

    def submit(self, completion: Completion) -> None:
        self._queue.put_nowait(completion)

    @property
    def pending(self) -> int:
        return self._queue.qsize()

    async def run(self) -> None:
        try:
            while True:
                batch = [await self._queue.get()]
                while len(batch) < BATCH_MAX and not self._queue.empty():
                    batch.append(self._queue.get_nowait())
                await self._write(batch)
        finally:
            await self._conn.close()

    async def drain(self) -> None:
        """Write everything submitted so far (at shutdown)."""
        while not self._queue.empty():
            batch: list[Completion] = []
            while len(batch) < BATCH_MAX and not self._queue.empty():
                batch.append(self._queue.get_nowait())
            await self._write(batch)

    async def _write(self, batch: list[Completion]) -> None:
        while True:
            try:
                async with self._conn.use() as conn:
                    rows = await runs.complete(conn, batch, worker_id=self._worker_id)
                break
            except psycopg.OperationalError as exc:
                log.warning("completion_retry", error=first_line(exc), runs=len(batch))
                await asyncio.sleep(RETRY_DELAY_SECONDS)
        taken = {r["id"] for r in rows}
        for completion in batch:
            if completion.key.id not in taken:
                self.fenced += 1
                metrics.COMPLETIONS_FENCED.inc()
                log.warning(
                    "completion_fenced",
                    run_id=completion.key.id,
                    attempt=completion.key.attempt,
                    state=completion.state.value,
                    rows_changed=0,
                )
        self.written += len(taken)
        self._on_written([c.key for c in batch])
