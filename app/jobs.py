"""Job use-cases shared by the CLI and the API: create (and plan at once), cancel."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from psycopg import errors as pg_errors

from app.domain.job import JobSpec
from app.errors import ConflictError, NotFoundError
from app.planner import plan
from app.settings import Settings
from app.store import jobs, partitions, runs
from app.store.db import AsyncConn


@dataclass(frozen=True)
class Created:
    job: dict[str, Any]
    created: bool  # False: an earlier job with the same idempotency key


async def _db_now(conn: AsyncConn) -> datetime:
    cur = await conn.execute("SELECT now() AS now")
    row = await cur.fetchone()
    assert row is not None
    now: datetime = row["now"]
    return now


async def create_job(conn: AsyncConn, owner_id: int, spec: JobSpec, settings: Settings) -> Created:
    """Insert the job and, in the same transaction, materialise its slots inside the
    horizon, so a job due in a second is not left waiting for the next planner pass."""
    async with conn.transaction():
        now = await _db_now(conn)
        first = spec.schedule.first_slot(now)
        row = await jobs.insert(conn, owner_id, spec, next_run_at=first)
        if row is None:
            assert spec.idempotency_key is not None
            existing = await jobs.get_by_idempotency_key(conn, owner_id, spec.idempotency_key)
            assert existing is not None
            return Created(existing, created=False)
        try:
            async with conn.transaction():
                await plan(conn, horizon=settings.plan_horizon, limit=1, job_ids=[row["id"]])
        except pg_errors.CheckViolation:
            # No partition for the slot yet (a database no worker has kept): make them.
            await ensure_partitions(conn, settings)
            await plan(conn, horizon=settings.plan_horizon, limit=1, job_ids=[row["id"]])
        return Created(row, created=True)


async def ensure_partitions(conn: AsyncConn, settings: Settings) -> int:
    """Partitions from just before now through the premake window."""
    return await partitions.ensure(
        conn,
        behind=runs.INSERT_MARGIN,
        ahead=settings.partition_premake,
        minutes=settings.partition_minutes,
    )


async def cancel_job(conn: AsyncConn, job_id: int, *, owner_id: int | None) -> dict[str, Any]:
    async with conn.transaction():
        job = await jobs.get(conn, job_id, owner_id=owner_id)
        if job is None:
            raise NotFoundError(f"job {job_id} not found")
        if not await jobs.cancel(conn, job_id, owner_id=owner_id):
            raise ConflictError(f"job {job_id} is already {job['state']}")
        return await runs.cancel_for_job(conn, job_id)
