"""What a turn runs with and what it produced: `before_turn`'s settings and structured output."""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects.postgresql import JSONB

revision = "0002"
down_revision = "0001"


def upgrade() -> None:
    # Nullable without a default: adding them rewrites no rows, whatever the table's size.
    op.add_column("turns", sa.Column("config", JSONB, nullable=True))
    op.add_column("turns", sa.Column("output", JSONB, nullable=True))


def downgrade() -> None:
    op.drop_column("turns", "output")
    op.drop_column("turns", "config")
