"""lean runs: drop runs_job_idx

(job_id, slot_at) is a prefix of runs_slot_key (job_id, slot_at, attempt, due_at), which
serves every lookup it served. A state change can never be a HOT update (state is in the
partial indexes' predicates), so every index costs a new entry on each insert, claim and
completion; this one bought nothing for it.

Revision ID: 0005
Revises: 0004
Create Date: 2026-11-21
"""

from collections.abc import Sequence

from alembic import op

revision: str = "0005"
down_revision: str | None = "0004"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.drop_index("runs_job_idx", table_name="runs", schema="pgsched")


def downgrade() -> None:
    op.create_index("runs_job_idx", "runs", ["job_id", "slot_at"], schema="pgsched")
