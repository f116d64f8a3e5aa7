"""The operator's psql views (migration 0004), queried with known data."""

from __future__ import annotations

from typing import Any

import psycopg
from psycopg.rows import dict_row

from tests.helpers import query


def _seed(url: str) -> dict[str, Any]:
    """Two owners; runs in every state that a view selects, at known offsets from now."""
    rows = query(
        url,
        """
        WITH u AS (
            INSERT INTO pgsched.users (username) VALUES ('ann'), ('bob') RETURNING id, username
        ), j AS (
            INSERT INTO pgsched.jobs (owner_id, name, schedule_kind, executor, task,
                                      timeout_seconds, max_attempts, backoff_base_seconds,
                                      backoff_max_seconds)
            SELECT id, username || '-job', 'once', 'python', 'pgsched.noop', 60, 3, 1, 10
              FROM u
            RETURNING id, owner_id, name
        )
        SELECT j.id AS job_id, j.owner_id, u.username FROM j JOIN u ON u.id = j.owner_id
        """,
    )
    jobs = {r["username"]: r for r in rows}
    ann, bob = jobs["ann"], jobs["bob"]
    query(
        url,
        """
        SELECT pgsched.ensure_partitions(now() - interval '2 days', now() + interval '2 hours', 60);
        INSERT INTO pgsched.workers (id, hostname, pid, concurrency, running, heartbeat_at)
        VALUES ('w-live', 'h1', 11, 10, 1, now() - interval '2 seconds'),
               ('w-gone', 'h2', 12, 10, 0, now() - interval '5 minutes');
        INSERT INTO pgsched.leaders (name, leader_id, elected_at, expires_at)
        VALUES ('maintainer', 'w-live', now(), now() + interval '10 seconds')
        ON CONFLICT (name) DO UPDATE SET leader_id = 'w-live', expires_at = excluded.expires_at;
        """,
    )

    def run(
        job: dict[str, Any],
        due: float,
        state: str,
        *,
        priority: int = 0,
        worker_id: str | None = None,
        started: float | None = None,
        lease: float | None = None,
        finished: float | None = None,
        error: str | None = None,
        dead: bool = False,
    ) -> int:
        """A run due `due` seconds from now; the other times are offsets from now too."""
        rows = query(
            url,
            """
            INSERT INTO pgsched.runs (job_id, owner_id, due_at, slot_at, state, priority,
                                      worker_id, started_at, lease_expires_at, finished_at,
                                      error, dead)
            SELECT %(job)s, %(owner)s, t, t, %(state)s::pgsched.run_state, %(priority)s,
                   %(worker)s, now() + make_interval(secs => %(started)s),
                   now() + make_interval(secs => %(lease)s),
                   now() + make_interval(secs => %(finished)s), %(error)s, %(dead)s
              FROM (SELECT now() + make_interval(secs => %(due)s) AS t) AS d
            RETURNING id
            """,
            {
                "job": job["job_id"],
                "owner": job["owner_id"],
                "due": due,
                "state": state,
                "priority": priority,
                "worker": worker_id,
                "started": started,
                "lease": lease,
                "finished": finished,
                "error": error,
                "dead": dead,
            },
        )
        return int(rows[0]["id"])

    ids = {
        # ann: due 1 s ago (due, not late), due 60 s ago (late), one in an hour
        "ann_due": run(ann, -1, "queued"),
        "ann_late": run(ann, -60, "queued"),
        "ann_future": run(ann, 3600, "queued"),
        # bob: a priority-5 run late by 30 s, one running on the live worker
        "bob_late": run(bob, -30, "queued", priority=5),
        "bob_running": run(bob, -20, "running", worker_id="w-live", started=-19, lease=25),
        # failures: one recent failure, one old dead letter, one success (in neither)
        "ann_failed": run(ann, -600, "failed", finished=-540, error="boom"),
        "bob_dead": run(
            bob, -30 * 3600, "timed_out", finished=-30 * 3600, error="too slow", dead=True
        ),
        "ann_ok": run(ann, -180, "succeeded", finished=-180),
    }
    return {"jobs": jobs, "ids": ids}


def test_views_show_known_data(db_url: str) -> None:
    seeded = _seed(db_url)
    ids = seeded["ids"]

    due_now = {r["run_id"]: r for r in query(db_url, "SELECT * FROM pgsched.due_now")}
    assert set(due_now) == {ids["ann_due"], ids["ann_late"], ids["bob_late"]}
    assert due_now[ids["ann_late"]]["owner"] == "ann"
    assert 59 <= due_now[ids["ann_late"]]["waiting"].total_seconds() < 70

    late = {r["run_id"]: r for r in query(db_url, "SELECT * FROM pgsched.late")}
    assert set(late) == {ids["ann_late"], ids["bob_late"]}  # the default threshold is 10 s
    assert late[ids["bob_late"]]["priority"] == 5

    running = query(db_url, "SELECT * FROM pgsched.running")
    assert [r["run_id"] for r in running] == [ids["bob_running"]]
    assert running[0]["worker_id"] == "w-live"
    assert 1.5 <= running[0]["lease_age"].total_seconds() < 10  # its worker's last heartbeat
    assert running[0]["lease_expired"] is False
    assert 18 <= running[0]["running_for"].total_seconds() < 30

    failures = query(db_url, "SELECT * FROM pgsched.recent_failures ORDER BY run_id")
    assert [r["run_id"] for r in failures] == [ids["ann_failed"]]  # the dead one is 30 h old
    assert failures[0]["error"] == "boom"

    dead = query(db_url, "SELECT * FROM pgsched.dead_letters")
    assert [(r["run_id"], r["owner"], r["state"]) for r in dead] == [
        (ids["bob_dead"], "bob", "timed_out")
    ]

    stats = {
        (r["owner"], r["priority"]): r for r in query(db_url, "SELECT * FROM pgsched.queue_stats")
    }
    assert set(stats) == {("ann", 0), ("bob", 5), ("bob", 0)}
    ann = stats[("ann", 0)]
    assert (ann["due"], ann["scheduled"], ann["running"]) == (2, 1, 0)
    assert 59 <= ann["oldest_due_seconds"] < 70
    assert (stats[("bob", 5)]["due"], stats[("bob", 0)]["running"]) == (1, 1)

    workers = query(db_url, "SELECT * FROM pgsched.workers_live")
    assert [(w["worker_id"], w["is_leader"], w["running"]) for w in workers] == [
        ("w-live", True, 1)
    ]


def test_late_threshold_is_a_session_setting(db_url: str) -> None:
    ids = _seed(db_url)["ids"]
    with psycopg.connect(db_url, row_factory=dict_row, autocommit=True) as conn:
        conn.execute("SET pgsched.late_after = '45s'")
        late = [r["run_id"] for r in conn.execute("SELECT run_id FROM pgsched.late").fetchall()]
    assert late == [ids["ann_late"]]
