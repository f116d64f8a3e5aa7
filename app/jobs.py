"""Job use-cases shared by the CLI and the API: create (and plan at once), cancel."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import timedelta
from typing import Any, TypeVar

from psycopg import errors as pg_errors

from app import metrics
from app.domain.job import JobSpec
from app.domain.models import ExecutorKind, JobState, MisfirePolicy, OverlapPolicy
from app.domain.retry import RetryPolicy
from app.errors import ConflictError, require_found
from app.planner import plan, schedule_of
from app.settings import Settings
from app.store import jobs, partitions, runs
from app.store.clock import db_now
from app.store.db import AsyncConn
from app.store.waker import Waker
from app.store.waker import transaction as waker_transaction

T = TypeVar("T")


@dataclass(frozen=True)
class Created:
    job: dict[str, Any]
    created: bool  # False: an earlier job with the same idempotency key


async def create_job(
    conn: AsyncConn, owner_id: int, spec: JobSpec, settings: Settings, waker: Waker | None = None
) -> Created:
    """Insert the job and, in the same transaction, materialise its slots inside the
    horizon, so a job due in a second is not left waiting for the next planner pass.
    With a `waker`, the workers' wake-up goes through it (waker.transaction)."""

    async def attempt() -> Created:
        async with waker_transaction(conn, waker) as defer_wake:
            first = spec.schedule.first_slot(await db_now(conn))
            row = await jobs.insert(conn, owner_id, spec, next_run_at=first)
            if row is None:
                assert spec.idempotency_key is not None
                existing = await jobs.get_by_idempotency_key(conn, owner_id, spec.idempotency_key)
                assert existing is not None
                return Created(existing, created=False)
            await _plan_now(conn, row["id"], settings, defer_wake=defer_wake)
        return Created(row, created=True)

    created = await _with_partitions(conn, settings, attempt)
    if created.created:
        metrics.JOBS_CREATED.inc()
    return created


async def _plan_now(
    conn: AsyncConn, job_id: int, settings: Settings, *, defer_wake: bool = False
) -> None:
    """Materialise a job's slots inside the horizon now, in the caller's transaction."""
    await plan(
        conn, horizon=settings.plan_horizon, limit=1, job_ids=[job_id], defer_wake=defer_wake
    )


async def _with_partitions(
    conn: AsyncConn, settings: Settings, transaction: Callable[[], Awaitable[T]]
) -> T:
    """Run `transaction` (a whole one, on `conn`); if a run it inserted had no partition
    to go to (a database no worker has kept lately), make the partitions and run it once
    more. Retrying the whole transaction keeps a savepoint's two round trips off every
    create."""
    try:
        return await transaction()
    except pg_errors.CheckViolation as exc:
        if not partitions.missing(exc):
            raise
    await ensure_partitions(conn, settings)
    return await transaction()


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
        job = await _visible(conn, job_id, owner_id)
        if not await jobs.cancel(conn, job_id, owner_id=owner_id):
            raise ConflictError(f"job {job_id} is already {job['state']}")
        return await runs.cancel_for_job(conn, job_id)


def retry_policy(
    settings: Settings,
    *,
    max_attempts: int | None = None,
    backoff_base: timedelta | None = None,
    backoff_max: timedelta | None = None,
) -> RetryPolicy:
    """A job's retry policy: what it asks for, the operator's defaults for the rest."""
    return RetryPolicy(
        max_attempts or settings.max_attempts,
        backoff_base or settings.backoff_base,
        backoff_max or settings.backoff_max,
    )


def spec_of(row: dict[str, Any]) -> JobSpec:
    """The JobSpec of a stored job, to edit it."""
    deadline = row["starting_deadline_seconds"]
    return JobSpec(
        schedule=schedule_of(row),
        executor=ExecutorKind(row["executor"]),
        retry=RetryPolicy(
            row["max_attempts"],
            timedelta(seconds=row["backoff_base_seconds"]),
            timedelta(seconds=row["backoff_max_seconds"]),
        ),
        task=row["task"],
        payload=row["payload"],
        message=row["message"],
        name=row["name"],
        timeout=timedelta(seconds=row["timeout_seconds"]),
        priority=row["priority"],
        overlap=OverlapPolicy(row["overlap"]),
        misfire=MisfirePolicy(row["misfire"]),
        starting_deadline=timedelta(seconds=deadline) if deadline is not None else None,
        idempotency_key=row["idempotency_key"],
        notify_url=row["notify_url"],
        notify_on_success=row["notify_on_success"],
        notify_on_failure=row["notify_on_failure"],
    )


