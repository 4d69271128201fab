"""Submissions merged into another turn (`message_concurrency` "merge" and "debounce") point
to the turn that answered them; a partial index finds a conversation's active turns.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0004"
down_revision = "0003"


def upgrade() -> None:
    # Nullable without a default: adding it rewrites no rows, whatever the table's size.
    op.add_column("turns", sa.Column("answered_by", sa.String, nullable=True))
    # A conversation's active turns (every ended turn has `completed_at`): what a "drop"
    # admission looks for, without reading the conversation's whole history of turns.
    op.create_index(
        "turns_active_idx",
        "turns",
        ["conversation_uid"],
        postgresql_where=sa.text("completed_at IS NULL"),
    )


def downgrade() -> None:
    op.drop_index("turns_active_idx", table_name="turns")
    op.drop_column("turns", "answered_by")
