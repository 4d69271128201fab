"""Compaction summaries: overlays over a span of a conversation's messages.

A row says "for the model, the messages from `first_message_id` to `last_message_id` read as
`summary`". The messages themselves are never touched, so `GET …/messages` still shows them all.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from think.storage.migrations._columns import conversation_ref, timestamp_now

revision = "0005"
down_revision = "0004"


def upgrade() -> None:
    op.create_table(
        "compactions",
        sa.Column("id", sa.BigInteger, sa.Identity(), primary_key=True),
        conversation_ref(),
        sa.Column("first_message_id", sa.String, nullable=False),
        sa.Column("last_message_id", sa.String, nullable=False),
        sa.Column("summary", sa.Text, nullable=False),
        sa.Column("tokens_before", sa.Integer, nullable=False),
        sa.Column("tokens_after", sa.Integer, nullable=False),
        sa.Column("trigger", sa.String, nullable=False),
        sa.Column("turn_id", sa.String),
        timestamp_now("created_at"),
        # One summary per span: a compaction retried after a crash stores nothing twice. Its
        # index also serves the reads for the model (a conversation's summaries).
        sa.UniqueConstraint(
            "conversation_uid", "first_message_id", "last_message_id", name="compactions_span_key"
        ),
    )
    # How often a turn has compacted (the overflow budgets).
    op.create_index(
        "compactions_turn_idx",
        "compactions",
        ["turn_id"],
        postgresql_where=sa.text("turn_id IS NOT NULL"),
    )


def downgrade() -> None:
    op.drop_table("compactions")
