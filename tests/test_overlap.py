"""Overlap policies under concurrency: three worker processes, a 3-second job due every
second for 20 seconds, once per policy (forbid, replace, allow)."""

from __future__ import annotations

import itertools
import time
from collections import defaultdict
from datetime import UTC, datetime, timedelta
from pathlib import Path

from app.domain.job import JobSpec
from app.domain.models import ExecutorKind, OverlapPolicy
from app.domain.retry import RetryPolicy
from app.domain.schedule import Schedule
from app.jobs import create_job
from app.settings import Settings
from app.store import users
from app.store.db import connect
from tests.conftest import run
from tests.helpers import query, read_ledger, start_worker, stop

RUN_FOR = 20.0


def _create_jobs(settings: Settings) -> dict[OverlapPolicy, int]:
    async def main() -> dict[OverlapPolicy, int]:
        conn = await connect(settings.database_url or "")
        user = await users.ensure(conn, "overlap")
        anchor = datetime.now(UTC) + timedelta(seconds=2)
        ids = {}
        for policy in OverlapPolicy:
            spec = JobSpec(
                schedule=Schedule.every(timedelta(seconds=1), anchor),
                executor=ExecutorKind.PYTHON,
                task="test.ledger",
                payload={"args": {"seconds": 3}},
                retry=RetryPolicy(1, timedelta(seconds=1), timedelta(seconds=1)),
                timeout=timedelta(seconds=10),
                overlap=policy,
                name=policy.value,
            )
            ids[policy] = (await create_job(conn, user["id"], spec, settings)).job["id"]
        return ids

    return run(main())


def test_overlap_policies_with_three_workers(settings: Settings, tmp_path: Path) -> None:
    url = settings.database_url or ""
    ledger = tmp_path / "ledger"
    env = {"TEST_LEDGER_PATH": str(ledger)}
    procs = [
        start_worker(settings, tmp_path / f"w{i}.log", "--concurrency", "10", extra_env=env)
        for i in range(3)
    ]
    try:
        ids = _create_jobs(settings)
        time.sleep(RUN_FOR + 2)  # real concurrency over real time is what is under test
    finally:
        for proc in procs:
            stop(proc)
    job_of = {r["id"]: r["job_id"] for r in query(url, "SELECT id, job_id FROM pgsched.runs")}
    spans: dict[int, dict[int, list[float]]] = defaultdict(lambda: defaultdict(list))
    for _event, run_id, _, _, _, at in read_ledger(ledger):
        spans[job_of[run_id]][run_id].append(at)
    finished = {
        r["id"]: (r["state"], r["finished_at"].timestamp() if r["finished_at"] else None)
        for r in query(url, "SELECT id, state::text, finished_at FROM pgsched.runs")
    }

    def intervals(job: int) -> list[tuple[float, float, int]]:
        out = []
        for run_id, times in spans[job].items():
            end = max(times) if len(times) > 1 else (finished[run_id][1] or time.time())
            out.append((min(times), end, run_id))
        return sorted(out)

    def max_concurrent(job: int) -> int:
        events = sorted(
            [(s, 1) for s, _, _ in intervals(job)] + [(e, -1) for _, e, _ in intervals(job)],
            key=lambda x: (x[0], x[1]),
        )
        now = peak = 0
        for _, delta in events:
            now += delta
            peak = max(peak, now)
        return peak

    forbid, replace, allow = (
        ids[OverlapPolicy.FORBID],
        ids[OverlapPolicy.REPLACE],
        ids[OverlapPolicy.ALLOW],
    )
    skipped = query(
        url,
        "SELECT count(*) AS n FROM pgsched.runs WHERE job_id = %(j)s AND state = 'skipped' "
        "AND error LIKE '%%overlap forbid%%'",
        {"j": forbid},
    )[0]["n"]
    print(
        f"overlap: forbid ran {len(spans[forbid])} (peak {max_concurrent(forbid)}), "
        f"skipped {skipped}; replace ran {len(spans[replace])} (peak "
        f"{max_concurrent(replace)}); allow ran {len(spans[allow])} (peak "
        f"{max_concurrent(allow)})"
    )
    assert len(spans[forbid]) >= 4 and max_concurrent(forbid) == 1
    assert skipped >= 10, "every slot that found the previous run active is recorded"
    assert max_concurrent(allow) >= 3
    runs_in_order = intervals(replace)
    assert len(runs_in_order) >= 10
    for (_, _, previous), (start, _, _) in itertools.pairwise(runs_in_order):
        state, ended = finished[previous]
        if state == "cancelled":
            assert ended is not None and ended <= start + 0.01, "replaced before successor"
    cancelled = sum(1 for _, _, r in runs_in_order if finished[r][0] == "cancelled")
    assert cancelled >= len(runs_in_order) // 2
