"""deferred wake: an inserting transaction may send its workers' wake-up itself

PostgreSQL holds a database-wide lock from a notifying transaction's pre-commit until its
commit is flushed, so inserts that each NOTIFY commit one at a time, never in a group.
A transaction that sets `pgsched.wake = 'deferred'` (runs_insert_slots does, when asked)
takes on the wake-up: its process sends one NOTIFY after the commit, for any number of
inserts (app.store.waker). Every other insert (the planner's, a retry's, a row typed at
psql) still wakes the workers from this trigger.

Revision ID: 0006
Revises: 0005
Create Date: 2026-11-21
"""

from collections.abc import Sequence

from alembic import op

revision: str = "0006"
down_revision: str | None = "0005"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

FUNCTION = """
CREATE OR REPLACE FUNCTION pgsched.runs_notify_inserted() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
    earliest timestamptz;
BEGIN
    IF {skip} THEN
        RETURN NULL;
    END IF;
    SELECT min(due_at) INTO earliest FROM inserted WHERE state = 'queued';
    IF earliest IS NOT NULL THEN
        PERFORM pg_notify('pgsched_runs', extract(epoch FROM earliest)::text);
    END IF;
    RETURN NULL;
END $$
"""


def upgrade() -> None:
    op.execute(FUNCTION.format(skip="current_setting('pgsched.wake', true) = 'deferred'"))


def downgrade() -> None:
    op.execute(FUNCTION.format(skip="false"))