async def _visible(conn: AsyncConn, job_id: int, owner_id: int | None) -> dict[str, Any]:
    return require_found(await jobs.get(conn, job_id, owner_id=owner_id), "job", job_id)


async def pause_job(conn: AsyncConn, job_id: int, *, owner_id: int | None) -> dict[str, Any]:
    """Stop planning; slots materialised but not started are forgotten (made again on
    resume). Retries already queued still run."""
    async with conn.transaction():
        job = await _visible(conn, job_id, owner_id)
        paused = await jobs.set_state(
            conn, job_id, owner_id=owner_id, from_state=JobState.ACTIVE, to_state=JobState.PAUSED
        )
        if paused is None:
            raise ConflictError(f"job {job_id} is {job['state']}, not active")
        await runs.delete_queued_for_job(conn, job_id)
        return paused


async def resume_job(
    conn: AsyncConn, job_id: int, settings: Settings, *, owner_id: int | None
) -> dict[str, Any]:
    """Plan again from now on: slots that fell inside the pause are not caught up."""

    async def attempt() -> dict[str, Any]:
        async with conn.transaction():
            job = await _visible(conn, job_id, owner_id)
            cursor = schedule_of(job).first_slot(await db_now(conn))
            resumed = await jobs.set_state(
                conn,
                job_id,
                owner_id=owner_id,
                from_state=JobState.PAUSED,
                to_state=JobState.ACTIVE,
                next_run_at=cursor,
            )
            if resumed is None:
                raise ConflictError(f"job {job_id} is {job['state']}, not paused")
            await _plan_now(conn, job_id, settings)
            return resumed

    return await _with_partitions(conn, settings, attempt)


async def trigger_job(
    conn: AsyncConn,
    job_id: int,
    settings: Settings,
    *,
    owner_id: int | None,
    waker: Waker | None = None,
) -> dict[str, Any]:
    """A run now, outside the schedule (its overlap policy still applies); `waker` as for
    create_job."""

    async def attempt() -> dict[str, Any]:
        async with waker_transaction(conn, waker) as defer_wake:
            job = await _visible(conn, job_id, owner_id)
            if job["state"] == JobState.CANCELLED:
                raise ConflictError(f"job {job_id} is cancelled")
            now = await db_now(conn)
            run = await runs.insert_one(
                conn,
                job_id=job_id,
                owner_id=job["owner_id"],
                slot_at=now,
                priority=job["priority"],
                defer_wake=defer_wake,
            )
            if run is None:  # the same job triggered twice in one microsecond
                raise ConflictError(f"job {job_id} was triggered at this instant already")
        return run

    return await _with_partitions(conn, settings, attempt)


async def edit_job(
    conn: AsyncConn, job_id: int, spec: JobSpec, settings: Settings, *, owner_id: int | None
) -> dict[str, Any]:
    """Replace a job's definition; slots planned for the old schedule and not started
    are dropped, and the new schedule is planned from now."""

    async def attempt() -> dict[str, Any]:
        async with conn.transaction():
            await _visible(conn, job_id, owner_id)
            cursor = spec.schedule.first_slot(await db_now(conn))
            updated = await jobs.update(conn, job_id, spec, owner_id=owner_id, next_run_at=cursor)
            if updated is None:
                raise ConflictError(f"job {job_id} is cancelled")
            await runs.delete_queued_for_job(conn, job_id)
            if updated["state"] == JobState.ACTIVE:
                await _plan_now(conn, job_id, settings)
            return updated

    return await _with_partitions(conn, settings, attempt)
