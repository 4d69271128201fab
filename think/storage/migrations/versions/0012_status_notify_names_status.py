"""The status announcement names the new status (`<turn id>/status/<status>`), so the listener
wakes a caller waiting for a turn to settle only when it has (ended, or paused for a person),
not when it starts running: one re-read of the turn fewer per wait-mode turn.
"""

from __future__ import annotations

from alembic import op

revision = "0012"
down_revision = "0011"


def upgrade() -> None:
    op.execute(
        """
        CREATE OR REPLACE FUNCTION think_turn_status_notify() RETURNS trigger LANGUAGE plpgsql
        AS $$
        BEGIN
            PERFORM pg_notify('think_chunks', NEW.id || '/status/' || NEW.status);
            RETURN NULL;
        END
        $$
        """
    )


def downgrade() -> None:
    op.execute(
        """
        CREATE OR REPLACE FUNCTION think_turn_status_notify() RETURNS trigger LANGUAGE plpgsql
        AS $$
        BEGIN
            PERFORM pg_notify('think_chunks', NEW.id || '/status');
            RETURN NULL;
        END
        $$
        """
    )
