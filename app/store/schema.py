"""SQLAlchemy Core MetaData of schema `pgsched`: alembic's target, used for nothing else.

`runs` and `run_logs` are partitioned by range of the run's due time; their partitions
are made and dropped by the partition keeper (sql/partitions.sql), never declared here.
"""

from __future__ import annotations

from enum import StrEnum

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql as pg

from app.domain.models import (
    ExecutorKind,
    JobState,
    LogStream,
    MisfirePolicy,
    OverlapPolicy,
    RunState,
    ScheduleKind,
)

SCHEMA = "pgsched"
metadata = sa.MetaData(schema=SCHEMA)
TZ = sa.TIMESTAMP(timezone=True)
NOW = sa.text("now()")


def _enum(enum: type[StrEnum], name: str) -> pg.ENUM:
    return pg.ENUM(*[m.value for m in enum], name=name, schema=SCHEMA, create_type=False)


schedule_kind = _enum(ScheduleKind, "schedule_kind")
executor_kind = _enum(ExecutorKind, "executor_kind")
job_state = _enum(JobState, "job_state")
run_state = _enum(RunState, "run_state")
overlap_policy = _enum(OverlapPolicy, "overlap_policy")
misfire_policy = _enum(MisfirePolicy, "misfire_policy")
log_stream = _enum(LogStream, "log_stream")
ENUMS = (
    schedule_kind,
    executor_kind,
    job_state,
    run_state,
    overlap_policy,
    misfire_policy,
    log_stream,
)

users = sa.Table(
    "users",
    metadata,
    sa.Column("id", sa.BigInteger, sa.Identity(), primary_key=True),
    sa.Column("username", sa.Text, nullable=False, unique=True),
    sa.Column("password_hash", sa.Text),
    sa.Column("job_weight", sa.Float, nullable=False, server_default="1"),
    sa.Column("is_admin", sa.Boolean, nullable=False, server_default=sa.false()),
    sa.Column("shell_allowed", sa.Boolean, nullable=False, server_default=sa.false()),
    # Fair share: the virtual finish time of this user's latest run (stride scheduling).
    sa.Column("vfinish", sa.Float, nullable=False, server_default="0"),
    sa.Column("created_at", TZ, nullable=False, server_default=NOW),
    # Signs this user's webhook deliveries (HMAC-SHA256).
    sa.Column("webhook_secret", sa.Text),
    sa.CheckConstraint("job_weight > 0", name="users_job_weight_positive"),
)

jobs = sa.Table(
    "jobs",
    metadata,
    sa.Column("id", sa.BigInteger, sa.Identity(), primary_key=True),
    sa.Column(
        "owner_id",
        sa.BigInteger,
        sa.ForeignKey("pgsched.users.id", ondelete="CASCADE"),
        nullable=False,
    ),
    sa.Column("name", sa.Text, nullable=False, server_default=""),
    sa.Column("message", sa.Text),
    sa.Column("state", job_state, nullable=False, server_default="active"),
    sa.Column("schedule_kind", schedule_kind, nullable=False),
    sa.Column("execute_at", TZ),
    sa.Column("cron", sa.Text),
    sa.Column("interval_seconds", sa.Float),
    sa.Column("anchor_at", TZ),
    sa.Column("timezone", sa.Text, nullable=False, server_default="UTC"),
    sa.Column("executor", executor_kind, nullable=False),
    sa.Column("task", sa.Text),
    sa.Column("payload", pg.JSONB, nullable=False, server_default=sa.text("'{}'::jsonb")),
    sa.Column("timeout_seconds", sa.Float, nullable=False),
    sa.Column("max_attempts", sa.Integer, nullable=False),
    sa.Column("backoff_base_seconds", sa.Float, nullable=False),
    sa.Column("backoff_max_seconds", sa.Float, nullable=False),
    sa.Column("priority", sa.SmallInteger, nullable=False, server_default="0"),
    sa.Column("overlap", overlap_policy, nullable=False, server_default="allow"),
    sa.Column("misfire", misfire_policy, nullable=False, server_default="run_once"),
    sa.Column("starting_deadline_seconds", sa.Float),
    # The planner's cursor: the next slot not yet materialised as a run.
    sa.Column("next_run_at", TZ),
    # Overlap gate (forbid/replace): the run last admitted to execute.
    sa.Column("active_run_id", sa.BigInteger),
    sa.Column("active_run_due_at", TZ),
    sa.Column("notify_url", sa.Text),
    sa.Column("notify_on_success", sa.Boolean, nullable=False, server_default=sa.false()),
    sa.Column("notify_on_failure", sa.Boolean, nullable=False, server_default=sa.false()),
    sa.Column("idempotency_key", sa.Text),
    sa.Column("created_at", TZ, nullable=False, server_default=NOW),
    sa.Column("updated_at", TZ, nullable=False, server_default=NOW),
    sa.UniqueConstraint("owner_id", "idempotency_key", name="jobs_owner_idempotency_key"),
    sa.Index(
        "jobs_plan_idx",
        "next_run_at",
        postgresql_where=sa.text("state = 'active' AND next_run_at IS NOT NULL"),
    ),
    sa.Index("jobs_owner_idx", "owner_id", "id"),
)

