"""Jobs: create, read, cancel, and the planner's claim and cursor."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any

from psycopg.types.json import Jsonb

from app.domain.job import JobSpec
from app.domain.models import JobState
from app.store.db import AsyncConn
from app.store.queries import exec_, many, one


def _spec_params(spec: JobSpec) -> dict[str, Any]:
    s = spec.schedule
    return {
        "name": spec.name,
        "message": spec.message,
        "schedule_kind": s.kind.value,
        "execute_at": s.execute_at,
        "cron": s.cron,
        "interval_seconds": s.interval.total_seconds() if s.interval else None,
        "anchor_at": s.anchor,
        "timezone": s.timezone,
        "executor": spec.executor.value,
        "task": spec.task,
        "payload": Jsonb(spec.payload),
        "timeout_seconds": spec.timeout.total_seconds(),
        "max_attempts": spec.retry.max_attempts,
        "backoff_base_seconds": spec.retry.backoff_base.total_seconds(),
        "backoff_max_seconds": spec.retry.backoff_max.total_seconds(),
        "priority": spec.priority,
        "overlap": spec.overlap.value,
        "misfire": spec.misfire.value,
        "starting_deadline_seconds": (
            spec.starting_deadline.total_seconds() if spec.starting_deadline else None
        ),
        "notify_url": spec.notify_url,
        "notify_on_success": spec.notify_on_success,
        "notify_on_failure": spec.notify_on_failure,
    }


async def insert(
    conn: AsyncConn, owner_id: int, spec: JobSpec, *, next_run_at: datetime | None
) -> dict[str, Any] | None:
    """The new job, or None when the owner already used this idempotency key."""
    return await one(
        conn,
        "jobs_insert",
        owner_id=owner_id,
        next_run_at=next_run_at,
        idempotency_key=spec.idempotency_key,
        **_spec_params(spec),
    )


async def update(
    conn: AsyncConn,
    job_id: int,
    spec: JobSpec,
    *,
    owner_id: int | None,
    next_run_at: datetime | None,
) -> dict[str, Any] | None:
    return await one(
        conn,
        "jobs_update",
        id=job_id,
        owner_id=owner_id,
        next_run_at=next_run_at,
        **_spec_params(spec),
    )


async def set_state(
    conn: AsyncConn,
    job_id: int,
    *,
    owner_id: int | None,
    from_state: JobState,
    to_state: JobState,
    next_run_at: datetime | None = None,
) -> dict[str, Any] | None:
    return await one(
        conn,
        "jobs_set_state",
        id=job_id,
        owner_id=owner_id,
        from_state=from_state.value,
        to_state=to_state.value,
        next_run_at=next_run_at,
    )


async def overlap_gate(
    conn: AsyncConn, *, job_id: int, run_id: int, due_at: datetime
) -> dict[str, Any]:
    row = await one(conn, "jobs_overlap_gate", job_id=job_id, run_id=run_id, due_at=due_at)
    assert row is not None
    return row


async def get_by_idempotency_key(conn: AsyncConn, owner_id: int, key: str) -> dict[str, Any] | None:
    return await one(conn, "jobs_get_by_idempotency_key", owner_id=owner_id, idempotency_key=key)


async def get(conn: AsyncConn, job_id: int, *, owner_id: int | None) -> dict[str, Any] | None:
    return await one(conn, "jobs_get", id=job_id, owner_id=owner_id)


async def list_(
    conn: AsyncConn,
    *,
    owner_id: int | None,
    limit: int,
    before_id: int | None = None,
    state: JobState | None = None,
    name: str | None = None,
) -> list[dict[str, Any]]:
    return await many(
        conn,
        "jobs_list",
        owner_id=owner_id,
        limit=limit,
        before_id=before_id,
        state=state.value if state else None,
        name=name or None,
    )


async def cancel(
    conn: AsyncConn, job_id: int, *, owner_id: int | None, now: datetime | None = None
) -> bool:
    return await one(conn, "jobs_cancel", id=job_id, owner_id=owner_id, now=now) is not None


async def plan_claim(
    conn: AsyncConn,
    *,
    horizon: timedelta,
    limit: int,
    job_ids: Sequence[int] | None = None,
    now: datetime | None = None,
) -> list[dict[str, Any]]:
    return await many(
        conn,
        "jobs_plan_claim",
        horizon=horizon,
        limit=limit,
        job_ids=list(job_ids) if job_ids is not None else None,
        now=now,
    )


async def plan_advance(conn: AsyncConn, cursors: Sequence[tuple[int, datetime | None]]) -> None:
    if cursors:
        ids, next_run_ats = zip(*cursors, strict=True)
        await exec_(conn, "jobs_plan_advance", ids=list(ids), next_run_ats=list(next_run_ats))


async def delete(conn: AsyncConn, job_id: int, *, owner_id: int | None) -> bool:
    return await one(conn, "jobs_delete", id=job_id, owner_id=owner_id) is not None
