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


@dataclass(frozen=True)
class Health:
    """The summary, the last hour by minute, and the live workers: what `pgsched status`
    and the dashboard's overview show."""

    summary: Summary
    minutes: list[dict[str, Any]]
    workers: list[dict[str, Any]]

    def finished_last_hour(self, outcome: str) -> int:
        """`outcome` is "succeeded" or "failed"."""
        return sum(int(m[outcome]) for m in self.minutes)

    @property
    def started_last_hour(self) -> int:
        return sum(int(m["started"]) for m in self.minutes)

    @property
    def runs_per_second(self) -> float:
        """Runs finished per second in the last whole minute."""
        if len(self.minutes) < 2:
            return 0.0
        last = self.minutes[-2]
        return (int(last["succeeded"]) + int(last["failed"])) / 60

    def recent_lateness(self, minutes: int = 5) -> dict[str, Any]:
        """Runs started in the last `minutes` and the worst minute's p95 and p99."""
        recent = [m for m in self.minutes[-minutes:] if m["started"]]
        return {
            "started": sum(int(m["started"]) for m in recent),
            "p95_seconds": max((m["p95"] for m in recent), default=None),
            "p99_seconds": max((m["p99"] for m in recent), default=None),
        }


async def health(conn: AsyncConn, *, owner_id: int | None = None) -> Health:
    return Health(
        summary=await summary(conn, owner_id=owner_id),
        minutes=await many(conn, "stats_minutes", owner_id=owner_id),
        workers=await many(conn, "stats_workers"),
    )


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
