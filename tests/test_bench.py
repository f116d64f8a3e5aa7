"""The bench's own checks: a scenario reports figures only for runs that each succeeded
exactly once."""

from __future__ import annotations

import pytest

from app.bench import _lateness
from app.errors import BenchFailed
from tests.helpers import query, seed_runs

SUCCEED_ALL = (
    "UPDATE pgsched.runs SET state = 'succeeded', started_at = due_at + interval '2 ms', "
    "finished_at = due_at + interval '3 ms'"
)


def test_lateness_is_reported_only_when_every_run_succeeded_exactly_once(db_url: str) -> None:
    seed_runs(db_url, 10, due_in=-1)
    query(db_url, SUCCEED_ALL)
    late = _lateness(db_url, 10, "ten")
    assert late["runs"] == 10 and late["exactly_once"] is True
    assert late["p50_ms"] == late["max_ms"] == pytest.approx(2.0)
    with pytest.raises(BenchFailed, match="eleven: 11 runs due, 10 run rows"):
        _lateness(db_url, 11, "eleven")  # a run that never ran
    # One run executed twice: its first attempt failed, its second succeeded.
    query(
        db_url,
        "WITH one AS (UPDATE pgsched.runs SET state = 'failed' WHERE id = "
        "(SELECT min(id) FROM pgsched.runs) RETURNING *) "
        "INSERT INTO pgsched.runs (due_at, job_id, owner_id, slot_at, attempt, state, "
        "started_at, finished_at) SELECT due_at, job_id, owner_id, slot_at, 2, 'succeeded', "
        "started_at, finished_at FROM one",
    )
    with pytest.raises(BenchFailed, match="11 run rows, 9 succeeded at their first attempt"):
        _lateness(db_url, 10, "twice")
