"""api: accounts' secrets, api keys, refresh tokens, signing key, notification outbox

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-21
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql as pg

revision: str = "0003"
down_revision: str | None = "0002"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

S = "pgsched"
TZ = sa.TIMESTAMP(timezone=True)
NOW = sa.text("now()")


def _user_fk() -> sa.ForeignKey:
    return sa.ForeignKey(f"{S}.users.id", ondelete="CASCADE")


def upgrade() -> None:
    op.add_column("users", sa.Column("webhook_secret", sa.Text), schema=S)
    op.add_column("jobs", sa.Column("notify_url", sa.Text), schema=S)
    op.add_column(
        "jobs",
        sa.Column("notify_on_success", sa.Boolean, nullable=False, server_default=sa.false()),
        schema=S,
    )
    op.add_column(
        "jobs",
        sa.Column("notify_on_failure", sa.Boolean, nullable=False, server_default=sa.false()),
        schema=S,
    )
    op.create_table(
        "api_keys",
        sa.Column("id", sa.BigInteger, sa.Identity(), primary_key=True),
        sa.Column("user_id", sa.BigInteger, _user_fk(), nullable=False),
        sa.Column("name", sa.Text, nullable=False),
        sa.Column("prefix", sa.Text, nullable=False),
        sa.Column("key_hash", sa.Text, nullable=False, unique=True),
        sa.Column("created_at", TZ, nullable=False, server_default=NOW),
        sa.Column("last_used_at", TZ),
        schema=S,
    )
    op.create_index("api_keys_user_idx", "api_keys", ["user_id"], schema=S)
    op.create_table(
        "refresh_tokens",
        sa.Column("id", sa.BigInteger, sa.Identity(), primary_key=True),
        sa.Column("user_id", sa.BigInteger, _user_fk(), nullable=False),
        sa.Column("token_hash", sa.Text, nullable=False, unique=True),
        sa.Column("expires_at", TZ, nullable=False),
        sa.Column("created_at", TZ, nullable=False, server_default=NOW),
        schema=S,
    )
    op.create_table(
        "secrets",
        sa.Column("name", sa.Text, primary_key=True),
        sa.Column("value", sa.Text, nullable=False),
        sa.Column("created_at", TZ, nullable=False, server_default=NOW),
        schema=S,
    )
    op.create_table(
        "notifications",
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
        schema=S,
    )
    op.create_index(
        "notifications_due_idx",
        "notifications",
        ["next_attempt_at"],
        schema=S,
        postgresql_where=sa.text("state = 'pending'"),
    )
    op.create_index("notifications_job_idx", "notifications", ["job_id", "id"], schema=S)
    op.create_index(
        "runs_dead_idx", "runs", ["finished_at"], schema=S, postgresql_where=sa.text("dead")
    )


def downgrade() -> None:
    op.drop_index("runs_dead_idx", table_name="runs", schema=S)
    for table in ("notifications", "secrets", "refresh_tokens", "api_keys"):
        op.drop_table(table, schema=S)
    for column in ("notify_on_failure", "notify_on_success", "notify_url"):
        op.drop_column("jobs", column, schema=S)
    op.drop_column("users", "webhook_secret", schema=S)
