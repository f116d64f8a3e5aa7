"""scheduling: fair-share clock, overlap gate on jobs

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-21
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0002"
down_revision: str | None = "0001"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

S = "pgsched"


def upgrade() -> None:
    op.create_table(
        "fair_clock",
        sa.Column("id", sa.SmallInteger, primary_key=True, server_default="1"),
        sa.Column("v", sa.Float, nullable=False, server_default="0"),
        sa.CheckConstraint("id = 1", name="fair_clock_single_row"),
        schema=S,
    )
    op.execute("INSERT INTO pgsched.fair_clock (id, v) VALUES (1, 0)")
    op.add_column("jobs", sa.Column("active_run_id", sa.BigInteger), schema=S)
    op.add_column("jobs", sa.Column("active_run_due_at", sa.TIMESTAMP(timezone=True)), schema=S)


def downgrade() -> None:
    op.drop_column("jobs", "active_run_due_at", schema=S)
    op.drop_column("jobs", "active_run_id", schema=S)
    op.drop_table("fair_clock", schema=S)