runs_id_seq = sa.Sequence("runs_id_seq", schema=SCHEMA, metadata=metadata)

runs = sa.Table(
    "runs",
    metadata,
    sa.Column("id", sa.BigInteger, runs_id_seq, server_default=runs_id_seq.next_value()),
    sa.Column("due_at", TZ, nullable=False),
    sa.Column("job_id", sa.BigInteger, nullable=False),
    sa.Column("owner_id", sa.BigInteger, nullable=False),
    sa.Column("slot_at", TZ, nullable=False),
    sa.Column("attempt", sa.Integer, nullable=False, server_default="1"),
    sa.Column("state", run_state, nullable=False, server_default="queued"),
    sa.Column("priority", sa.SmallInteger, nullable=False, server_default="0"),
    sa.Column("vft", sa.Float, nullable=False, server_default="0"),
    sa.Column("worker_id", sa.Text),
    sa.Column("lease_expires_at", TZ),
    sa.Column("started_at", TZ),
    sa.Column("finished_at", TZ),
    sa.Column("error", sa.Text),
    sa.Column("cancel_requested", sa.Boolean, nullable=False, server_default=sa.false()),
    # The final failed attempt of a slot that exhausted its retries: a dead letter.
    sa.Column("dead", sa.Boolean, nullable=False, server_default=sa.false()),
    sa.Column("created_at", TZ, nullable=False, server_default=NOW),
    # Postgres requires the partition key in every unique key of a partitioned table.
    sa.PrimaryKeyConstraint("id", "due_at", name="runs_pkey"),
    sa.UniqueConstraint("job_id", "slot_at", "attempt", "due_at", name="runs_slot_key"),
    # The claim walks this in claim order; partial, so finished history costs it nothing.
    sa.Index(
        "runs_claim_idx",
        sa.text("priority DESC"),
        "vft",
        "due_at",
        postgresql_where=sa.text("state = 'queued'"),
    ),
    sa.Index("runs_due_idx", "due_at", postgresql_where=sa.text("state = 'queued'")),
    sa.Index("runs_lease_idx", "lease_expires_at", postgresql_where=sa.text("state = 'running'")),
    sa.Index("runs_dead_idx", "finished_at", postgresql_where=sa.text("dead")),
    postgresql_partition_by="RANGE (due_at)",
)

run_logs = sa.Table(
    "run_logs",
    metadata,
    sa.Column("run_id", sa.BigInteger, nullable=False),
    sa.Column("run_due_at", TZ, nullable=False),
    sa.Column("seq", sa.Integer, nullable=False),
    sa.Column("at", TZ, nullable=False, server_default=NOW),
    sa.Column("stream", log_stream, nullable=False),
    sa.Column("line", sa.Text, nullable=False),
    sa.PrimaryKeyConstraint("run_id", "run_due_at", "seq", name="run_logs_pkey"),
    postgresql_partition_by="RANGE (run_due_at)",
)

# Fair share: the system's virtual time, the highest virtual finish time claimed so far.
# A user who was idle re-enters at this time rather than with banked credit.
fair_clock = sa.Table(
    "fair_clock",
    metadata,
    sa.Column("id", sa.SmallInteger, primary_key=True, server_default="1"),
    sa.Column("v", sa.Float, nullable=False, server_default="0"),
    sa.CheckConstraint("id = 1", name="fair_clock_single_row"),
)

