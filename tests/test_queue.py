"""The queue's statements against real Postgres, with time injected through `now=`:
claim, SKIP LOCKED, fencing, heartbeat, reclaim, retries, dead letters, partitions."""

from __future__ import annotations

import contextlib
from datetime import UTC, datetime, timedelta

import psycopg
import pytest

from app.domain.models import Completion, LogLine, LogStream, RunState
from app.store import partitions, runs, waker
from app.store.clock import db_now as _now
from app.store.db import AsyncConn, connect
from tests.conftest import run
from tests.helpers import query, seed_runs

LEASE = timedelta(seconds=30)
WIDE = (datetime(2000, 1, 1, tzinfo=UTC), runs.FAR_FUTURE)


async def _claim(
    conn: AsyncConn, worker: str, limit: int, now: datetime | None = None
) -> list[runs.Claim]:
    return await runs.claim(conn, worker_id=worker, limit=limit, lease=LEASE, window=WIDE, now=now)


def test_claim_takes_only_due_runs_highest_priority_first(db_url: str) -> None:
    seed_runs(db_url, 5, due_in=-1, priority=0)
    high = seed_runs(db_url, 2, due_in=-1, priority=5)
    seed_runs(db_url, 5, due_in=3600)  # not due

    async def main() -> None:
        conn = await connect(db_url)
        first = await _claim(conn, "w1", 2)
        assert {c.job_id for c in first} == {high}
        rest = await _claim(conn, "w1", 100)
        assert len(rest) == 5  # the 5 future runs are not due
        assert all(c.attempt == 1 for c in rest)
        later = await _claim(conn, "w1", 100, now=await _now(conn) + timedelta(hours=2))
        assert len(later) == 5  # due in database time as injected

    run(main())


def test_concurrent_claims_skip_locked_rows(db_url: str) -> None:
    seed_runs(db_url, 10, due_in=-1)

    async def main() -> None:
        a = await connect(db_url)
        b = await connect(db_url)
        async with a.transaction():
            got_a = await _claim(a, "wa", 6)
            # a's rows are locked and uncommitted: b passes over them instead of waiting
            got_b = await _claim(b, "wb", 10)
        assert len(got_a) == 6 and len(got_b) == 4
        assert not {c.id for c in got_a} & {c.id for c in got_b}

    run(main())


def test_writes_are_fenced_by_worker_and_attempt(db_url: str) -> None:
    seed_runs(db_url, 1, due_in=-1)

    async def main() -> None:
        conn = await connect(db_url)
        (claim,) = await _claim(conn, "owner", 1)
        other = Completion(claim.key, RunState.SUCCEEDED, None, None)
        assert await runs.complete(conn, [other], worker_id="intruder") == []
        assert await runs.heartbeat(conn, [claim.key], worker_id="intruder", lease=LEASE) == {}
        assert await runs.heartbeat(conn, [claim.key], worker_id="owner", lease=LEASE) == {
            claim.id: False
        }
        # The lease runs out, the leader reclaims, and the late owner changes nothing.
        later = await _now(conn) + LEASE + timedelta(seconds=1)
        lost = await runs.reclaim(conn, limit=10, now=later)
        assert [r["id"] for r in lost] == [claim.id]
        late = Completion(claim.key, RunState.SUCCEEDED, None, None)
        assert await runs.complete(conn, [late], worker_id="owner") == []
        assert await runs.heartbeat(conn, [claim.key], worker_id="owner", lease=LEASE) == {}

    run(main())
    states = query(db_url, "SELECT attempt, state::text FROM pgsched.runs ORDER BY attempt")
    assert states == [{"attempt": 1, "state": "lost"}, {"attempt": 2, "state": "queued"}]


