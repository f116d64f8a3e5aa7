"""`pgsched bench`: measurements against a fresh database, as rates and ratios.

Each scenario gets a database of its own (created on the server it is given, or on an
embedded PostgreSQL 18), so runs never disturb each other. Results print as a markdown
table and, with --json, as JSON.
"""

from __future__ import annotations

import asyncio
import os
import secrets
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import psycopg

from app.domain.models import RunState
from app.planner import plan
from app.store import migrate, runs
from app.store.db import connect
from app.store.queries import q


@dataclass
class Result:
    scenario: str
    metric: str
    value: float
    unit: str
    detail: dict[str, Any] = field(default_factory=dict)


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


def _one_job(url: str, task: str = "pgsched.noop") -> int:
    row = _sql(
        url,
        "INSERT INTO pgsched.jobs (owner_id, schedule_kind, executor, task, timeout_seconds, "
        "max_attempts, backoff_base_seconds, backoff_max_seconds) "
        "SELECT id, 'once', 'python', %(task)s, 60, 3, 1, 60 FROM pgsched.users "
        "WHERE username = 'bench' RETURNING id",
        {"task": task},
    )
    return int(row[0][0])


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
        )
    ]


def enqueue(bench: Bench, single: int = 3000, bulk: int = 100_000) -> list[Result]:
    """Direct inserts: one run per statement (prepared), and one statement for many."""
    url = bench.fresh_db()
    job = _one_job(url)
    owner = int(_sql(url, "SELECT id FROM pgsched.users WHERE username = 'bench'")[0][0])

    async def singles() -> int:
        conn = await connect(url)
        base = time.time()
        from datetime import UTC, datetime

        for i in range(single):
            slot = datetime.fromtimestamp(base + i * 1e-4, UTC)
            await runs.insert_slots(conn, [(job, owner, slot, 0, RunState.QUEUED, None)])
            if i % 500 == 0:
                bench.progress(f"enqueue single: {i}")
        await conn.close()
        return single

    async def bulk_insert() -> int:
        conn = await connect(url)
        from datetime import UTC, datetime

        base = time.time() + 3600
        batch = 10_000
        for start in range(0, bulk, batch):
            rows = [
                (
                    job,
                    owner,
                    datetime.fromtimestamp(base + (start + i) * 1e-4, UTC),
                    0,
                    RunState.QUEUED,
                    None,
                )
                for i in range(batch)
            ]
            await runs.insert_slots(conn, rows)
            bench.progress(f"enqueue bulk: {start + batch}")
        await conn.close()
        return bulk

    n1, s1 = asyncio.run(_timed(singles))
    n2, s2 = asyncio.run(_timed(bulk_insert))
    return [
        Result("enqueue", "single direct insert", n1 / s1, "runs/s", {"runs": n1}),
        Result(
            "enqueue", "bulk insert (unnest, 10k per statement)", n2 / s2, "runs/s", {"runs": n2}
        ),
    ]


