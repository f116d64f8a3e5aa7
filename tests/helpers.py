"""Helpers for tests: seeding runs, starting real worker processes, bounded waiting."""

from __future__ import annotations

import dataclasses
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any, TypeVar

import psycopg
from psycopg.rows import dict_row
from psycopg.types.json import Jsonb

from app.settings import Settings, env_name

ROOT = Path(__file__).resolve().parent.parent
T = TypeVar("T")


def settings_env(settings: Settings) -> dict[str, str]:
    """The PGSCHED_* environment that reproduces `settings` in a child process."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PGSCHED_")}
    for field in dataclasses.fields(settings):
        value = getattr(settings, field.name)
        if value is None:
            continue
        if isinstance(value, timedelta):
            value = value.total_seconds()
        elif isinstance(value, tuple):
            value = ",".join(value)
        env[env_name(field.name)] = str(value)
    env["PYTHONPATH"] = str(ROOT)
    return env


def start_worker(
    settings: Settings,
    log_path: Path,
    *args: str,
    extra_env: dict[str, str] | None = None,
) -> subprocess.Popen[bytes]:
    env = {**settings_env(settings), **(extra_env or {})}
    log = log_path.open("ab")
    return subprocess.Popen(
        [sys.executable, "-m", "app", "worker", "--import", "tests.tasks", *args],
        cwd=ROOT,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )


def stop(proc: subprocess.Popen[bytes], timeout: float = 15) -> int:
    if proc.poll() is None:
        proc.send_signal(signal.SIGCONT)
        proc.terminate()
        try:
            return proc.wait(timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
    return proc.wait(5)


def wait_for(
    what: str, check: Callable[[], T | None], *, timeout: float, interval: float = 0.05
) -> T:
    """Poll `check` until it returns something truthy; fail after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        result = check()
        if result:
            return result
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        time.sleep(interval)


def query(url: str, sql: str, params: dict[str, Any] | None = None) -> list[dict[str, Any]]:
    with psycopg.connect(url, row_factory=dict_row, autocommit=True) as conn:
        cur = conn.execute(sql, params or {})  # type: ignore[arg-type]
        return cur.fetchall() if cur.description else []


def seed_runs(
    url: str,
    n: int,
    *,
    task: str = "pgsched.noop",
    args: dict[str, Any] | None = None,
    due_in: float = 0.0,
    timeout_seconds: float = 60,
    max_attempts: int = 3,
    owner: str = "tester",
    priority: int = 0,
) -> int:
    """One python job with `n` queued runs (distinct slots) due in `due_in` s; returns the
    job id. A fan-out like this is how bulk work reaches the queue."""
    rows = query(
        url,
        """
        WITH u AS (
            INSERT INTO pgsched.users (username) VALUES (%(owner)s)
            ON CONFLICT (username) DO UPDATE SET username = excluded.username
            RETURNING id
        ), j AS (
            INSERT INTO pgsched.jobs (owner_id, schedule_kind, executor, task, payload,
                                      timeout_seconds, max_attempts, backoff_base_seconds,
                                      backoff_max_seconds, priority)
            SELECT u.id, 'once', 'python', %(task)s, %(payload)s, %(timeout)s,
                   %(max_attempts)s, 0.2, 2, %(priority)s
              FROM u
            RETURNING id, owner_id
        ), r AS (
            INSERT INTO pgsched.runs (due_at, job_id, owner_id, slot_at, priority)
            SELECT now() + make_interval(secs => %(due_in)s - g * 0.000001), j.id, j.owner_id,
                   now() + make_interval(secs => %(due_in)s - g * 0.000001), %(priority)s
              FROM j, generate_series(1, %(n)s) AS g
            RETURNING 1
        )
        SELECT (SELECT id FROM j) AS job_id, (SELECT count(*) FROM r) AS n
        """,
        {
            "owner": owner,
            "task": task,
            "payload": Jsonb({"args": args or {}}),
            "timeout": timeout_seconds,
            "max_attempts": max_attempts,
            "priority": priority,
            "n": n,
            "due_in": due_in,
        },
    )
    assert rows[0]["n"] == n
    return int(rows[0]["job_id"])


def run_states(url: str, job_id: int) -> dict[str, int]:
    rows = query(
        url,
        "SELECT state::text, count(*) AS n FROM pgsched.runs WHERE job_id = %(j)s GROUP BY 1",
        {"j": job_id},
    )
    return {r["state"]: r["n"] for r in rows}


def read_ledger(path: Path) -> list[tuple[str, int, int, float, int, float]]:
    if not path.exists():
        return []
    out = []
    for line in path.read_text().splitlines():
        event, run_id, attempt, slot, pid, at = line.split()
        out.append((event, int(run_id), int(attempt), float(slot), int(pid), float(at)))
    return out


def db_now(url: str) -> datetime:
    now: datetime = query(url, "SELECT now() AS now")[0]["now"]
    return now
