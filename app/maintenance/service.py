"""A periodic service: `run_once` on an interval, with `start` and `stop`.

One failing tick is logged and retried next interval (the database may be restarting);
CancelledError always propagates, so stopping is never swallowed.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import structlog
from psycopg_pool import AsyncConnectionPool

from app.settings import Settings
from app.store.db import AsyncConn

log = structlog.get_logger("pgsched.service")


class Service:
    name = "service"

    def __init__(self, interval: timedelta) -> None:
        self.interval = interval
        self._task: asyncio.Task[None] | None = None
        self._kick = asyncio.Event()

    async def run_once(self) -> Any:
        raise NotImplementedError

    def should_run(self) -> bool:
        """Leader-only services override this."""
        return True

    def kick(self) -> None:
        """Run the next tick now rather than at the end of the interval."""
        self._kick.set()

    async def _loop(self, tick_now: bool) -> None:
        if not tick_now:
            await self._wait()
        while True:
            if self.should_run():
                try:
                    await self.run_once()
                except asyncio.CancelledError:
                    raise
                except Exception:
                    log.exception("service_tick_failed", service=self.name)
            await self._wait()

    async def _wait(self) -> None:
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._kick.wait(), self.interval.total_seconds())
        self._kick.clear()

    def start(self, *, tick_now: bool = True) -> asyncio.Task[None]:
        """Run the loop; `tick_now=False` when the caller has just run a tick itself."""
        self._task = asyncio.create_task(self._loop(tick_now), name=self.name)
        return self._task

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None


class LeaderService(Service):
    """A periodic service that only the elected leader runs; `interval_setting` names
    the Settings field that paces it."""

    interval_setting = ""

    def __init__(
        self,
        pool: AsyncConnectionPool[AsyncConn],
        settings: Settings,
        is_leader: Callable[[], bool],
    ) -> None:
        super().__init__(getattr(settings, self.interval_setting))
        self._pool = pool
        self._settings = settings
        self._is_leader = is_leader

    def should_run(self) -> bool:
        return self._is_leader()
