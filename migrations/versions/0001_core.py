"""core engine: users, jobs, partitioned runs and run_logs, leaders, workers

Revision ID: 0001
Revises:
Create Date: 2026-11-21
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql as pg

revision: str = "0001"
down_revision: str | None = None
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

S = "pgsched"
TZ = sa.TIMESTAMP(timezone=True)
NOW = sa.text("now()")

ENUMS = {
    "schedule_kind": ("once", "cron", "interval"),
    "executor_kind": ("python", "http", "shell"),
    "job_state": ("active", "paused", "completed", "cancelled", "dead"),
    "run_state": (
        "queued",
        "running",
        "succeeded",
        "failed",
        "timed_out",
        "lost",
        "cancelled",
        "skipped",
    ),
    "overlap_policy": ("allow", "forbid", "replace"),
    "misfire_policy": ("run_once", "run_all", "skip"),
    "log_stream": ("stdout", "stderr", "log", "system"),
}


def _enum(name: str) -> pg.ENUM:
    return pg.ENUM(*ENUMS[name], name=name, schema=S, create_type=False)


# Partition maintenance lives in the database so that every process (and a person at
# psql) makes partitions the same way; the advisory lock serialises concurrent callers.
ENSURE_PARTITIONS = """
CREATE FUNCTION pgsched.ensure_partitions(p_from timestamptz, p_to timestamptz, p_minutes int)
RETURNS int LANGUAGE plpgsql AS $$
DECLARE
    span_s  bigint := p_minutes::bigint * 60;
    lo      timestamptz;
    hi      timestamptz;
    blocker record;
    made    int := 0;
    sfx     text;
BEGIN
    IF p_minutes < 1 THEN
        RAISE EXCEPTION 'partition span must be at least one minute';
    END IF;
    PERFORM pg_advisory_xact_lock(hashtext('pgsched.partitions'));
    lo := to_timestamp(floor(extract(epoch FROM p_from) / span_s) * span_s);
    WHILE lo < p_to LOOP
        -- A partition made with another span may already cover part of this range.
        SELECT * INTO blocker FROM pgsched.partitions
         WHERE lower_at <= lo AND upper_at > lo;
        IF FOUND THEN
            lo := blocker.upper_at;
            CONTINUE;
        END IF;
        hi := lo + make_interval(secs => span_s);
        SELECT min(lower_at) AS next_lower INTO blocker FROM pgsched.partitions
         WHERE lower_at > lo AND lower_at < hi;
        IF blocker.next_lower IS NOT NULL THEN
            hi := blocker.next_lower;
        END IF;
        sfx := to_char(lo AT TIME ZONE 'UTC', 'YYYYMMDD_HH24MI');
        EXECUTE format(
            'CREATE TABLE pgsched.%I PARTITION OF pgsched.runs FOR VALUES FROM (%L) TO (%L)',
            'runs_p' || sfx, lo, hi);
        EXECUTE format(
            'CREATE TABLE pgsched.%I PARTITION OF pgsched.run_logs FOR VALUES FROM (%L) TO (%L)',
            'run_logs_p' || sfx, lo, hi);
        INSERT INTO pgsched.partitions (suffix, lower_at, upper_at) VALUES (sfx, lo, hi);
        made := made + 1;
        lo := hi;
    END LOOP;
    RETURN made;
END $$;
"""

# Drops whole partitions (no mass DELETE, no bloat), but only those whose runs have all
# finished: a queued or running run in an old partition keeps it alive.
DROP_PARTITIONS = """
CREATE FUNCTION pgsched.drop_partitions(p_before timestamptz)
RETURNS SETOF text LANGUAGE plpgsql AS $$
DECLARE
    p      record;
    active boolean;
BEGIN
    PERFORM pg_advisory_xact_lock(hashtext('pgsched.partitions'));
    FOR p IN SELECT * FROM pgsched.partitions WHERE upper_at <= p_before ORDER BY lower_at LOOP
        EXECUTE format(
            'SELECT EXISTS (SELECT 1 FROM pgsched.%I WHERE state IN (''queued'', ''running''))',
            'runs_p' || p.suffix) INTO active;
        CONTINUE WHEN active;
        EXECUTE format('DROP TABLE pgsched.%I', 'run_logs_p' || p.suffix);
        EXECUTE format('DROP TABLE pgsched.%I', 'runs_p' || p.suffix);
        DELETE FROM pgsched.partitions WHERE suffix = p.suffix;
        RETURN NEXT p.suffix;
    END LOOP;
