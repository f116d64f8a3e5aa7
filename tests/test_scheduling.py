"""Scheduling semantics against real Postgres with injected time: misfire policies after
downtime, a clock set back, concurrent planners, fair share, priority, idempotency, and
pause/resume/trigger/edit."""

from __future__ import annotations

import asyncio
from collections import Counter
from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg
import pytest

from app.domain.job import JobSpec
from app.domain.models import ExecutorKind, MisfirePolicy, RunState
from app.domain.retry import RetryPolicy
from app.domain.schedule import Schedule
from app.jobs import create_job, edit_job, pause_job, resume_job, trigger_job
from app.planner import plan, skip_misfired
from app.settings import Settings
from app.store import partitions, runs, users
from app.store.clock import db_now
from app.store.db import AsyncConn, connect
from tests.conftest import run
from tests.helpers import query

LEASE = timedelta(seconds=30)
WIDE = (datetime(2000, 1, 1, tzinfo=UTC), runs.FAR_FUTURE)
HORIZON = timedelta(minutes=10)


def _spec(schedule: Schedule, **kw: Any) -> JobSpec:
    return JobSpec(
        schedule=schedule,
        executor=ExecutorKind.PYTHON,
        task="pgsched.noop",
        retry=RetryPolicy(3, timedelta(seconds=1), timedelta(seconds=10)),
        **kw,
    )


async def _db_minute(conn: AsyncConn) -> datetime:
    return (await db_now(conn)).replace(second=0, microsecond=0)


async def _cron_job(conn: AsyncConn, owner: str, cursor: datetime, **kw: Any) -> int:
    """A `* * * * *` job whose planner cursor starts at `cursor` (not planned yet)."""
    user = await users.ensure(conn, owner)
    spec = _spec(Schedule.cron_expr("* * * * *"), **kw)
    from app.store import jobs

    row = await jobs.insert(conn, user["id"], spec, next_run_at=cursor)
    assert row is not None
    return int(row["id"])


async def _pass(conn: AsyncConn, settings: Settings, now: datetime) -> None:
    """One planner pass at database time `now`, as the Planner service runs it."""
    async with conn.transaction():
        await plan(conn, horizon=HORIZON, limit=10_000, now=now)
        await skip_misfired(conn, settings, now=now)


def test_misfire_policies_after_ten_minutes_of_downtime(settings: Settings) -> None:
    async def main() -> dict[int, dict[str, int]]:
        conn = await connect(settings.database_url or "")
        t0 = await _db_minute(conn) - timedelta(minutes=15)
        ids = {policy: await _cron_job(conn, "m", t0, misfire=policy) for policy in MisfirePolicy}
        await _pass(conn, settings, t0)  # plans t0 .. t0+10m
        claimed = await runs.claim(conn, worker_id="w", limit=10, lease=LEASE, window=WIDE, now=t0)
        assert len(claimed) == 3  # the t0 slot of each job ran; then every worker went down
        # Back after ten minutes: slots t0+1m .. t0+10m are all over a minute late (missed);
        # t0+11m is due this very second and simply runs.
        back = t0 + timedelta(minutes=11, seconds=1)
        await _pass(conn, settings, back)
        due = await runs.claim(conn, worker_id="w", limit=1000, lease=LEASE, window=WIDE, now=back)
        catch_up = Counter(c.job_id for c in due if c.slot_at <= t0 + timedelta(minutes=10))
        on_time = Counter(c.job_id for c in due if c.slot_at == t0 + timedelta(minutes=11))
        assert all(on_time[i] == 1 for i in ids.values())
        return {ids[p]: {"ran": catch_up[ids[p]]} for p in MisfirePolicy}

    result = run(main())
    rows = query(
        settings.database_url or "",
        "SELECT job_id, count(*) FILTER (WHERE state = 'skipped') AS skipped, "
        "array_agg(DISTINCT error) FILTER (WHERE state = 'skipped') AS reasons "
        "FROM pgsched.runs GROUP BY job_id ORDER BY job_id",
    )
    (once_id, once), (all_id, all_), (skip_id, skip) = sorted(result.items())
    by_job = {r["job_id"]: r for r in rows}
    assert once["ran"] == 1 and by_job[once_id]["skipped"] == 9
    assert all_["ran"] == 10 and by_job[all_id]["skipped"] == 0
    assert skip["ran"] == 0 and by_job[skip_id]["skipped"] == 10
    assert by_job[once_id]["reasons"] == ["coalesced (policy run_once)"]
    assert by_job[skip_id]["reasons"] == ["misfired (policy skip)"]


