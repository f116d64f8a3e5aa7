"""views: the operator's psql views (due_now, running, late, recent_failures,
dead_letters, queue_stats, workers_live)

The same views feed `pgsched status`, the dashboard and the database gauges of
/metrics, so what an operator sees at psql is what every other view shows.

Revision ID: 0004
Revises: 0003
Create Date: 2026-11-21
"""

from collections.abc import Sequence

from alembic import op

revision: str = "0004"
down_revision: str | None = "0003"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

# `late` reads its threshold from a session setting so that a person at psql can say
# `SET pgsched.late_after = '30s'`; unset, it is 10 seconds (the lateness alert's level).
# `workers_live` counts a worker whose heartbeat is under 30 s old.

VIEWS = {
    "due_now": """
        SELECT r.id AS run_id, r.job_id, r.owner_id, u.username AS owner, j.name AS job_name,
               r.priority, r.attempt, r.due_at, now() - r.due_at AS waiting
          FROM pgsched.runs AS r
          JOIN pgsched.jobs AS j ON j.id = r.job_id
          JOIN pgsched.users AS u ON u.id = r.owner_id
         WHERE r.state = 'queued' AND r.due_at <= now()
    """,
    "running": """
        SELECT r.id AS run_id, r.job_id, r.owner_id, u.username AS owner, j.name AS job_name,
               r.attempt, r.worker_id, r.started_at, now() - r.started_at AS running_for,
               r.lease_expires_at, now() - w.heartbeat_at AS lease_age,
               r.lease_expires_at < now() AS lease_expired, r.cancel_requested
          FROM pgsched.runs AS r
          JOIN pgsched.jobs AS j ON j.id = r.job_id
          JOIN pgsched.users AS u ON u.id = r.owner_id
          LEFT JOIN pgsched.workers AS w ON w.id = r.worker_id
         WHERE r.state = 'running'
    """,
    "late": """
        SELECT r.id AS run_id, r.job_id, r.owner_id, u.username AS owner, j.name AS job_name,
               r.priority, r.attempt, r.due_at, now() - r.due_at AS late_by
          FROM pgsched.runs AS r
          JOIN pgsched.jobs AS j ON j.id = r.job_id
          JOIN pgsched.users AS u ON u.id = r.owner_id
         WHERE r.state = 'queued'
           AND r.due_at < now() - coalesce(
               nullif(current_setting('pgsched.late_after', true), ''), '10s')::interval
    """,
    "recent_failures": """
        SELECT r.id AS run_id, r.job_id, r.owner_id, u.username AS owner, j.name AS job_name,
               r.attempt, r.state, r.dead, r.worker_id, r.finished_at, r.error
          FROM pgsched.runs AS r
          JOIN pgsched.jobs AS j ON j.id = r.job_id
          JOIN pgsched.users AS u ON u.id = r.owner_id
         WHERE r.state IN ('failed', 'timed_out', 'lost')
           AND r.finished_at > now() - interval '24 hours'
           AND r.due_at > now() - interval '31 days'
    """,
    "dead_letters": """
        SELECT r.id AS run_id, r.job_id, r.owner_id, u.username AS owner, j.name AS job_name,
               r.slot_at, r.attempt, r.state, r.finished_at, r.error
          FROM pgsched.runs AS r
          JOIN pgsched.jobs AS j ON j.id = r.job_id
          JOIN pgsched.users AS u ON u.id = r.owner_id
         WHERE r.dead
    """,
    "queue_stats": """
        SELECT r.owner_id, u.username AS owner, r.priority,
               count(*) FILTER (WHERE r.state = 'queued' AND r.due_at <= now()) AS due,
               count(*) FILTER (WHERE r.state = 'queued' AND r.due_at > now()) AS scheduled,
               count(*) FILTER (WHERE r.state = 'running') AS running,
               coalesce(extract(epoch FROM now() - min(r.due_at)
                   FILTER (WHERE r.state = 'queued' AND r.due_at <= now())), 0)::float8
                   AS oldest_due_seconds
          FROM pgsched.runs AS r
          JOIN pgsched.users AS u ON u.id = r.owner_id
         WHERE r.state IN ('queued', 'running')
         GROUP BY r.owner_id, u.username, r.priority
    """,
    "workers_live": """
        SELECT w.id AS worker_id, w.hostname, w.pid, w.concurrency, w.running,
               w.started_at, w.heartbeat_at, now() - w.heartbeat_at AS heartbeat_age,
               coalesce(l.leader_id = w.id AND l.expires_at > now(), false) AS is_leader
          FROM pgsched.workers AS w
          LEFT JOIN pgsched.leaders AS l ON l.name = 'maintainer'
         WHERE w.heartbeat_at > now() - interval '30 seconds'
    """,
}


def upgrade() -> None:
    for name, body in VIEWS.items():
        op.execute(f"CREATE VIEW pgsched.{name} AS {body}")


def downgrade() -> None:
    for name in reversed(VIEWS):
        op.execute(f"DROP VIEW IF EXISTS pgsched.{name}")