def test_reclaim_rechecks_expiry_and_marks_dead_once(db_url: str) -> None:
    job = seed_runs(db_url, 1, due_in=-1, max_attempts=2)

    async def main() -> None:
        conn = await connect(db_url)
        now = await _now(conn)
        await _claim(conn, "w", 1)
        assert await runs.reclaim(conn, limit=10, now=now) == []  # lease still valid
        await runs.reclaim(conn, limit=10, now=now + LEASE * 2)
        (second,) = await _claim(conn, "w", 1, now=now + LEASE * 2)
        assert second.attempt == 2
        final = await runs.reclaim(conn, limit=10, now=now + LEASE * 4)
        assert [r["dead"] for r in final] == [True]
        assert await runs.reclaim(conn, limit=10, now=now + LEASE * 8) == []

    run(main())
    rows = query(
        db_url,
        "SELECT attempt, state::text, dead FROM pgsched.runs WHERE job_id = %(j)s ORDER BY 1",
        {"j": job},
    )
    assert rows == [
        {"attempt": 1, "state": "lost", "dead": False},
        {"attempt": 2, "state": "lost", "dead": True},
    ]
    assert query(db_url, "SELECT state::text FROM pgsched.jobs")[0]["state"] == "dead"


def test_complete_batches_outcomes_retries_and_logs(db_url: str) -> None:
    job = seed_runs(db_url, 3, due_in=-1, max_attempts=2)

    async def main() -> None:
        conn = await connect(db_url)
        ok, failing, final = sorted(await _claim(conn, "w", 3), key=lambda c: c.id)
        at = await _now(conn)
        line = LogLine(1, at, LogStream.STDOUT, "hello")
        rows = await runs.complete(
            conn,
            [
                Completion(ok.key, RunState.SUCCEEDED, None, None, (line,)),
                Completion(failing.key, RunState.FAILED, "boom", timedelta(seconds=5)),
                Completion(final.key, RunState.TIMED_OUT, "slow", None),
            ],
            worker_id="w",
        )
        assert len(rows) == 3 and rows[0]["retried"] == 1 and rows[0]["logged"] == 1

    run(main())
    retry = query(
        db_url,
        """SELECT n.due_at - p.finished_at AS gap, n.attempt FROM pgsched.runs p
           JOIN pgsched.runs n ON n.slot_at = p.slot_at AND n.attempt = p.attempt + 1
           WHERE p.job_id = %(j)s""",
        {"j": job},
    )
    assert len(retry) == 1 and retry[0]["attempt"] == 2
    assert retry[0]["gap"] == timedelta(seconds=5)  # backoff measured in database time
    dead = query(db_url, "SELECT state::text FROM pgsched.runs WHERE dead")
    assert dead == [{"state": "timed_out"}]
    logs = query(db_url, "SELECT stream::text, line FROM pgsched.run_logs")
    assert logs == [{"stream": "stdout", "line": "hello"}]


def test_release_returns_runs_to_the_queue(db_url: str) -> None:
    seed_runs(db_url, 2, due_in=-1)

    async def main() -> None:
        conn = await connect(db_url)
        claims = await _claim(conn, "w", 2)
        assert await runs.release(conn, [c.key for c in claims], worker_id="other") == 0
        assert await runs.release(conn, [c.key for c in claims], worker_id="w") == 2
        again = await _claim(conn, "w2", 2)
        assert sorted(c.id for c in again) == sorted(c.id for c in claims)
        assert all(c.attempt == 1 for c in again)

    run(main())


def test_runs_in_every_partition_inside_the_horizon_are_claimed(db_url: str) -> None:
    # One run in each hourly partition over the next 20 hours.
    for hour in range(20):
        seed_runs(db_url, 1, due_in=hour * 3600 + 1)
    assert (
        query(
            db_url,
            "SELECT count(DISTINCT tableoid) AS n FROM pgsched.runs",
        )[0]["n"]
        >= 20
    )

    async def main() -> None:
        conn = await connect(db_url)
        later = await _now(conn) + timedelta(hours=21)
        window = await runs.queue_window(conn, ahead=timedelta(hours=1), now=later)
        claimed = await runs.claim(
            conn, worker_id="w", limit=100, lease=LEASE, window=window, now=later
        )
        assert len(claimed) == 20

    run(main())