END $$;
"""

# Every insert of queued runs, whatever its path (planner, retry, reclaim, bulk load,
# psql), tells sleeping workers the earliest due time it added, so they wake on time.
NOTIFY_TRIGGER = """
CREATE FUNCTION pgsched.runs_notify_inserted() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    earliest timestamptz;
BEGIN
    SELECT min(due_at) INTO earliest FROM inserted WHERE state = 'queued';
    IF earliest IS NOT NULL THEN
        PERFORM pg_notify('pgsched_runs', extract(epoch FROM earliest)::text);
    END IF;
    RETURN NULL;
END $$;
CREATE TRIGGER runs_notify_inserted AFTER INSERT ON pgsched.runs
    REFERENCING NEW TABLE AS inserted
    FOR EACH STATEMENT EXECUTE FUNCTION pgsched.runs_notify_inserted();
"""


def upgrade() -> None:
    for name, values in ENUMS.items():
        pg.ENUM(*values, name=name, schema=S).create(op.get_bind())

    op.create_table(
        "users",
        sa.Column("id", sa.BigInteger, sa.Identity(), primary_key=True),
        sa.Column("username", sa.Text, nullable=False, unique=True),
        sa.Column("password_hash", sa.Text),
        sa.Column("job_weight", sa.Float, nullable=False, server_default="1"),
        sa.Column("is_admin", sa.Boolean, nullable=False, server_default=sa.false()),
        sa.Column("shell_allowed", sa.Boolean, nullable=False, server_default=sa.false()),
        sa.Column("vfinish", sa.Float, nullable=False, server_default="0"),
        sa.Column("created_at", TZ, nullable=False, server_default=NOW),
        sa.CheckConstraint("job_weight > 0", name="users_job_weight_positive"),
        schema=S,
    )
    op.create_table(
        "jobs",
        sa.Column("id", sa.BigInteger, sa.Identity(), primary_key=True),
        sa.Column(
            "owner_id",
            sa.BigInteger,
            sa.ForeignKey(f"{S}.users.id", ondelete="CASCADE"),
            nullable=False,
        ),
        sa.Column("name", sa.Text, nullable=False, server_default=""),
        sa.Column("message", sa.Text),
        sa.Column("state", _enum("job_state"), nullable=False, server_default="active"),
        sa.Column("schedule_kind", _enum("schedule_kind"), nullable=False),
        sa.Column("execute_at", TZ),
        sa.Column("cron", sa.Text),
        sa.Column("interval_seconds", sa.Float),
        sa.Column("anchor_at", TZ),
        sa.Column("timezone", sa.Text, nullable=False, server_default="UTC"),
        sa.Column("executor", _enum("executor_kind"), nullable=False),
        sa.Column("task", sa.Text),
        sa.Column("payload", pg.JSONB, nullable=False, server_default=sa.text("'{}'::jsonb")),
        sa.Column("timeout_seconds", sa.Float, nullable=False),
        sa.Column("max_attempts", sa.Integer, nullable=False),
        sa.Column("backoff_base_seconds", sa.Float, nullable=False),
        sa.Column("backoff_max_seconds", sa.Float, nullable=False),
        sa.Column("priority", sa.SmallInteger, nullable=False, server_default="0"),
        sa.Column("overlap", _enum("overlap_policy"), nullable=False, server_default="allow"),
        sa.Column("misfire", _enum("misfire_policy"), nullable=False, server_default="run_once"),
        sa.Column("starting_deadline_seconds", sa.Float),
        sa.Column("next_run_at", TZ),
        sa.Column("idempotency_key", sa.Text),
        sa.Column("created_at", TZ, nullable=False, server_default=NOW),
        sa.Column("updated_at", TZ, nullable=False, server_default=NOW),
        sa.UniqueConstraint("owner_id", "idempotency_key", name="jobs_owner_idempotency_key"),
        schema=S,
    )
    op.create_index(
        "jobs_plan_idx",
        "jobs",
        ["next_run_at"],
        schema=S,
        postgresql_where=sa.text("state = 'active' AND next_run_at IS NOT NULL"),
    )
    op.create_index("jobs_owner_idx", "jobs", ["owner_id", "id"], schema=S)

    op.execute(sa.schema.CreateSequence(sa.Sequence("runs_id_seq", schema=S)))
    op.create_table(
        "runs",
        sa.Column(
            "id",
            sa.BigInteger,
            nullable=False,
            server_default=sa.text(f"nextval('{S}.runs_id_seq')"),
        ),
        sa.Column("due_at", TZ, nullable=False),
        sa.Column("job_id", sa.BigInteger, nullable=False),
        sa.Column("owner_id", sa.BigInteger, nullable=False),
        sa.Column("slot_at", TZ, nullable=False),
        sa.Column("attempt", sa.Integer, nullable=False, server_default="1"),
        sa.Column("state", _enum("run_state"), nullable=False, server_default="queued"),
        sa.Column("priority", sa.SmallInteger, nullable=False, server_default="0"),
        sa.Column("vft", sa.Float, nullable=False, server_default="0"),
        sa.Column("worker_id", sa.Text),
        sa.Column("lease_expires_at", TZ),
        sa.Column("started_at", TZ),
        sa.Column("finished_at", TZ),
        sa.Column("error", sa.Text),
        sa.Column("cancel_requested", sa.Boolean, nullable=False, server_default=sa.false()),
        sa.Column("dead", sa.Boolean, nullable=False, server_default=sa.false()),
        sa.Column("created_at", TZ, nullable=False, server_default=NOW),
        sa.PrimaryKeyConstraint("id", "due_at", name="runs_pkey"),
        sa.UniqueConstraint("job_id", "slot_at", "attempt", "due_at", name="runs_slot_key"),
        schema=S,
        postgresql_partition_by="RANGE (due_at)",
    )
    op.create_index(
        "runs_claim_idx",
        "runs",
        [sa.text("priority DESC"), "vft", "due_at"],
        schema=S,
        postgresql_where=sa.text("state = 'queued'"),
    )
    op.create_index(
        "runs_due_idx", "runs", ["due_at"], schema=S, postgresql_where=sa.text("state = 'queued'")
    )
    op.create_index(
        "runs_lease_idx",
        "runs",
        ["lease_expires_at"],
        schema=S,
        postgresql_where=sa.text("state = 'running'"),
    )
    op.create_index("runs_job_idx", "runs", ["job_id", "slot_at"], schema=S)

    op.create_table(
        "run_logs",
        sa.Column("run_id", sa.BigInteger, nullable=False),
        sa.Column("run_due_at", TZ, nullable=False),
        sa.Column("seq", sa.Integer, nullable=False),
        sa.Column("at", TZ, nullable=False, server_default=NOW),
        sa.Column("stream", _enum("log_stream"), nullable=False),
        sa.Column("line", sa.Text, nullable=False),
        sa.PrimaryKeyConstraint("run_id", "run_due_at", "seq", name="run_logs_pkey"),
        schema=S,
        postgresql_partition_by="RANGE (run_due_at)",
    )
    op.create_table(
        "partitions",
        sa.Column("suffix", sa.Text, primary_key=True),
        sa.Column("lower_at", TZ, nullable=False, unique=True),
        sa.Column("upper_at", TZ, nullable=False),
        sa.CheckConstraint("upper_at > lower_at", name="partitions_range_valid"),
        schema=S,
    )
    op.create_table(
        "leaders",
        sa.Column("name", sa.Text, primary_key=True),
        sa.Column("leader_id", sa.Text, nullable=False),
        sa.Column("elected_at", TZ, nullable=False),
        sa.Column("expires_at", TZ, nullable=False),
        schema=S,
    )
    op.create_table(
        "workers",
        sa.Column("id", sa.Text, primary_key=True),
        sa.Column("hostname", sa.Text, nullable=False),
        sa.Column("pid", sa.Integer, nullable=False),
        sa.Column("concurrency", sa.Integer, nullable=False),
        sa.Column("running", sa.Integer, nullable=False, server_default="0"),
        sa.Column("started_at", TZ, nullable=False, server_default=NOW),
        sa.Column("heartbeat_at", TZ, nullable=False, server_default=NOW),
        schema=S,
    )
    op.execute(ENSURE_PARTITIONS)
    op.execute(DROP_PARTITIONS)
    op.execute(NOTIFY_TRIGGER)


def downgrade() -> None:
    op.execute(f"DROP TRIGGER runs_notify_inserted ON {S}.runs")
    op.execute(f"DROP FUNCTION {S}.runs_notify_inserted()")
    op.execute(f"DROP FUNCTION {S}.drop_partitions(timestamptz)")
    op.execute(f"DROP FUNCTION {S}.ensure_partitions(timestamptz, timestamptz, int)")
    for table in ("workers", "leaders", "partitions", "run_logs", "runs", "jobs", "users"):
        op.drop_table(table, schema=S)
    op.execute(f"DROP SEQUENCE {S}.runs_id_seq")
    for name in reversed(ENUMS):
        op.execute(f"DROP TYPE {S}.{name}")
