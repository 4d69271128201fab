"""What a turn stashed for its recovery (`turns.recovery_data`): the latest value a hook or tool
gave `Think.stash(value)` during the turn, shown to `on_chat_recovery` as `ctx.data` when the
turn is recovered (a worker crash, a model failure, a stall).

On the turn's row: it belongs to the turn and dies with it, and a crash recovery reads the row
anyway. Written only when the agent stashes, read only when a turn recovers: a turn that does
neither pays nothing for it.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects.postgresql import JSONB

revision = "0018"
down_revision = "0017"


def upgrade() -> None:
    op.add_column("turns", sa.Column("recovery_data", JSONB, nullable=True))


def downgrade() -> None:
    op.drop_column("turns", "recovery_data")