# The keeper's registry of the partitions it made: one row covers the same range of
# `runs` and `run_logs`, so both are created and dropped together.
partitions = sa.Table(
    "partitions",
    metadata,
    sa.Column("suffix", sa.Text, primary_key=True),
    sa.Column("lower_at", TZ, nullable=False, unique=True),
    sa.Column("upper_at", TZ, nullable=False),
    sa.CheckConstraint("upper_at > lower_at", name="partitions_range_valid"),
)

leaders = sa.Table(
    "leaders",
    metadata,
    sa.Column("name", sa.Text, primary_key=True),
    sa.Column("leader_id", sa.Text, nullable=False),
    sa.Column("elected_at", TZ, nullable=False),
    sa.Column("expires_at", TZ, nullable=False),
)

workers = sa.Table(
    "workers",
    metadata,
    sa.Column("id", sa.Text, primary_key=True),
    sa.Column("hostname", sa.Text, nullable=False),
    sa.Column("pid", sa.Integer, nullable=False),
    sa.Column("concurrency", sa.Integer, nullable=False),
    sa.Column("running", sa.Integer, nullable=False, server_default="0"),
    sa.Column("started_at", TZ, nullable=False, server_default=NOW),
    sa.Column("heartbeat_at", TZ, nullable=False, server_default=NOW),
)


def _user_fk() -> sa.ForeignKey:
    return sa.ForeignKey("pgsched.users.id", ondelete="CASCADE")


api_keys = sa.Table(
    "api_keys",
    metadata,
    sa.Column("id", sa.BigInteger, sa.Identity(), primary_key=True),
    sa.Column("user_id", sa.BigInteger, _user_fk(), nullable=False),
    sa.Column("name", sa.Text, nullable=False),
    sa.Column("prefix", sa.Text, nullable=False),  # shown in lists; the key itself never is
    sa.Column("key_hash", sa.Text, nullable=False, unique=True),
    sa.Column("created_at", TZ, nullable=False, server_default=NOW),
    sa.Column("last_used_at", TZ),
    sa.Index("api_keys_user_idx", "user_id"),
)

refresh_tokens = sa.Table(
    "refresh_tokens",
    metadata,
    sa.Column("id", sa.BigInteger, sa.Identity(), primary_key=True),
    sa.Column("user_id", sa.BigInteger, _user_fk(), nullable=False),
    sa.Column("token_hash", sa.Text, nullable=False, unique=True),
    sa.Column("expires_at", TZ, nullable=False),
    sa.Column("created_at", TZ, nullable=False, server_default=NOW),
)

# Generated secrets every API replica must share (the token signing key when the
# operator sets none).
secrets = sa.Table(
    "secrets",
    metadata,
    sa.Column("name", sa.Text, primary_key=True),
    sa.Column("value", sa.Text, nullable=False),
    sa.Column("created_at", TZ, nullable=False, server_default=NOW),
)

# The outbox of webhook deliveries, written in the transaction that records a run's
# final state, so no notification is lost between the two.
notifications = sa.Table(
    "notifications",
    metadata,
    sa.Column("id", sa.BigInteger, sa.Identity(), primary_key=True),
    sa.Column("owner_id", sa.BigInteger, nullable=False),
    sa.Column("job_id", sa.BigInteger, nullable=False),
    sa.Column("run_id", sa.BigInteger, nullable=False),
    sa.Column("event", sa.Text, nullable=False),
    sa.Column("url", sa.Text, nullable=False),
    sa.Column("payload", pg.JSONB, nullable=False),
    sa.Column("state", sa.Text, nullable=False, server_default="pending"),
    sa.Column("attempts", sa.Integer, nullable=False, server_default="0"),
    sa.Column("next_attempt_at", TZ, nullable=False, server_default=NOW),
    sa.Column("last_status", sa.Integer),
    sa.Column("last_error", sa.Text),
    sa.Column("history", pg.JSONB, nullable=False, server_default=sa.text("'[]'::jsonb")),
    sa.Column("created_at", TZ, nullable=False, server_default=NOW),
    sa.Column("delivered_at", TZ),
    sa.UniqueConstraint("run_id", "event", name="notifications_run_event_key"),
    sa.CheckConstraint(
        "state IN ('pending', 'delivered', 'failed')", name="notifications_state_valid"
    ),
    sa.Index(
        "notifications_due_idx", "next_attempt_at", postgresql_where=sa.text("state = 'pending'")
    ),
    sa.Index("notifications_job_idx", "job_id", "id"),
)
