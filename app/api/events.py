"""Live run events (Server-Sent Events), fed by LISTEN/NOTIFY.

One LISTEN connection per API process: runs_complete NOTIFYs the owners whose runs
reached a final state; each subscriber of those owners wakes and reads what changed
since its cursor. A subscriber that misses a wake-up still catches up on the next one,
or on its keep-alive tick, because the read is by time, not by message.
"""

from __future__ import annotations

import asyncio
import json
from collections import defaultdict
from collections.abc import AsyncIterator
from datetime import datetime
from typing import Any

import psycopg
import structlog
from litestar import Request, get
from litestar.response import ServerSentEvent, ServerSentEventMessage

from app.api.accounts import Authenticated, CurrentUser, pool_of
from app.api.schemas import ERRORS
from app.store import runs
from app.store.clock import db_now
from app.store.db import listen_forever

log = structlog.get_logger("pgsched.events")

KEEPALIVE_SECONDS = 15.0


class EventHub:
    def __init__(self, url: str) -> None:
        self._url = url
        self._subscribers: dict[int, set[asyncio.Event]] = defaultdict(set)

    def subscribe(self, owner_id: int) -> asyncio.Event:
        wake = asyncio.Event()
        self._subscribers[owner_id].add(wake)
        return wake

    def unsubscribe(self, owner_id: int, wake: asyncio.Event) -> None:
        self._subscribers[owner_id].discard(wake)
        if not self._subscribers[owner_id]:
            del self._subscribers[owner_id]

    async def run(self) -> None:
        await listen_forever(
            self._url,
            ("pgsched_events",),
            name="pgsched-events",
            on_connect=self._wake_all,  # whatever happened while we were away
            on_note=self._on_note,
        )

    def _on_note(self, note: psycopg.Notify) -> None:
        for owner in note.payload.split(","):
            for wake in self._subscribers.get(int(owner), ()) if owner else ():
                wake.set()

    def _wake_all(self) -> None:
        for wakes in self._subscribers.values():
            for wake in wakes:
                wake.set()


def _json(row: dict[str, Any]) -> str:
    return json.dumps({k: v.isoformat() if isinstance(v, datetime) else v for k, v in row.items()})


class EventsController(Authenticated):
    path = "/api/v1/me/events"
    tags = ["runs"]

    @get(
        "/",
        responses=ERRORS,
        summary="A live stream of the caller's finished runs (Server-Sent Events)",
    )
    async def stream(self, request: Request[Any, Any, Any], user: CurrentUser) -> ServerSentEvent:
        hub: EventHub = request.app.state.events
        pool = pool_of(request)
        async with pool.connection() as conn:
            since = await db_now(conn)

        async def messages() -> AsyncIterator[ServerSentEventMessage]:
            nonlocal since
            wake = hub.subscribe(user.id)
            try:
                yield ServerSentEventMessage(comment="connected", data=None)
                while True:
                    try:
                        await asyncio.wait_for(wake.wait(), KEEPALIVE_SECONDS)
                    except TimeoutError:
                        yield ServerSentEventMessage(comment="keep-alive", data=None)
                    wake.clear()
                    async with pool.connection() as conn:
                        changed = await runs.finished_since(conn, owner_id=user.id, since=since)
                    for run in changed:
                        yield ServerSentEventMessage(data=_json(run), event="run", id=run["id"])
                        since = max(since, run["finished_at"])
            finally:
                hub.unsubscribe(user.id, wake)

        return ServerSentEvent(messages())