def test_retention_drops_only_partitions_whose_runs_all_finished(db_url: str) -> None:
    seed_runs(db_url, 1, due_in=-1)  # stays queued: keeps its partition
    done = seed_runs(db_url, 1, due_in=3 * 3600)
    query(db_url, "UPDATE pgsched.runs SET state = 'succeeded' WHERE job_id = %(j)s", {"j": done})

    async def main() -> list[str]:
        conn = await connect(db_url)
        future = await _now(conn) + timedelta(days=30)
        async with conn.transaction():
            return await partitions.drop_expired(conn, retention=timedelta(days=7), now=future)

    dropped = run(main())
    assert dropped, "finished partitions past retention must be dropped"
    left = query(db_url, "SELECT count(*) AS n FROM pgsched.runs")[0]["n"]
    assert left == 1  # the queued run and its partition survived; the finished one went
    assert (
        query(db_url, "SELECT count(*) AS n FROM pgsched.runs WHERE state = 'queued'")[0]["n"] == 1
    )


def _claim_plan(url: str) -> tuple[int, float]:
    """(partitions the claim touches, planning + execution ms) from EXPLAIN ANALYZE of
    the prepared claim as a worker runs it (median of 20 executions), rolled back."""
    from app.store.queries import q

    with psycopg.connect(url, autocommit=False) as conn:
        for setting in runs.CLAIM_SESSION:
            conn.execute(setting)
        window = conn.execute(
            "SELECT least(min(due_at), now() - interval '5 minutes'), now() + interval '2 minutes'"
            " FROM pgsched.runs WHERE state = 'queued'"
        ).fetchone()
        assert window is not None
        params = {
            "now": None,
            "floor": window[0],
            "ceiling": window[1],
            "limit": 10,
            "worker_id": "w",
            "lease": LEASE,
        }
        timings = []
        for _ in range(20):
            row = conn.execute(
                "EXPLAIN (ANALYZE, SUMMARY, FORMAT JSON) " + q("runs_claim"), params
            ).fetchone()
            assert row is not None
            plan = row[0][0]
            timings.append(plan["Planning Time"] + plan["Execution Time"])
            conn.rollback()
    touched = {r for r in _relations(plan["Plan"]) if r.startswith("runs_p")}
    return len(touched), sorted(timings)[10]


def _relations(node: dict) -> list[str]:  # type: ignore[type-arg]
    """Relations the plan actually scanned (pruned subplans never execute)."""
    executed = node.get("Actual Loops", 0) > 0
    found = [node["Relation Name"]] if "Relation Name" in node and executed else []
    for child in node.get("Plans", []):
        found += _relations(child)
    return found


def test_claim_cost_does_not_grow_with_partitions(db_url: str) -> None:
    seed_runs(db_url, 50, due_in=-1)
    # From the template's ~50 partitions down to 2 (the current hour and the next).
    query(db_url, "DELETE FROM pgsched.runs WHERE due_at > now() + interval '1 hour'")
    query(db_url, "SELECT pgsched.drop_partitions(now() + interval '100 days')")
    query(db_url, "SELECT pgsched.ensure_partitions(now(), now() + interval '1 hour', 60)")
    assert query(db_url, "SELECT count(*) AS n FROM pgsched.partitions")[0]["n"] <= 3
    few_touched, few_ms = _claim_plan(db_url)
    # 200 more partitions of history behind now, as retention keeps them.
    query(
        db_url,
        "SELECT pgsched.ensure_partitions(now() - interval '210 hours', now(), 60)",
    )
    assert query(db_url, "SELECT count(*) AS n FROM pgsched.partitions")[0]["n"] >= 200
    many_touched, many_ms = _claim_plan(db_url)
    print(f"claim: {few_ms:.3f} ms with 2-3 partitions, {many_ms:.3f} ms with 200+")
    # The window spans minutes: at most the partitions around now, however many exist.
    assert few_touched <= 2 and many_touched <= 2
    assert many_ms <= 1.5 * few_ms + 0.2  # 0.2 ms of slack for timer noise on tiny plans


def _node_types(node: dict) -> list[str]:  # type: ignore[type-arg]
    return [node["Node Type"]] + [t for child in node.get("Plans", []) for t in _node_types(child)]


