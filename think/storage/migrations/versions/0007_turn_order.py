"""Turn order in Postgres, and answers recorded before any worker sees them.

- `turns.seq`: the order in which submissions were accepted (assigned under the
  conversation's row lock, so it is the acceptance order). A conversation's running turn is
  its active turn with the smallest `seq`; the others wait behind it.
- `turn_answers`: a person's approval decision or a client tool's result, recorded the moment
  it arrives (its primary key makes a second answer a 409), then signalled to the turn's
  workflow, which needs no live worker to accept it.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects.postgresql import JSONB

from think.storage.migrations._columns import timestamp_now

revision = "0007"
down_revision = "0006"


def upgrade() -> None:
    op.add_column("turns", sa.Column("seq", sa.BigInteger, sa.Identity(always=False)))
    op.create_index(
        "turns_queue_idx",
        "turns",
        ["conversation_uid", "seq"],
        postgresql_where=sa.text("completed_at IS NULL"),
    )
    op.create_table(
        "turn_answers",
        sa.Column(
            "turn_id", sa.String, sa.ForeignKey("turns.id", ondelete="CASCADE"), primary_key=True
        ),
        # "approval" (key: the approval id) or "tool-result" (key: the tool call id).
        sa.Column("kind", sa.String, primary_key=True),
        sa.Column("key", sa.String, primary_key=True),
        sa.Column("answer", JSONB, nullable=False),
        timestamp_now("created_at"),
    )


def downgrade() -> None:
    op.drop_table("turn_answers")
    op.drop_index("turns_queue_idx", table_name="turns")
    op.drop_column("turns", "seq")
