"""Prometheus metrics of every pgsched process, in the default registry (which also
carries the process collector: CPU seconds and resident memory).

Worker metrics are counted where the event happens (claim, outcome, heartbeat); the
database gauges are read from the operator views (migration 0004) when the API is
scraped, so they describe the whole cluster, not one process. The API's request
metrics come from Litestar's Prometheus middleware (app/api/app.py).
"""

from __future__ import annotations

import collections
import functools
from collections.abc import Sequence
from typing import Any

from prometheus_client import (
    CONTENT_TYPE_LATEST,
    REGISTRY,
    Counter,
    Gauge,
    Histogram,
    generate_latest,
    start_http_server,
)

from app.domain.models import Claim
from app.store import stats
from app.store.db import AsyncConn

# Seconds, from a millisecond to ten minutes: lateness and durations share them.
SECONDS_BUCKETS = (
    0.001,
    0.0025,
    0.005,
    0.01,
    0.025,
    0.05,
    0.1,
    0.25,
    0.5,
    1.0,
    2.5,
    5.0,
    10.0,
    30.0,
    60.0,
    300.0,
    600.0,
)
BATCH_BUCKETS = (0, 1, 2, 5, 10, 20, 50, 100, 200, 500, 1000)

RUNS_CLAIMED = Counter("pgsched_runs_claimed_total", "Runs claimed by this worker.", ["executor"])
RUNS_COMPLETED = Counter(
    "pgsched_runs_completed_total",
    "Runs that reached a final state in this worker, by state and executor.",
    ["state", "executor"],
)
RUNS_FAILED = Counter(
    "pgsched_runs_failed_total",
    "Runs that ended failed or timed_out in this worker, by state and executor.",
    ["state", "executor"],
)
RUN_START_LATENESS = Histogram(
    "pgsched_run_start_lateness_seconds",
    "Start time minus due time of claimed runs (database clock).",
    buckets=SECONDS_BUCKETS,
)
RUN_DURATION = Histogram(
    "pgsched_run_duration_seconds",
    "Execution time of runs that ended in this worker.",
    ["executor"],
    buckets=SECONDS_BUCKETS,
)
CLAIM_BATCH = Histogram(
    "pgsched_claim_batch_size", "Runs returned by one claim statement.", buckets=BATCH_BUCKETS
)
HEARTBEATS = Counter("pgsched_heartbeats_total", "Lease renewals sent by this worker.")
HEARTBEAT_FAILURES = Counter(
    "pgsched_heartbeat_failures_total", "Lease renewals that could not reach the database."
)
LEASES_LOST = Counter(
    "pgsched_leases_lost_total", "Runs this worker stopped because their lease was lost."
)
COMPLETIONS_FENCED = Counter(
    "pgsched_completions_fenced_total",
    "Outcomes not written because the run was no longer this worker's (fencing).",
)
RUNS_EXECUTING = Gauge("pgsched_runs_executing", "Runs executing in this worker now.")
IS_LEADER = Gauge("pgsched_leader", "1 while this process is the elected maintenance leader.")
JOBS_CREATED = Counter("pgsched_jobs_created_total", "Jobs created by this process.")

# Cluster-wide, from the database (refreshed on each scrape of the API).
QUEUE_DUE = Gauge("pgsched_queue_due", "Runs due and not yet claimed.", ["priority"])
QUEUE_SCHEDULED = Gauge("pgsched_queue_scheduled", "Runs queued for a future time.")
QUEUE_RUNNING = Gauge("pgsched_queue_running", "Runs held by a worker now.")
OLDEST_DUE = Gauge(
    "pgsched_queue_oldest_due_seconds",
    "Age of the oldest due-but-unclaimed run, by priority.",
    ["priority"],
)
DEAD_LETTERS = Gauge("pgsched_dead_letters", "Runs in the dead-letter state.")
PARTITIONS = Gauge("pgsched_partitions", "Partitions of the runs table.")
WORKERS_LIVE = Gauge("pgsched_workers_live", "Workers whose heartbeat is recent.")
LEADER_PRESENT = Gauge("pgsched_leader_present", "1 if a maintenance leader holds its lease.")


# Label children resolved once: `.labels()` costs a lock and a dict lookup per call,
# which the hot path (every run, thousands per second) should not pay.
@functools.cache
def _child(metric: Counter | Histogram, *labels: str) -> Any:
    return metric.labels(*labels)


def observe_claim(claims: Sequence[Claim]) -> None:
    CLAIM_BATCH.observe(len(claims))
    for executor, n in collections.Counter(c.executor.value for c in claims).items():
        _child(RUNS_CLAIMED, executor).inc(n)
    for claim in claims:
        RUN_START_LATENESS.observe(max(0.0, (claim.started_at - claim.due_at).total_seconds()))


def observe_outcome(state: str, executor: str, duration: float) -> None:
    _child(RUNS_COMPLETED, state, executor).inc()
    if state in ("failed", "timed_out"):
        _child(RUNS_FAILED, state, executor).inc()
    _child(RUN_DURATION, executor).observe(duration)


async def refresh_database_gauges(conn: AsyncConn) -> None:
    summary = await stats.summary(conn)
    QUEUE_DUE.clear()
    OLDEST_DUE.clear()
    for row in summary.by_priority:
        QUEUE_DUE.labels(str(row["priority"])).set(row["due"])
        OLDEST_DUE.labels(str(row["priority"])).set(row["oldest_due_seconds"])
    QUEUE_SCHEDULED.set(summary.scheduled)
    QUEUE_RUNNING.set(summary.running)
    DEAD_LETTERS.set(summary.dead_letters)
    PARTITIONS.set(summary.partitions)
    WORKERS_LIVE.set(summary.workers_live)
    LEADER_PRESENT.set(1 if summary.leader_id else 0)


def exposition() -> tuple[bytes, str]:
    return generate_latest(REGISTRY), CONTENT_TYPE_LATEST


def serve(port: int, host: str) -> None:
    """Expose this process's metrics on their own port (a worker has no API)."""
    start_http_server(port, addr=host)
