"""Model calls made beside a turn's steps (`model_calls`): a compaction's summarising requests,
with what each spent, so that a conversation's and a tenant's usage, the daily budgets and a bill
count every token a conversation cost, not only its turns' steps.

Not in `turns.usage`: a turn's steps there are indexed by step, and the step activity writes
that column whole; a compaction after a turn, or in a step before the model call, writes here
instead, one row per request, and never races the step's own write.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects.postgresql import JSONB

from think.storage.migrations._columns import conversation_ref, timestamp_now

revision = "0016"
down_revision = "0015"


def upgrade() -> None:
    op.create_table(
        "model_calls",
        sa.Column("id", sa.BigInteger, sa.Identity(), primary_key=True),
        conversation_ref(),
        sa.Column("turn_id", sa.String),
        sa.Column("purpose", sa.String, nullable=False),
        sa.Column("usage", JSONB, nullable=False),
        timestamp_now("created_at"),
    )
    # A conversation's calls, and a tenant's in a window (through its conversations).
    op.create_index(
        "model_calls_conversation_idx", "model_calls", ["conversation_uid", "created_at"]
    )


def downgrade() -> None:
    op.drop_table("model_calls")