def test_claim_walks_its_index_in_a_partition_without_statistics(db_url: str) -> None:
    """A burst lands in a partition that autovacuum has not analysed yet. The claim, on
    its session settings, must still read runs_claim_idx in order and stop at its limit
    rather than fetch and sort every due row (which made each claim of a 100,000-run
    burst cost 25 ms)."""
    from app.store.queries import q

    seed_runs(db_url, 20_000, due_in=-1)
    analysed = query(
        db_url,
        "SELECT count(*) AS n FROM pg_stat_user_tables WHERE schemaname = 'pgsched' "
        "AND relname LIKE 'runs_p%%' AND n_live_tup > 0 AND last_autoanalyze IS NOT NULL",
    )[0]["n"]

    def plan(session: tuple[str, ...]) -> tuple[list[str], float]:
        with psycopg.connect(db_url) as conn:
            for setting in session:
                conn.execute(setting)  # type: ignore[arg-type]
            row = conn.execute(
                "EXPLAIN (ANALYZE, FORMAT JSON) " + q("runs_claim"),
                {
                    "now": None,
                    "floor": WIDE[0],
                    "ceiling": datetime.now(UTC) + timedelta(minutes=2),
                    "limit": 100,
                    "worker_id": "w",
                    "lease": LEASE,
                },
            ).fetchone()
            assert row is not None
            conn.rollback()
        return _node_types(row[0][0]["Plan"]), row[0][0]["Execution Time"]

    default_nodes, default_ms = plan(())
    claim_nodes, claim_ms = plan(runs.CLAIM_SESSION)
    print(f"claim of 100 among 20,000 due: {default_ms:.1f} ms by default, {claim_ms:.1f} ms")
    if not analysed:  # what the settings are for: without them the planner sorts
        assert "Sort" in default_nodes
    assert "Sort" not in claim_nodes and "Bitmap Heap Scan" not in claim_nodes
    assert "Index Scan" in claim_nodes


def test_a_deferred_insert_wakes_workers_only_through_the_waker(db_url: str) -> None:
    job = seed_runs(db_url, 1, due_in=3600)
    (row,) = query(db_url, "SELECT owner_id FROM pgsched.jobs WHERE id = %(j)s", {"j": job})

    async def main() -> None:
        listener = await connect(db_url)
        await listener.execute("LISTEN pgsched_runs")
        await listener.execute("LISTEN test_marker")
        conn = await connect(db_url)
        start = await _now(conn)
        taken = iter(range(1, 100))

        async def insert(*, defer_wake: bool) -> None:
            slot = start + timedelta(seconds=next(taken))
            run_row = (job, row["owner_id"], slot, 0, RunState.QUEUED, None)
            assert await runs.insert_slots(conn, [run_row], defer_wake=defer_wake)

        async def heard() -> list[int]:
            """Senders' pids of the wake-ups committed before a marker sent now (a listener
            gets notifications in commit order)."""
            await conn.execute("NOTIFY test_marker")
            pids = []
            async with contextlib.aclosing(listener.notifies(timeout=10)) as notes:
                async for note in notes:
                    if note.channel == "test_marker":
                        return pids
                    pids.append(note.pid)
            raise AssertionError("the marker never came")

        await insert(defer_wake=True)
        assert await heard() == []
        # The setting ends with its transaction: a plain insert on the same session (as
        # at psql) and a default one wake the workers from the trigger, once each.
        await conn.execute(
            "INSERT INTO pgsched.runs (due_at, job_id, owner_id, slot_at) "
            "VALUES (now() + interval '1 day', %(j)s, %(o)s, now() + interval '1 day')",
            {"j": job, "o": row["owner_id"]},
        )
        await insert(defer_wake=False)
        assert await heard() == [conn.info.backend_pid] * 2

        await insert(defer_wake=True)
        async with waker.running(db_url) as wakes:
            async with conn.transaction():
                with pytest.raises(RuntimeError):  # too early: nothing is committed yet
                    wakes.wake(conn)
            wakes.wake(conn)
            async with contextlib.aclosing(listener.notifies(timeout=10)) as notes:
                note = await anext(notes)
        assert note.channel == "pgsched_runs" and note.pid != conn.info.backend_pid
        assert await heard() == []  # one wake() is one NOTIFY

    run(main())
