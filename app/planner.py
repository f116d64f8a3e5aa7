"""The planner: turns jobs whose next slot is near into runs, on every worker at once.

Jobs are locked with SKIP LOCKED (jobs_plan_claim), so concurrent planners take disjoint
jobs; the unique key (job, slot, attempt, due) backs that up. Each pass materialises the
slots inside the horizon and moves the job's cursor (`next_run_at`) past them, in one
transaction, so a crash between the two cannot lose or double a slot.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

import structlog
from psycopg_pool import AsyncConnectionPool

from app.domain.models import RunState, ScheduleKind
from app.domain.schedule import Schedule
from app.maintenance.service import Service
from app.settings import Settings
from app.store import jobs, runs
from app.store.db import AsyncConn

log = structlog.get_logger("pgsched.planner")

# A job with a 1-second cron and a 10-minute horizon makes 600 slots a pass; this caps
# one pass per job so one job cannot hold the planner, the rest follow next pass.
MAX_SLOTS_PER_JOB = 1000


@dataclass(frozen=True)
class PlanResult:
    jobs: int
    slots: int
    inserted: int


def schedule_of(row: dict[str, Any]) -> Schedule:
    """The Schedule of a stored (already validated) job row."""
    interval = row["interval_seconds"]
    return Schedule(
        kind=ScheduleKind(row["schedule_kind"]),
        timezone=row["timezone"],
        execute_at=row["execute_at"],
        cron=row["cron"],
        interval=timedelta(seconds=interval) if interval is not None else None,
        anchor=row["anchor_at"],
    )


def slots_until(
    schedule: Schedule, cursor: datetime | None, until: datetime
) -> tuple[list[datetime], datetime | None]:
    """The slots from `cursor` (inclusive) up to `until`, and the cursor after them."""
    slots: list[datetime] = []
    while cursor is not None and cursor <= until and len(slots) < MAX_SLOTS_PER_JOB:
        slots.append(cursor)
        cursor = schedule.next_slot(cursor)
    return slots, cursor


async def plan(
    conn: AsyncConn,
    *,
    horizon: timedelta,
    limit: int,
    job_ids: list[int] | None = None,
    now: datetime | None = None,
    defer_wake: bool = False,
) -> PlanResult:
    """One planning pass inside the caller's transaction (`defer_wake`: see
    runs.insert_slots)."""
    claimed = await jobs.plan_claim(conn, horizon=horizon, limit=limit, job_ids=job_ids, now=now)
    slots: list[tuple[int, int, datetime, int, RunState, str | None]] = []
    cursors: list[tuple[int, datetime | None]] = []
    # Many jobs share a schedule (a fleet of `* * * * *` jobs): compute each one once.
    memo: dict[tuple[Schedule, datetime | None, datetime], tuple[list[datetime], Any]] = {}
    for row in claimed:
        key = (schedule_of(row), row["next_run_at"], row["db_now"] + horizon)
        if key not in memo:
            memo[key] = slots_until(*key)
        job_slots, cursor = memo[key]
        slots.extend(
            (row["id"], row["owner_id"], slot, row["priority"], RunState.QUEUED, None)
            for slot in job_slots
        )
        cursors.append((row["id"], cursor))
    inserted = await runs.insert_slots(conn, slots, now=now, defer_wake=defer_wake)
    await jobs.plan_advance(conn, cursors)
    return PlanResult(jobs=len(claimed), slots=len(slots), inserted=inserted)


# How many missed slots `run_all` catches up at most, per job (the latest ones).
RUN_ALL_CAP = 100


async def skip_misfired(
    conn: AsyncConn, settings: Settings, *, now: datetime | None = None
) -> list[dict[str, Any]]:
    """Apply the misfire policies (sql/runs.sql runs_skip_misfired)."""
    floor, _ = await runs.queue_window(conn, ahead=timedelta(0), now=now)
    return await runs.skip_misfired(
        conn,
        threshold=settings.misfire_threshold,
        run_all_cap=RUN_ALL_CAP,
        floor=floor,
        now=now,
    )


class Planner(Service):
    """Plans on a timer; creating a job plans its first slots at once (app/jobs.py)."""

    name = "planner"

    def __init__(self, pool: AsyncConnectionPool[AsyncConn], settings: Settings) -> None:
        super().__init__(settings.plan_interval)
        self._pool = pool
        self._settings = settings

    async def run_once(self, now: datetime | None = None) -> int:
        """Plan every job entering the horizon, then apply misfire policies, in one
        transaction per batch so no worker can claim a misfired run in between."""
        total = 0
        while True:
            async with self._pool.connection() as conn, conn.transaction():
                result = await plan(
                    conn,
                    horizon=self._settings.plan_horizon,
                    limit=self._settings.plan_batch,
                    now=now,
                )
                skipped = await skip_misfired(conn, self._settings, now=now)
            total += result.inserted
            for row in skipped:
                log.info(
                    "slot_skipped",
                    job_id=row["job_id"],
                    run_id=row["id"],
                    slot_at=row["slot_at"].isoformat(),
                    reason=row["error"],
                )
            if result.jobs < self._settings.plan_batch:
                break
        if total:
            log.debug("slots_planned", runs=total)
        return total
