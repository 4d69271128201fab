"""Announce a turn's status change on the stream channel (`think_chunks`, payload
`<turn id>/status`), so a caller waiting for a turn to settle (wait mode, `run_turn`) re-reads
the turn when its status changes instead of at every batch of chunks. A trigger rather than a
NOTIFY in each statement that sets a status: none of them can forget it.
"""

from __future__ import annotations

from alembic import op

revision = "0009"
down_revision = "0008"


def upgrade() -> None:
    op.execute(
        """
        CREATE FUNCTION think_turn_status_notify() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
            PERFORM pg_notify('think_chunks', NEW.id || '/status');
            RETURN NULL;
        END
        $$
        """
    )
    op.execute(
        """
        CREATE TRIGGER turns_status_notify AFTER UPDATE OF status ON turns
        FOR EACH ROW WHEN (OLD.status IS DISTINCT FROM NEW.status)
        EXECUTE FUNCTION think_turn_status_notify()
        """
    )


def downgrade() -> None:
    op.execute("DROP TRIGGER turns_status_notify ON turns")
    op.execute("DROP FUNCTION think_turn_status_notify()")