def drain(bench: Bench, n: int = 20_000, workers: int = 2, concurrency: int = 200) -> list[Result]:
    """`n` due no-op runs drained by `workers` processes; verified exactly once."""
    url = bench.fresh_db()
    job = _one_job(url)
    _sql(
        url,
        "INSERT INTO pgsched.runs (due_at, job_id, owner_id, slot_at) "
        "SELECT now() - make_interval(secs => g * 1e-6), %(job)s, owner_id, "
        "now() - make_interval(secs => g * 1e-6) "
        "FROM pgsched.jobs, generate_series(1, %(n)s) g WHERE id = %(job)s",
        {"job": job, "n": n},
    )
    _sql(url, "VACUUM ANALYZE pgsched.runs")
    env = {k: v for k, v in os.environ.items() if not k.startswith("PGSCHED_")}
    env.update(
        PGSCHED_DATABASE_URL=url,
        PGSCHED_LOG_LEVEL="warning",
        PGSCHED_CLAIM_BATCH_MAX=str(concurrency),
    )
    procs = [
        subprocess.Popen(
            [sys.executable, "-m", "app", "worker", "--concurrency", str(concurrency)],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        for _ in range(workers)
    ]
    try:
        deadline = time.monotonic() + 600
        while time.monotonic() < deadline:
            done = _sql(
                url,
                "SELECT count(*) FROM pgsched.runs WHERE state <> 'queued' AND state <> 'running'",
            )[0][0]
            bench.progress(f"drain: {done}/{n}")
            if done >= n:
                break
            time.sleep(0.2)
    finally:
        for proc in procs:
            proc.terminate()
        for proc in procs:
            proc.wait(30)
    (ok, total, first, last) = _sql(
        url,
        "SELECT count(*) FILTER (WHERE state = 'succeeded' AND attempt = 1), count(*), "
        "min(started_at), max(finished_at) FROM pgsched.runs",
    )[0]
    exactly_once = ok == n and total == n
    seconds = (last - first).total_seconds()
    return [
        Result(
            "drain",
            f"no-op runs drained ({workers} workers x {concurrency})",
            n / seconds,
            "runs/s",
            {"runs": n, "seconds": round(seconds, 3), "exactly_once": exactly_once},
        )
    ]


def claim_partitions(bench: Bench) -> list[Result]:
    """The claim with 2 partitions and with 500: median planning + execution time."""
    url = bench.fresh_db()
    job = _one_job(url)
    _sql(url, "SELECT pgsched.drop_partitions(now() + interval '100 days')")
    _sql(url, "SELECT pgsched.ensure_partitions(now(), now() + interval '1 hour', 60)")

    def measure() -> float:
        _sql(
            url,
            "INSERT INTO pgsched.runs (due_at, job_id, owner_id, slot_at) "
            "SELECT now() - make_interval(secs => g * 1e-3), %(job)s, owner_id, now() "
            "FROM pgsched.jobs, generate_series(1, 1000) g WHERE id = %(job)s",
            {"job": job},
        )
        timings: list[float] = []
        with psycopg.connect(url) as conn:
            floor, ceiling = conn.execute(
                "SELECT now() - interval '5 minutes', now() + interval '2 minutes'"
            ).fetchone()  # type: ignore[misc]
            params = {
                "now": None,
                "floor": floor,
                "ceiling": ceiling,
                "limit": 100,
                "worker_id": "bench",
                "lease": timedelta(seconds=30),
            }
            for _ in range(50):
                row = conn.execute(
                    "EXPLAIN (ANALYZE, SUMMARY, FORMAT JSON) " + q("runs_claim"), params
                ).fetchone()
                assert row is not None
                summary = row[0][0]
                timings.append(float(summary["Planning Time"] + summary["Execution Time"]))
                conn.rollback()
        return statistics.median(timings)

    few_parts = _sql(url, "SELECT count(*) FROM pgsched.partitions")[0][0]
    few = measure()
    _sql(url, "SELECT pgsched.ensure_partitions(now() - interval '500 hours', now(), 60)")
    many_parts = _sql(url, "SELECT count(*) FROM pgsched.partitions")[0][0]
    many = measure()
    return [
        Result(
            "claim vs partitions",
            f"latency ratio ({many_parts} vs {few_parts} partitions)",
            many / few,
            "x",
            {"few_ms": round(few, 3), "many_ms": round(many, 3)},
        )
    ]


SCENARIOS: dict[str, Callable[[Bench], list[Result]]] = {
    "enqueue": enqueue,
    "drain": drain,
    "planner": planner,
    "claim": claim_partitions,
}


def run_bench(server_url: str | None, names: list[str], progress: Progress) -> list[Result]:
    cleanup: Callable[[], None] | None = None
    if server_url is None:
        from app import embedded

        data = Path(tempfile.mkdtemp(prefix="pgsched-bench-"))
        data.chmod(0o755)
        server_url = embedded.start(data)
        progress(f"embedded PostgreSQL 18 in {data}")
    bench = Bench(server_url, progress)
    results: list[Result] = []
    try:
        for name in names:
            results.extend(SCENARIOS[name](bench))
    finally:
        bench.close()
        if cleanup:
            cleanup()
    return results


def markdown(results: list[Result]) -> str:
    lines = ["| scenario | measure | result |", "|---|---|---|"]
    for r in results:
        lines.append(f"| {r.scenario} | {r.metric} | {r.value:,.2f} {r.unit} |")
    return "\n".join(lines)
