"""Runs: claim, heartbeat, complete, release, reclaim, and history reads."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

from app.domain.models import (
    Claim,
    Completion,
    ExecutorKind,
    OverlapPolicy,
    RunKey,
    RunState,
)
from app.store.db import AsyncConn
from app.store.queries import exec_, execrows, many, one

# Runs are never inserted due earlier than now() - this (runs_insert_slots clamps), which
# makes `least(min queued due, now() - margin)` a safe lower bound for the claim.
INSERT_MARGIN = timedelta(minutes=5)
FAR_FUTURE = datetime(9999, 1, 1, tzinfo=UTC)
# Session settings of the claim's own connection. The claim must walk runs_claim_idx in
# claim order and stop after `limit` rows. A partition that has just received a burst of
# runs has no statistics yet (autovacuum analyses it seconds later), and the planner,
# believing it nearly empty, fetches every due row through runs_due_idx and sorts them:
# 25 ms a claim instead of 2 with 100,000 due. Without sorts or bitmaps to choose from,
# the index order is the only plan left, whatever the statistics say.
CLAIM_SESSION = ("SET enable_sort = off", "SET enable_bitmapscan = off")


def _keys(keys: Sequence[RunKey]) -> dict[str, list[Any]]:
    return {
        "ids": [k.id for k in keys],
        "due_ats": [k.due_at for k in keys],
        "attempts": [k.attempt for k in keys],
    }


async def claim(
    conn: AsyncConn,
    *,
    worker_id: str,
    limit: int,
    lease: timedelta,
    window: tuple[datetime, datetime],
    now: datetime | None = None,
) -> list[Claim]:
    floor, ceiling = window
    rows = await many(
        conn,
        "runs_claim",
        binary=True,
        worker_id=worker_id,
        limit=limit,
        lease=lease,
        floor=floor,
        ceiling=ceiling,
        now=now,
    )
    return [
        Claim(
            id=r["id"],
            due_at=r["due_at"],
            attempt=r["attempt"],
            job_id=r["job_id"],
            owner_id=r["owner_id"],
            slot_at=r["slot_at"],
            started_at=r["started_at"],
            executor=ExecutorKind(r["executor"]),
            task=r["task"],
            payload=r["payload"],
            message=r["message"],
            timeout=timedelta(seconds=r["timeout_seconds"]),
            max_attempts=r["max_attempts"],
            backoff_base=timedelta(seconds=r["backoff_base_seconds"]),
            backoff_max=timedelta(seconds=r["backoff_max_seconds"]),
            overlap=OverlapPolicy(r["overlap"]),
        )
        for r in rows
    ]


async def heartbeat(
    conn: AsyncConn,
    keys: Sequence[RunKey],
    *,
    worker_id: str,
    lease: timedelta,
    now: datetime | None = None,
) -> dict[int, bool]:
    """Renew leases; returns {run id: cancel requested} for the runs still held."""
    rows = await many(
        conn,
        "runs_heartbeat",
        binary=True,
        worker_id=worker_id,
        lease=lease,
        now=now,
        **_keys(keys),
    )
    return {r["id"]: r["cancel_requested"] for r in rows}


async def complete(
    conn: AsyncConn,
    completions: Sequence[Completion],
    *,
    worker_id: str,
    now: datetime | None = None,
) -> list[dict[str, Any]]:
    logs = [(c.key, line) for c in completions for line in c.logs]
    return await many(
        conn,
        "runs_complete",
        binary=True,
        worker_id=worker_id,
        now=now,
        **_keys([c.key for c in completions]),
        states=[c.state.value for c in completions],
        errors=[c.error for c in completions],
        retry_in=[
            c.retry_in.total_seconds() if c.retry_in is not None else None for c in completions
        ],
        log_run_ids=[k.id for k, _ in logs],
        log_due_ats=[k.due_at for k, _ in logs],
        log_seqs=[line.seq for _, line in logs],
        log_ats=[line.at for _, line in logs],
        log_streams=[line.stream.value for _, line in logs],
        log_lines=[line.line for _, line in logs],
    )


async def release(conn: AsyncConn, keys: Sequence[RunKey], *, worker_id: str) -> int:
    row = await one(conn, "runs_release", worker_id=worker_id, **_keys(keys))
    return int(row["released"]) if row else 0


async def reclaim(
    conn: AsyncConn, *, limit: int, now: datetime | None = None
) -> list[dict[str, Any]]:
    return await many(conn, "runs_reclaim", limit=limit, now=now)


async def next_due(
    conn: AsyncConn, *, now: datetime | None = None
) -> tuple[datetime | None, datetime]:
    row = await one(conn, "runs_next_due", now=now)
    assert row is not None
    return row["due_at"], row["db_now"]


async def queue_window(
    conn: AsyncConn, *, ahead: timedelta, now: datetime | None = None
) -> tuple[datetime, datetime]:
    """(floor, ceiling) bounding the due times the claim must look at until `ahead`
    has passed; see runs_queue_window."""
    row = await one(conn, "runs_queue_window", margin=INSERT_MARGIN, ahead=ahead, now=now)
    assert row is not None
    return row["floor"], row["ceiling"]


def _wake_setting(defer_wake: bool) -> str:
    """The statements' `pgsched.wake` for their transaction: 'deferred' tells the insert
    trigger not to NOTIFY (migration 0006)."""
    return "deferred" if defer_wake else ""


async def insert_slots(
    conn: AsyncConn,
    slots: Sequence[tuple[int, int, datetime, int, RunState, str | None]],
    *,
    now: datetime | None = None,
    defer_wake: bool = False,
) -> int:
    """Insert (job_id, owner_id, slot_at, priority, state, error) rows as first attempts;
    how many were new. With `defer_wake`, the workers are not woken by this transaction:
    the caller must call Waker.wake after it commits."""
    if not slots:
        return 0
    job_ids, owner_ids, slot_ats, priorities, states, errors = zip(*slots, strict=True)
    return await execrows(
        conn,
        "runs_insert_slots",
        job_ids=list(job_ids),
        owner_ids=list(owner_ids),
        slot_ats=list(slot_ats),
        priorities=list(priorities),
        states=[s.value for s in states],
        errors=list(errors),
        margin=INSERT_MARGIN,
        now=now,
        wake=_wake_setting(defer_wake),
    )


async def insert_one(
    conn: AsyncConn,
    *,
    job_id: int,
    owner_id: int,
    slot_at: datetime,
    priority: int,
    defer_wake: bool = False,
) -> dict[str, Any] | None:
    """insert_slots for one queued run, cheaper; None if that slot already has its run."""
    return await one(
        conn,
        "runs_insert_one",
        job_id=job_id,
        owner_id=owner_id,
        slot_at=slot_at,
        priority=priority,
        margin=INSERT_MARGIN,
        wake=_wake_setting(defer_wake),
    )


async def wake(conn: AsyncConn) -> None:
    await exec_(conn, "runs_wake")


async def list_for_job(
    conn: AsyncConn,
    job_id: int,
    *,
    owner_id: int | None,
    limit: int,
    state: RunState | None = None,
    since: datetime | None = None,
    until: datetime | None = None,
    before_id: int | None = None,
) -> list[dict[str, Any]]:
    return await many(
        conn,
        "runs_list_for_job",
        job_id=job_id,
        owner_id=owner_id,
        limit=limit,
        state=state.value if state else None,
        since=since,
        until=until,
        before_id=before_id,
    )


async def get(conn: AsyncConn, run_id: int, *, owner_id: int | None) -> dict[str, Any] | None:
    return await one(conn, "runs_get", id=run_id, owner_id=owner_id)


async def cancel_for_job(
    conn: AsyncConn, job_id: int, *, now: datetime | None = None
) -> dict[str, Any]:
    row = await one(conn, "runs_cancel_for_job", job_id=job_id, now=now)
    assert row is not None
    return row


async def skip_misfired(
    conn: AsyncConn,
    *,
    threshold: timedelta,
    run_all_cap: int,
    floor: datetime,
    now: datetime | None = None,
) -> list[dict[str, Any]]:
    return await many(
        conn,
        "runs_skip_misfired",
        threshold=threshold,
        run_all_cap=run_all_cap,
        floor=floor,
        now=now,
    )


async def delete_queued_for_job(conn: AsyncConn, job_id: int) -> int:
    row = await one(conn, "runs_delete_queued_for_job", job_id=job_id)
    return int(row["deleted"]) if row else 0


async def cancel(conn: AsyncConn, run_id: int, *, owner_id: int | None) -> dict[str, Any]:
    """{state: before (None if not visible), was: the state changed from, if any}."""
    row = await one(conn, "runs_cancel", id=run_id, owner_id=owner_id)
    assert row is not None
    return row


async def dead_list(
    conn: AsyncConn, *, owner_id: int | None, limit: int, before_id: int | None = None
) -> list[dict[str, Any]]:
    return await many(conn, "runs_dead_list", owner_id=owner_id, limit=limit, before_id=before_id)


async def redrive(conn: AsyncConn, run_id: int, *, owner_id: int | None) -> dict[str, Any] | None:
    return await one(conn, "runs_redrive", id=run_id, owner_id=owner_id)


async def finished_since(
    conn: AsyncConn, *, owner_id: int, since: datetime
) -> list[dict[str, Any]]:
    return await many(conn, "runs_finished_since", owner_id=owner_id, since=since)