def test_starting_deadline_skips_late_slots(settings: Settings) -> None:
    async def main() -> int:
        conn = await connect(settings.database_url or "")
        t0 = await _db_minute(conn) - timedelta(minutes=15)
        await _cron_job(
            conn, "d", t0, misfire=MisfirePolicy.RUN_ALL, starting_deadline=timedelta(minutes=3)
        )
        await _pass(conn, settings, t0 - timedelta(seconds=1))
        await _pass(conn, settings, t0 + timedelta(minutes=5, seconds=30))
        due = await runs.claim(
            conn,
            worker_id="w",
            limit=100,
            lease=LEASE,
            window=WIDE,
            now=t0 + timedelta(minutes=5, seconds=30),
        )
        return len(due)

    # Slots t0 .. t0+5m are due; those older than 3 minutes (t0 .. t0+2m) are skipped.
    assert run(main()) == 3
    reasons = query(
        settings.database_url or "",
        "SELECT count(*) AS n FROM pgsched.runs WHERE error = 'missed its starting deadline'",
    )
    assert reasons[0]["n"] == 3


def test_clock_set_back_an_hour_runs_no_slot_twice(settings: Settings) -> None:
    async def main() -> list[int]:
        conn = await connect(settings.database_url or "")
        t0 = await _db_minute(conn)
        await _cron_job(conn, "c", t0)
        ran: list[int] = []
        # The clock runs a minute at a time, is set back an hour after t0+4m, and runs on.
        times = [t0 + timedelta(minutes=m) for m in range(5)]
        times += [t0 + timedelta(minutes=4) - timedelta(hours=1)]
        times += [t0 + timedelta(minutes=m, seconds=1) for m in range(4, 10)]
        for now in times:
            await _pass(conn, settings, now)
            claims = await runs.claim(
                conn, worker_id="w", limit=100, lease=LEASE, window=WIDE, now=now
            )
            ran.extend(int(c.slot_at.timestamp()) for c in claims)
        return ran

    ran = run(main())
    assert len(ran) == 10 and len(set(ran)) == 10  # slots t0 .. t0+9m, each once
    dupes = query(
        settings.database_url or "",
        "SELECT slot_at FROM pgsched.runs WHERE attempt = 1 GROUP BY slot_at HAVING count(*) > 1",
    )
    assert dupes == []


def test_three_planners_at_once_make_one_run_per_slot(settings: Settings) -> None:
    url = settings.database_url or ""
    query(url, "INSERT INTO pgsched.users (username) VALUES ('fleet')")
    query(
        url,
        """INSERT INTO pgsched.jobs (owner_id, schedule_kind, cron, executor, task,
               timeout_seconds, max_attempts, backoff_base_seconds, backoff_max_seconds,
               next_run_at)
           SELECT u.id, 'cron', '* * * * *', 'python', 'pgsched.noop', 60, 3, 1, 60,
                  date_trunc('minute', now()) + interval '1 minute'
             FROM pgsched.users u, generate_series(1, 1000) WHERE u.username = 'fleet'""",
    )

    async def planner() -> int:
        conn = await connect(url)
        total = 0
        while True:  # as the Planner service: batches until nothing is left
            async with conn.transaction():
                result = await plan(
                    conn,
                    horizon=timedelta(minutes=5),
                    limit=100,
                )
            total += result.inserted
            if result.jobs < 100:
                return total

    async def main() -> list[int]:
        return list(await asyncio.gather(planner(), planner(), planner()))

    per_planner = run(main())
    assert all(n > 0 for n in per_planner), f"all three planners took part: {per_planner}"
    rows = query(
        url,
        "SELECT count(*) AS n, count(DISTINCT (job_id, slot_at)) AS slots, "
        "count(DISTINCT slot_at) AS minutes FROM pgsched.runs WHERE attempt = 1",
    )[0]
    assert rows["n"] == rows["slots"] == 1000 * rows["minutes"]
    assert rows["minutes"] in (5, 6)


def _fair_claims(url: str, n: int, batch: int = 100) -> list[int]:
    """Owner ids of the first `n` claimed runs, claiming and finishing in batches."""

    async def main() -> list[int]:
        conn = await connect(url)
        owners: list[int] = []
        while len(owners) < n:
            got = await runs.claim(conn, worker_id="w", limit=batch, lease=LEASE, window=WIDE)
            assert got, "the queue ran dry"
            owners.extend(c.owner_id for c in got)
        return owners[:n]

    return run(main())


