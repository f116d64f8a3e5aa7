"""Cluster and queue statistics, read from the operator views."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from app.store.db import AsyncConn
from app.store.queries import many, one


@dataclass(frozen=True)
class Summary:
    by_priority: list[dict[str, Any]]
    dead_letters: int
    partitions: int
    workers_live: int
    leader_id: str | None
    at: datetime

    @property
    def due(self) -> int:
        return sum(int(r["due"]) for r in self.by_priority)

    @property
    def scheduled(self) -> int:
        return sum(int(r["scheduled"]) for r in self.by_priority)

    @property
    def running(self) -> int:
        return sum(int(r["running"]) for r in self.by_priority)

    @property
    def oldest_due_seconds(self) -> float:
        return max((float(r["oldest_due_seconds"]) for r in self.by_priority), default=0.0)


async def summary(conn: AsyncConn, *, owner_id: int | None = None) -> Summary:
    queue = await many(conn, "stats_queue", owner_id=owner_id)
    cluster = await one(conn, "stats_cluster", owner_id=owner_id)
    assert cluster is not None
    return Summary(
        by_priority=queue,
        dead_letters=cluster["dead_letters"],
        partitions=cluster["partitions"],
        workers_live=cluster["workers_live"],
        leader_id=cluster["leader_id"],
        at=cluster["at"],
    )


async def minutes(conn: AsyncConn, *, owner_id: int | None = None) -> list[dict[str, Any]]:
    return await many(conn, "stats_minutes", owner_id=owner_id)


async def live_workers(conn: AsyncConn) -> list[dict[str, Any]]:
    return await many(conn, "stats_workers")
