"""Where a turn's model steps can be picked up again (`turns.checkpoints`): per step fence, the
checkpoint its model gave (a background response's id at OpenAI), so that an attempt replacing
one whose worker died streams the same answer instead of asking, and paying, again.

Beside `fences`, not in it: `fences` holds counters only, and every reader of a turn reads them
as such.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects.postgresql import JSONB

revision = "0015"
down_revision = "0014"


def upgrade() -> None:
    op.add_column(
        "turns",
        sa.Column("checkpoints", JSONB, nullable=False, server_default=sa.text("'{}'::jsonb")),
    )


def downgrade() -> None:
    op.drop_column("turns", "checkpoints")