async def _enqueue(conn: AsyncConn, owner: str, weight: float, n: int) -> int:
    """`n` due runs of one job of `owner`, through the fair-share insert."""
    user = await users.ensure(conn, owner)
    await conn.execute(
        "UPDATE pgsched.users SET job_weight = %s WHERE id = %s", (weight, user["id"])
    )
    from app.store import jobs

    job = await jobs.insert(
        conn, user["id"], _spec(Schedule.once(datetime.now(UTC))), next_run_at=None
    )
    assert job is not None
    base = datetime.now(UTC) - timedelta(seconds=30)
    await runs.insert_slots(
        conn,
        [
            (job["id"], user["id"], base + timedelta(microseconds=i), 0, RunState.QUEUED, None)
            for i in range(n)
        ],
    )
    return int(user["id"])


def test_fair_share_follows_weights(settings: Settings) -> None:
    url = settings.database_url or ""

    async def seed() -> tuple[int, int]:
        conn = await connect(url)
        a = await _enqueue(conn, "a", 1, 4000)
        b = await _enqueue(conn, "b", 3, 4000)
        return a, b

    a, b = run(seed())
    owners = Counter(_fair_claims(url, 2000))
    share_b = owners[b] / 2000
    print(f"fair share: B (weight 3) got {share_b:.1%} of the first 2000, A {owners[a] / 2000:.1%}")
    assert 0.70 <= share_b <= 0.80


def test_one_run_at_a_time_is_charged_as_a_batch_is(settings: Settings) -> None:
    """runs_insert_one writes the fair-share rule of runs_insert_slots for a single run:
    five runs inserted one by one carry the virtual finish times of five in a batch."""
    url = settings.database_url or ""

    async def main() -> None:
        conn = await connect(url)
        batch_owner = await _enqueue(conn, "batch", 2.5, 5)
        single_owner = await _enqueue(conn, "single", 2.5, 0)

        async def rows(sql: str, owner: int) -> list[dict[str, Any]]:
            return await (await conn.execute(sql, (owner,))).fetchall()  # type: ignore[arg-type]

        (job,) = await rows("SELECT id FROM pgsched.jobs WHERE owner_id = %s", single_owner)
        base = datetime.now(UTC) - timedelta(seconds=30)
        for i in range(5):
            inserted = await runs.insert_one(
                conn,
                job_id=job["id"],
                owner_id=single_owner,
                slot_at=base + timedelta(microseconds=i),
                priority=0,
            )
            assert inserted is not None and inserted["state"] == "queued"
        vfts = {}
        for owner in (batch_owner, single_owner):
            ran = await rows(
                "SELECT vft FROM pgsched.runs WHERE owner_id = %s ORDER BY slot_at", owner
            )
            (user,) = await rows("SELECT vfinish FROM pgsched.users WHERE id = %s", owner)
            vfts[owner] = ([r["vft"] for r in ran], user["vfinish"])
        assert vfts[batch_owner][0] == pytest.approx([0.4, 0.8, 1.2, 1.6, 2.0])
        assert vfts[single_owner][0] == pytest.approx(vfts[batch_owner][0])
        assert vfts[single_owner][1] == pytest.approx(vfts[batch_owner][1]) == 2.0
        # the same slot twice is no second run
        again = await runs.insert_one(
            conn, job_id=job["id"], owner_id=single_owner, slot_at=base, priority=0
        )
        assert again is None

    run(main())


def test_small_user_is_not_starved_by_a_huge_backlog(settings: Settings) -> None:
    url = settings.database_url or ""

    async def seed_backlog() -> int:
        conn = await connect(url)
        return await _enqueue(conn, "a", 1, 50_000)

    run(seed_backlog())
    first = _fair_claims(url, 500)  # the backlog is being worked on

    async def seed_small() -> int:
        conn = await connect(url)
        return await _enqueue(conn, "c", 1, 10)

    c = run(seed_small())
    after = _fair_claims(url, 2000)
    positions = [i for i, owner in enumerate(after) if owner == c]
    print(f"fair share: C's 10 runs started at positions {positions} after joining a 50k backlog")
    assert len(first) == 500 and len(positions) == 10 and max(positions) < 2000


def test_high_priority_run_is_claimed_in_the_first_batches(settings: Settings) -> None:
    url = settings.database_url or ""

    async def seed() -> int:
        conn = await connect(url)
        await _enqueue(conn, "low", 1, 10_000)
        user = await users.ensure(conn, "high")
        from app.store import jobs

        job = await jobs.insert(
            conn,
            user["id"],
            _spec(Schedule.once(datetime.now(UTC)), priority=10),
            next_run_at=None,
        )
        assert job is not None
        await runs.insert_slots(
            conn,
            [
                (
                    job["id"],
                    user["id"],
                    datetime.now(UTC) - timedelta(seconds=30),
                    10,
                    RunState.QUEUED,
                    None,
                )
            ],
        )
        return int(user["id"])

    high = run(seed())
    first_two_batches = _fair_claims(url, 200, batch=100)
    assert high in first_two_batches[:100]


