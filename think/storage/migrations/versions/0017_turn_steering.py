"""Steering a running turn (`turns.steering`): the user messages sent to a turn while it runs
(`POST …/turns/{id}/steer`), in the order they came. Each joins the turn's answer at its next
step boundary, as a `steering-message` part; one is delivered once the answer holds its part.

On the turn's row, not in a table of their own: every step reads the row already, and the
transaction that ends the turn locks it, so a steer either lands before the end (and the turn
takes another step for it) or finds the turn ended (409). Nothing is read when nobody steers.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects.postgresql import JSONB

revision = "0017"
down_revision = "0016"


def upgrade() -> None:
    op.add_column(
        "turns",
        sa.Column("steering", JSONB, nullable=False, server_default=sa.text("'[]'::jsonb")),
    )


def downgrade() -> None:
    op.drop_column("turns", "steering")