def test_idempotency_key_returns_the_existing_job(settings: Settings) -> None:
    async def main() -> tuple[Any, Any]:
        conn = await connect(settings.database_url or "")
        user = await users.ensure(conn, "idem")
        spec = _spec(Schedule.once(datetime.now(UTC) + timedelta(hours=1)), idempotency_key="k1")
        first = await create_job(conn, user["id"], spec, settings)
        second = await create_job(conn, user["id"], spec, settings)
        return first, second

    first, second = run(main())
    assert first.created and not second.created
    assert first.job["id"] == second.job["id"]
    assert query(settings.database_url or "", "SELECT count(*) AS n FROM pgsched.jobs")[0]["n"] == 1


def test_pause_resume_trigger_and_edit(settings: Settings) -> None:
    url = settings.database_url or ""

    async def main() -> None:
        conn = await connect(url)
        user = await users.ensure(conn, "ops")
        created = await create_job(
            conn, user["id"], _spec(Schedule.cron_expr("* * * * *")), settings
        )
        job_id = created.job["id"]
        queued = await _queued(conn, job_id)
        assert len(queued) >= 9  # ten minutes of slots inside the horizon
        await pause_job(conn, job_id, owner_id=None)
        assert await _queued(conn, job_id) == []
        await resume_job(conn, job_id, settings, owner_id=None)
        assert len(await _queued(conn, job_id)) == len(queued)
        run_row = await trigger_job(conn, job_id, settings, owner_id=None)
        assert run_row["state"] == "queued"
        # Edit to every 5 minutes: the per-minute slots are gone, the new ones planned.
        from app.jobs import spec_of
        from app.store import jobs

        row = await jobs.get(conn, job_id, owner_id=None)
        assert row is not None
        import dataclasses

        new = dataclasses.replace(spec_of(row), schedule=Schedule.cron_expr("*/5 * * * *"))
        await edit_job(conn, job_id, new, settings, owner_id=None)
        slots = [s for s in await _queued(conn, job_id) if s != run_row["id"]]
        minutes = {s.minute % 5 for s in slots}
        assert minutes == {0} and 1 <= len(slots) <= 3

    run(main())


async def _queued(conn: AsyncConn, job_id: int) -> list[Any]:
    cur = await conn.execute(
        "SELECT slot_at FROM pgsched.runs WHERE job_id = %s AND state = 'queued' "
        "AND attempt = 1 AND slot_at > now() ORDER BY slot_at",
        (job_id,),
    )
    return [r["slot_at"] for r in await cur.fetchall()]


def test_job_actions_make_the_partitions_their_runs_need(settings: Settings) -> None:
    """A database no worker has kept lately has no partition for now: create, trigger,
    resume and edit make them and retry their whole transaction, where a savepoint used
    to cost every create two round trips; a CHECK violation is not taken for one."""
    url = settings.database_url or ""
    none_left = "SELECT pgsched.drop_partitions(now() + interval '100 days')"
    count = "SELECT count(*) AS n FROM pgsched.partitions"

    async def main() -> None:
        conn = await connect(url)
        user = await users.ensure(conn, "kept-by-nobody")
        query(url, none_left)
        assert query(url, count)[0]["n"] == 0
        spec = _spec(Schedule.cron_expr("* * * * *"))
        created = await create_job(conn, user["id"], spec, settings)
        job_id = created.job["id"]
        assert created.created and len(await _queued(conn, job_id)) >= 9
        assert query(url, count)[0]["n"] > 0
        query(url, none_left)
        assert (await trigger_job(conn, job_id, settings, owner_id=None))["state"] == "queued"
        await pause_job(conn, job_id, owner_id=None)
        query(url, none_left)
        await resume_job(conn, job_id, settings, owner_id=None)
        assert len(await _queued(conn, job_id)) >= 9
        query(url, none_left)
        await edit_job(conn, job_id, spec, settings, owner_id=None)
        assert len(await _queued(conn, job_id)) >= 9
        jobs_made = query(url, "SELECT count(*) AS n FROM pgsched.jobs")[0]["n"]
        assert jobs_made == 1  # each retry rolled its first try back whole
        with pytest.raises(psycopg.errors.CheckViolation) as raised:
            await conn.execute(
                "UPDATE pgsched.users SET job_weight = 0 WHERE id = %s", (user["id"],)
            )
        assert not partitions.missing(raised.value)
        await conn.close()

    run(main())
